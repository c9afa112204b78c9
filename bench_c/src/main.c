/* main.c - `qmemo-bench <benchmark> [flags]`: flag parsing, the system header, the
 * JSON envelope, and one cleanup path around the benchmark functions.
 *
 * JSON envelope (every benchmark, see docs/benchmarks.md):
 *   {"schema": "qmemo-c-bench/1", "benchmark", "argv", "params", "system",
 *    "started_utc", "results": {...}, "ok", "exit_code", "finished_utc", "wall_s",
 *    "loadavg_end"}
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "sysinfo.h"
#include "timing.h"

#define QB_SCHEMA "qmemo-c-bench/1"

/* A benchmark, its one-line description and its defaults. A zero default means
 * "not used by this benchmark" (iterations: time by --duration instead). */
typedef struct {
	const char *name;
	int (*fn)(const qb_opts *, qb_json *);
	const char *help;
	const char *alg;
	uint64_t iterations, trials, batch;
	double duration_s;
	bool threads_list; /* --threads defaults to 1..cores (else: cores) */
} command;

static const command COMMANDS[] = {
	{"verify", bench_verify, "single timed pass of N verifications", "Falcon-512", 10000, 0, 0, 0, false},
	{"statistical", bench_statistical, "trials x batch verifications: the full distribution", "Falcon-512", 0, 1000,
	 100, 0, false},
	{"compare", bench_compare, "keygen/sign/verify for a list of schemes, with ratios", "Falcon-512,ML-DSA-44", 0, 0,
	 0, 1.0, false},
	{"multicore", bench_multicore, "verify (or --op sign) throughput at 1..N threads", "Falcon-512", 0, 0, 0, 2.0,
	 true},
	{"pool", bench_pool, "worker pool + task queue vs sequential, per block of tasks", "Falcon-512", 4000, 5, 0, 0,
	 false},
	{"sizes", bench_sizes, "signature-length distribution", "falcon", 10000, 0, 0, 0, false},
	{"classical", bench_classical, "ECDSA secp256k1 and Ed25519 via libsecp256k1, libsodium, OpenSSL", "classical",
	 0, 0, 0, 1.0, false},
	{"all", bench_all, "every scheme built plus the classical ones: sizes and rates", "all", 0, 0, 0, 1.0, false},
	{"inspect", bench_inspect, "correctness checks; exit 1 on any surprise", "all", 3, 0, 0, 0, false},
	{"invalid", bench_invalid, "verification cost of invalid signatures", "Falcon-512,ML-DSA-44", 0, 0, 0, 1.0,
	 false},
	{"list", bench_list, "the schemes this build can measure, with sizes", "all", 0, 0, 0, 0, false},
	{"stats", bench_stats, "statistics of numbers read from stdin (tests the stats module)", "", 0, 0, 0, 0, false},
};
#define N_COMMANDS (sizeof COMMANDS / sizeof COMMANDS[0])

static void usage(FILE *f) {
	fprintf(f, "usage: qmemo-bench <benchmark> [flags]\n\nbenchmarks:\n");
	for (size_t i = 0; i < N_COMMANDS; i++) {
		fprintf(f, "  %-12s %s\n", COMMANDS[i].name, COMMANDS[i].help);
	}
	fprintf(f, "\nflags (each benchmark uses those that apply):\n"
	           "  --alg LIST         schemes or groups (all, pq, classical, falcon), comma-separated\n"
	           "  --iterations N     operations (verify, sizes, inspect; pool: tasks per block;\n"
	           "                     compare/all/classical/invalid: fixed count instead of --duration)\n"
	           "  --trials N         trials (statistical) or blocks (pool)\n"
	           "  --batch N          operations per trial (statistical)\n"
	           "  --threads LIST     thread counts (multicore) or pool workers, e.g. 1,2,4\n"
	           "  --duration S       seconds per measurement (per row in multicore)\n"
	           "  --warmup S         untimed warm-up before each measurement (default 0.1)\n"
	           "  --msg-bytes N      message length (default 256)\n"
	           "  --ring N           distinct signed messages per workload (default %d)\n"
	           "  --op verify|sign   operation for multicore (default verify)\n"
	           "  --seed N           seed for messages and mutations (default 1)\n"
	           "  --json FILE        write the results as JSON\n"
	           "  --corrupt-signature  test hook: inspect corrupts each signature (must fail)\n",
	        QB_RING_DEFAULT);
}

/* Counts above this are typos, and capping them keeps every size product (count x count
 * x element size) far below 2^64, so no allocation size can wrap around. */
