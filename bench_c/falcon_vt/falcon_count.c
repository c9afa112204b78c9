/*
 * falcon_count.c - Falcon verify cost, liboqs against falcon_vt, on the same inputs.
 *
 * One key, N distinct 64-byte messages (the size of a qMEMO signing digest, BLAKE3-512)
 * and their signatures, made by liboqs from a fixed seed. Three ways to verify them:
 *   liboqs     OQS_SIG_verify (the caller's length checks included)
 *   uncached   qfv_verify: the public key decoded on every call
 *   cached     qfv_verify_cached with the key already in the cache (warmed outside the
 *              measured function)
 *
 * Modes:
 *   falcon_count count MODE [N] [VARIANT]   verify the N signatures once inside
 *       measured_verifies(), for `valgrind --tool=callgrind --toggle-collect=measured_verifies`
 *       (bench_c/falcon_vt/count.sh divides the inclusive instruction count by N).
 *   falcon_count time [SECONDS] [N] [VARIANT] ops/s of all three in one run, interleaved
 *       round by round so a busy machine slows all three alike; one JSON object per line:
 *       ops_per_s over all rounds, and median_round_ops_per_s, the median round's rate
 *       (what the machine gives when the others leave it alone: the statistic
 *       qmemo-fndsa-bench reports as median_ops_per_s over its batches).
 * Every verdict is checked: a signature that fails, or a mode that disagrees, exits 1.
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c11 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <oqs/oqs.h>

#include "falcon_vt.h"

#define MSG_BYTES 64

enum mode { MODE_LIBOQS, MODE_UNCACHED, MODE_CACHED, MODE_COUNT };
static const char *MODE_NAMES[MODE_COUNT] = {"liboqs", "uncached", "cached"};

typedef struct {
	OQS_SIG *oqs;
	int variant;
	size_t n;
	uint8_t *pk, *msgs, *sigs; /* n messages, n signatures of length_signature bytes each */
	size_t *sig_lens;
	qfv_cache *cache;
} inputs;

/* splitmix64 as liboqs's randomness: the same key and signatures on every run. */
static uint64_t seed_state = 20261123u;
static void fixed_randombytes(uint8_t *out, size_t len) {
	while (len > 0) {
		uint64_t z = (seed_state += 0x9E3779B97F4A7C15u);
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
		z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
		z ^= z >> 31;
		size_t k = len < 8 ? len : 8;
		memcpy(out, &z, k);
		out += k, len -= k;
	}
}

static int make_inputs(inputs *in, const char *name, size_t n) {
	memset(in, 0, sizeof *in);
	OQS_randombytes_custom_algorithm(fixed_randombytes);
	in->variant = qfv_variant(name);
	in->oqs = OQS_SIG_new(name);
	if (in->variant < 0 || in->oqs == NULL) {
		fprintf(stderr, "falcon_count: unknown variant %s\n", name);
		return -1;
	}
	in->n = n;
	in->pk = malloc(in->oqs->length_public_key);
	in->msgs = malloc(n * MSG_BYTES);
	in->sigs = malloc(n * in->oqs->length_signature);
	in->sig_lens = malloc(n * sizeof *in->sig_lens);
	in->cache = qfv_cache_new(64);
	uint8_t *sk = malloc(in->oqs->length_secret_key);
	int rc = -1;
	if (!in->pk || !in->msgs || !in->sigs || !in->sig_lens || !in->cache || !sk ||
	        OQS_SIG_keypair(in->oqs, in->pk, sk) != OQS_SUCCESS) {
		goto cleanup;
	}
	fixed_randombytes(in->msgs, n * MSG_BYTES);
	for (size_t i = 0; i < n; i++) {
		if (OQS_SIG_sign(in->oqs, in->sigs + i * in->oqs->length_signature, &in->sig_lens[i], in->msgs + i * MSG_BYTES,
		                 MSG_BYTES, sk) != OQS_SUCCESS) {
			goto cleanup;
		}
	}
	rc = 0;
cleanup:
	if (sk) {
		OQS_MEM_cleanse(sk, in->oqs->length_secret_key);
		free(sk);
	}
	return rc;
}

static void free_inputs(inputs *in) {
	qfv_cache_free(in->cache);
	OQS_SIG_free(in->oqs);
	free(in->pk), free(in->msgs), free(in->sigs), free(in->sig_lens);
}

static int verify_one(const inputs *in, enum mode mode, size_t i) {
	const uint8_t *msg = in->msgs + i * MSG_BYTES, *sig = in->sigs + i * in->oqs->length_signature;
	size_t pk_len = in->oqs->length_public_key, sig_len = in->sig_lens[i];
	switch (mode) {
	case MODE_LIBOQS:
		return sig_len <= in->oqs->length_signature &&
		       OQS_SIG_verify(in->oqs, msg, MSG_BYTES, sig, sig_len, in->pk) == OQS_SUCCESS;
	case MODE_UNCACHED:
		return qfv_verify(in->variant, in->pk, pk_len, msg, MSG_BYTES, sig, sig_len);
	default:
		return qfv_verify_cached(in->cache, in->variant, in->pk, pk_len, msg, MSG_BYTES, sig, sig_len);
	}
}