#define MAX_COUNT 100000000ULL

static int parse_u64(const char *s, uint64_t *out) {
	char *end = NULL;
	errno = 0;
	if (!isdigit((unsigned char) s[0])) {    /* strtoull would skip spaces and accept "-1" */
		return -1;
	}
	unsigned long long v = strtoull(s, &end, 10);
	if (end == s || *end != '\0' || errno != 0 || v > MAX_COUNT) {
		return -1;
	}
	*out = v;
	return 0;
}

static int parse_seconds(const char *s, double *out) {
	char *end = NULL;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || *end != '\0' || errno != 0 || !isfinite(v) || v < 0) {
		return -1;
	}
	*out = v;
	return 0;
}

enum {
	OPT_ALG = 256, OPT_ITER, OPT_TRIALS, OPT_BATCH, OPT_THREADS, OPT_DURATION, OPT_WARMUP, OPT_MSG,
	OPT_RING, OPT_OP, OPT_SEED, OPT_JSON, OPT_CORRUPT, OPT_HELP,
};

/* Parse flags into o (already holding the benchmark's defaults). */
static int parse_flags(int argc, char **argv, qb_opts *o) {
	static const struct option longopts[] = {
		{"alg", required_argument, NULL, OPT_ALG},
		{"iterations", required_argument, NULL, OPT_ITER},
		{"trials", required_argument, NULL, OPT_TRIALS},
		{"batch", required_argument, NULL, OPT_BATCH},
		{"threads", required_argument, NULL, OPT_THREADS},
		{"duration", required_argument, NULL, OPT_DURATION},
		{"warmup", required_argument, NULL, OPT_WARMUP},
		{"msg-bytes", required_argument, NULL, OPT_MSG},
		{"ring", required_argument, NULL, OPT_RING},
		{"op", required_argument, NULL, OPT_OP},
		{"seed", required_argument, NULL, OPT_SEED},
		{"json", required_argument, NULL, OPT_JSON},
		{"corrupt-signature", no_argument, NULL, OPT_CORRUPT},
		{"help", no_argument, NULL, OPT_HELP},
		{NULL, 0, NULL, 0},
	};
	int c, idx = -1;
	uint64_t v;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", longopts, &idx)) != -1) {
		int bad = 0;
		switch (c) {
		case OPT_ALG: o->alg = optarg; break;
		case OPT_ITER: bad = parse_u64(optarg, &o->iterations) || o->iterations == 0; break;
		case OPT_TRIALS: bad = parse_u64(optarg, &o->trials) || o->trials == 0; break;
		case OPT_BATCH: bad = parse_u64(optarg, &o->batch) || o->batch == 0; break;
		case OPT_THREADS: o->threads = optarg; break;
		case OPT_DURATION: bad = parse_seconds(optarg, &o->duration_s) || o->duration_s == 0; break;
		case OPT_WARMUP: bad = parse_seconds(optarg, &o->warmup_s); break;
		case OPT_MSG: bad = parse_u64(optarg, &v) || v > (1u << 20); o->msg_bytes = (size_t) v; break;
		case OPT_RING: bad = parse_u64(optarg, &v) || v == 0 || v > 100000; o->ring = (size_t) v; break;
		case OPT_OP: o->op = optarg; break;
		case OPT_SEED: bad = parse_u64(optarg, &o->seed); break;
		case OPT_JSON: o->json_path = optarg; break;
		case OPT_CORRUPT: o->corrupt_signature = true; break;
		case OPT_HELP: usage(stdout); exit(QB_EXIT_OK);
		default:
			fprintf(stderr, "error: unknown flag or missing value: %s\n", argv[optind - 1]);
			return -1;
		}
		if (bad) {
			fprintf(stderr, "error: bad value for --%s: '%s'\n", longopts[idx].name, optarg);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "error: unexpected argument '%s'\n", argv[optind]);
		return -1;
	}
	return 0;
}

static void params_json(qb_json *j, const qb_opts *o) {
	qb_json_object(j, "params");
	qb_json_str(j, "alg", o->alg);
	qb_json_uint(j, "iterations", o->iterations);
	qb_json_uint(j, "trials", o->trials);
	qb_json_uint(j, "batch", o->batch);
	qb_json_str(j, "threads", o->threads);
	qb_json_num(j, "duration_s", o->duration_s);
	qb_json_num(j, "warmup_s", o->warmup_s);
	qb_json_uint(j, "msg_bytes", o->msg_bytes);
	qb_json_uint(j, "ring", o->ring);
	qb_json_str(j, "op", o->op);
	qb_json_uint(j, "seed", o->seed);
	qb_json_str(j, "rng", "OpenSSL DRBG via OQS_randombytes (keys, signing); splitmix64(seed) (messages)");
	qb_json_end(j);
}