/* The measured region for callgrind (--toggle-collect): exactly n verifies. */
__attribute__((noinline)) size_t measured_verifies(const inputs *in, enum mode mode) {
	size_t valid = 0;
	for (size_t i = 0; i < in->n; i++) {
		valid += (size_t) verify_one(in, mode, i);
	}
	return valid;
}

static double now_s(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

static int by_value(const void *a, const void *b) {
	double x = *(const double *) a, y = *(const double *) b;
	return (x > y) - (x < y);
}

/* The median of one mode's round times (rounds >= 1); sorts a copy. */
static double median_round(const double *round_s, size_t rounds, int mode) {
	double *times = malloc(rounds * sizeof *times);
	if (times == NULL) {
		return 0.0;
	}
	for (size_t r = 0; r < rounds; r++) {
		times[r] = round_s[r * MODE_COUNT + mode];
	}
	qsort(times, rounds, sizeof *times, by_value);
	double median = rounds % 2 ? times[rounds / 2] : 0.5 * (times[rounds / 2 - 1] + times[rounds / 2]);
	free(times);
	return median;
}

static enum mode mode_of(const char *name) {
	for (int m = 0; m < MODE_COUNT; m++) {
		if (strcmp(MODE_NAMES[m], name) == 0) {
			return (enum mode) m;
		}
	}
	return MODE_COUNT;
}

int main(int argc, char **argv) {
	int counting = argc >= 3 && strcmp(argv[1], "count") == 0;
	int timing = argc >= 2 && strcmp(argv[1], "time") == 0;
	if (!counting && !timing) {
		fprintf(stderr, "usage: %s count liboqs|uncached|cached [N] [VARIANT]\n"
		        "       %s time [SECONDS] [N] [VARIANT]\n", argv[0], argv[0]);
		return 2;
	}
	enum mode only = counting ? mode_of(argv[2]) : MODE_COUNT;
	double seconds = timing && argc > 2 ? atof(argv[2]) : 2.0;
	size_t n = argc > 3 ? strtoull(argv[3], NULL, 10) : 200;
	const char *variant = argc > 4 ? argv[4] : "Falcon-512";
	if ((counting && only == MODE_COUNT) || n == 0) {
		fprintf(stderr, "falcon_count: bad mode or N\n");
		return 2;
	}
	OQS_init();
	inputs in;
	int rc = 1;
	double *round_s = NULL; /* time mode: each round's seconds, MODE_COUNT per round */
	if (make_inputs(&in, variant, n) != 0) {
		goto cleanup;
	}
	if (!verify_one(&in, MODE_CACHED, 0)) { /* warms the cache: the key is decoded once, here */
		goto cleanup;
	}
	if (counting) {
		size_t valid = measured_verifies(&in, only);
		printf("{\"variant\": \"%s\", \"mode\": \"%s\", \"implementation\": \"%s\", \"verifies\": %zu, \"valid\": %zu}\n",
		       variant, MODE_NAMES[only], only == MODE_LIBOQS ? "liboqs" : qfv_implementation(), n, valid);
		rc = valid == n ? 0 : 1;
		goto cleanup;
	}
	/* Interleaved rounds: each round verifies all n signatures once in every mode. */
	double spent[MODE_COUNT] = {0};
	size_t rounds = 0, capacity = 0;
	double started = now_s();
	do {
		if (rounds == capacity) {
			capacity = capacity ? 2 * capacity : 1024;
			double *grown = realloc(round_s, capacity * MODE_COUNT * sizeof *round_s);
			if (grown == NULL) {
				goto cleanup;
			}
			round_s = grown;
		}
		for (int m = 0; m < MODE_COUNT; m++) {
			double t0 = now_s();
			size_t valid = measured_verifies(&in, (enum mode) m);
			round_s[rounds * MODE_COUNT + m] = now_s() - t0;
			spent[m] += round_s[rounds * MODE_COUNT + m];
			if (valid != n) {
				fprintf(stderr, "falcon_count: %s accepted %zu of %zu valid signatures\n", MODE_NAMES[m], valid, n);
				goto cleanup;
			}
		}
		rounds++;
	} while (now_s() - started < seconds);
	for (int m = 0; m < MODE_COUNT; m++) {
		double ops = (double) (rounds * n) / spent[m];
		printf("{\"variant\": \"%s\", \"mode\": \"%s\", \"implementation\": \"%s\", \"verifies\": %zu, "
		       "\"ops_per_s\": %.1f, \"us_per_op\": %.3f, \"ratio_to_liboqs\": %.3f, \"median_round_ops_per_s\": %.1f}\n",
		       variant, MODE_NAMES[m], m == MODE_LIBOQS ? "liboqs" : qfv_implementation(), rounds * n, ops,
		       1e6 / ops, spent[MODE_LIBOQS] / spent[m], (double) n / median_round(round_s, rounds, m));
	}
	rc = 0;
cleanup:
	free(round_s);
	free_inputs(&in);
	OQS_destroy();
	return rc;
}