int main(int argc, char **argv) {
	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? QB_EXIT_USAGE : QB_EXIT_OK;
	}
	const command *cmd = NULL;
	for (size_t i = 0; i < N_COMMANDS; i++) {
		if (strcmp(argv[1], COMMANDS[i].name) == 0) {
			cmd = &COMMANDS[i];
		}
	}
	if (cmd == NULL) {
		fprintf(stderr, "error: unknown benchmark '%s'\n", argv[1]);
		usage(stderr);
		return QB_EXIT_USAGE;
	}

	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	if (cores < 1) {
		cores = 1;
	}
	char threads_default[512] = "";
	if (cmd->threads_list) {
		for (long t = 1; t <= cores && t <= QB_MAX_LIST; t++) {
			size_t used = strlen(threads_default);
			snprintf(threads_default + used, sizeof threads_default - used, "%s%ld", t > 1 ? "," : "", t);
		}
	} else {
		snprintf(threads_default, sizeof threads_default, "%ld", cores);
	}
	qb_opts o = {
		.alg = cmd->alg,
		.iterations = cmd->iterations,
		.trials = cmd->trials,
		.batch = cmd->batch,
		.threads = threads_default,
		.duration_s = cmd->duration_s,
		/* 0.1 s of untimed operations before each measurement: thousands of Falcon
		 * verifications, and long enough for the core's clock to settle. */
		.warmup_s = 0.1,
		.msg_bytes = 256, /* MEMO's transaction body */
		.ring = QB_RING_DEFAULT,
		.op = "verify",
		.seed = 1,
	};
	if (parse_flags(argc - 1, argv + 1, &o) != 0) {
		return QB_EXIT_USAGE;
	}

	int ret = QB_EXIT_FAIL;
	FILE *jf = NULL;
	qb_json j;
	qb_sysinfo sys;
	bool quiet = strcmp(cmd->name, "stats") == 0 || strcmp(cmd->name, "list") == 0;
	double t0 = qb_now_s();

	if (o.json_path != NULL && (jf = fopen(o.json_path, "w")) == NULL) {
		fprintf(stderr, "error: cannot write %s: %s\n", o.json_path, strerror(errno));
		return QB_EXIT_USAGE;
	}
	qb_json_init(&j, jf);
	if (qb_schemes_init() != 0) {
		goto cleanup; /* nothing measured: the JSON file stays empty */
	}
	qb_sysinfo_collect(&sys);
	if (!quiet) {
		qb_sysinfo_print(stdout, &sys);
		printf("%s\n", cmd->name);
		for (size_t k = 0; cmd->name[k]; k++) {
			putchar('=');
		}
		printf("\n");
		fflush(stdout);
	}
	qb_json_object(&j, NULL);
	qb_json_str(&j, "schema", QB_SCHEMA);
	qb_json_str(&j, "benchmark", cmd->name);
	qb_json_array(&j, "argv");
	for (int i = 0; i < argc; i++) {
		qb_json_str(&j, NULL, argv[i]);
	}
	qb_json_end(&j);
	params_json(&j, &o);
	qb_sysinfo_json(&j, "system", &sys);
	qb_json_str(&j, "started_utc", sys.date_utc);

	ret = cmd->fn(&o, &j);

	qb_json_unwind(&j, 1); /* a failed benchmark may leave objects open */
	qb_json_bool(&j, "ok", ret == QB_EXIT_OK);
	qb_json_int(&j, "exit_code", ret);
	char now[32];
	qb_utc_now(now, sizeof now);
	qb_json_str(&j, "finished_utc", now);
	qb_json_num(&j, "wall_s", qb_now_s() - t0);
	qb_loadavg_json(&j, "loadavg_end");
	qb_json_end(&j);
cleanup:
	qb_schemes_cleanup();
	if (jf != NULL) {
		/* fclose reports only its own final flush; a write that failed earlier (disk
		 * full mid-file) leaves only the stream's error flag behind. */
		bool write_failed = ferror(jf) != 0;
		if (fclose(jf) != 0 || write_failed) {
			fprintf(stderr, "error: writing %s failed\n", o.json_path);
			ret = QB_EXIT_FAIL;
		}
	}
	return ret;
}
