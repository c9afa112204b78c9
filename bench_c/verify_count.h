/*
 * verify_count.h - the frame of the verifier counters (falcon_vt/falcon_count.c,
 * mldsa_vt/mldsa_count.c): the same inputs verified in several modes, counted under
 * callgrind or timed round by round.
 *
 * A program fills in a verify_counter (its modes, how to make the inputs, how to verify
 * all N of them once in one mode) and calls verify_count_main. Two commands:
 *   PROGRAM count MODE [N] [VARIANT]    verify the N signatures once inside
 *       measured_verifies(), for `valgrind --tool=callgrind --toggle-collect=measured_verifies`
 *       (bench_c/count.sh divides the inclusive instruction count by N).
 *   PROGRAM time [SECONDS] [N] [VARIANT] ops/s of every mode in one run, interleaved round
 *       by round so a busy machine slows all alike; one JSON object per line: ops_per_s
 *       over all rounds, ratio_to_liboqs (mode 0 is liboqs's), and median_round_ops_per_s,
 *       the median round's rate (what the machine gives when the others leave it alone).
 * Every verdict is checked: a mode that accepts fewer than all N valid signatures exits 1.
 *
 * The inputs (verify_inputs: one key, N distinct 64-byte messages, their signatures, and
 * the same laid out for a batch call) come from liboqs with a fixed seed (splitmix64 as
 * its randomness), so every run verifies the same key and signatures. With
 * QMEMO_COUNT_INPUTS=DIR they are kept in DIR/<scheme>-<N>.bin and read back by the
 * next run: callgrind runs everything it counts under valgrind, signing included, and
 * signing N SPHINCS+ signatures there took minutes (bench_c/count.sh sets it).
 *
 * Header-only: each counter is one file plus this.
 */
#ifndef QMEMO_BENCH_VERIFY_COUNT_H
#define QMEMO_BENCH_VERIFY_COUNT_H

#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c11 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <oqs/oqs.h>

#define VERIFY_COUNT_MSG_BYTES 64 /* the size of a qMEMO signing digest (BLAKE3-512) */

/* One key, n messages and their signatures; the same back to back (pk, msg, sig) for a
 * batch call (the layout of qfv_verify_batch / qmv_verify_batch / qmemo_verify_batch). */
typedef struct {
	OQS_SIG *oqs;
	size_t n, pk_len, max_sig;
	uint8_t *pk, *msgs, *sigs; /* n messages, n signatures of max_sig bytes' room each */
	size_t *sig_lens;
	uint8_t *blob, *ok;
	uint64_t *lengths, blob_len;
} verify_inputs;

typedef struct {
	int mode_count;
	const char *const *modes;     /* mode 0 is liboqs's own verify: the reference of every ratio */
	const char *default_variant;
	/* Get ready to verify `in` (its cache warmed, ...); 0 on success. */
	int (*setup)(const verify_inputs *in);
	/* Verify all n once in `mode`; returns how many were valid. */
	size_t (*run)(int mode);
	/* What runs in `mode` ("liboqs", "avx2", ...), for the JSON. */
	const char *(*implementation)(int mode);
	void (*teardown)(void);
} verify_counter;

static verify_inputs vc_in; /* the inputs of this run (one per program) */

/* splitmix64 as liboqs's randomness: the same key and signatures on every run. */
static uint64_t verify_count_seed = 20261123u;
static inline void verify_count_randombytes(uint8_t *out, size_t len) {
	while (len > 0) {
		uint64_t z = (verify_count_seed += 0x9E3779B97F4A7C15u);
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
		z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
		z ^= z >> 31;
		size_t k = len < 8 ? len : 8;
		memcpy(out, &z, k);
		out += k, len -= k;
	}
}

static inline void verify_inputs_free(verify_inputs *in) {
	OQS_SIG_free(in->oqs);
	free(in->pk), free(in->msgs), free(in->sigs), free(in->sig_lens), free(in->blob), free(in->lengths), free(in->ok);
	memset(in, 0, sizeof *in);
}

/* Read (or, once read fails, write) the signing part of `in` at `path`. 1 if read. */
static inline int verify_inputs_file(verify_inputs *in, const char *path, int write) {
	FILE *f = fopen(path, write ? "wb" : "rb");
	if (f == NULL) {
		return 0;
	}
	size_t n = in->n, ok = write ? fwrite(in->pk, in->pk_len, 1, f) + fwrite(in->msgs, VERIFY_COUNT_MSG_BYTES, n, f) +
	                                   fwrite(in->sigs, in->max_sig, n, f) + fwrite(in->sig_lens, sizeof(size_t), n, f)
	                             : fread(in->pk, in->pk_len, 1, f) + fread(in->msgs, VERIFY_COUNT_MSG_BYTES, n, f) +
	                                   fread(in->sigs, in->max_sig, n, f) + fread(in->sig_lens, sizeof(size_t), n, f);
	fclose(f);
	return ok == 1 + 3 * n;
}

/* n signatures of n distinct messages by one key of scheme `name` (see the top). */
static inline int verify_inputs_make(verify_inputs *in, const char *name, size_t n) {
	memset(in, 0, sizeof *in);
	in->oqs = OQS_SIG_new(name);
	if (in->oqs == NULL) {
		return -1;
	}
	in->n = n, in->pk_len = in->oqs->length_public_key, in->max_sig = in->oqs->length_signature;
	in->pk = malloc(in->pk_len);
	in->msgs = malloc(n * VERIFY_COUNT_MSG_BYTES);
	in->sigs = malloc(n * in->max_sig);
	in->sig_lens = malloc(n * sizeof *in->sig_lens);
	in->blob = malloc(n * (in->pk_len + VERIFY_COUNT_MSG_BYTES + in->max_sig));
	in->lengths = malloc(3 * n * sizeof *in->lengths);
	in->ok = malloc(n);
	uint8_t *sk = malloc(in->oqs->length_secret_key);
	int rc = -1;
	char path[4096] = "";
	const char *dir = getenv("QMEMO_COUNT_INPUTS");
	if (dir != NULL && *dir) {
		snprintf(path, sizeof path, "%s/%s-%zu.bin", dir, name, n);
	}
	if (!in->pk || !in->msgs || !in->sigs || !in->sig_lens || !in->blob || !in->lengths || !in->ok || !sk) {
		goto cleanup;
	}
	if (!*path || !verify_inputs_file(in, path, 0)) {
		if (OQS_SIG_keypair(in->oqs, in->pk, sk) != OQS_SUCCESS) {
			goto cleanup;
		}
		verify_count_randombytes(in->msgs, n * VERIFY_COUNT_MSG_BYTES);
		for (size_t i = 0; i < n; i++) {
			if (OQS_SIG_sign(in->oqs, in->sigs + i * in->max_sig, &in->sig_lens[i], in->msgs + i * VERIFY_COUNT_MSG_BYTES,
			                 VERIFY_COUNT_MSG_BYTES, sk) != OQS_SUCCESS) {
				goto cleanup;
			}
		}
		if (*path && !verify_inputs_file(in, path, 1)) {
			fprintf(stderr, "could not keep the inputs in %s\n", path);
		}
	}
	uint8_t *at = in->blob;
	for (size_t i = 0; i < n; i++) {
		memcpy(at, in->pk, in->pk_len), at += in->pk_len;
		memcpy(at, in->msgs + i * VERIFY_COUNT_MSG_BYTES, VERIFY_COUNT_MSG_BYTES), at += VERIFY_COUNT_MSG_BYTES;
		memcpy(at, in->sigs + i * in->max_sig, in->sig_lens[i]), at += in->sig_lens[i];
		in->lengths[3 * i] = in->pk_len, in->lengths[3 * i + 1] = VERIFY_COUNT_MSG_BYTES;
		in->lengths[3 * i + 2] = in->sig_lens[i];
	}
	in->blob_len = (uint64_t) (at - in->blob);
	rc = 0;
cleanup:
	if (sk) {
		OQS_MEM_cleanse(sk, in->oqs->length_secret_key);
		free(sk);
	}
	return rc;
}

/* Message i and signature i of `in`. */
static inline const uint8_t *verify_inputs_msg(const verify_inputs *in, size_t i) {
	return in->msgs + i * VERIFY_COUNT_MSG_BYTES;
}
static inline const uint8_t *verify_inputs_sig(const verify_inputs *in, size_t i) {
	return in->sigs + i * in->max_sig;
}

/* Every signature of `in` through OQS_SIG_verify (behind the caller's length check): mode 0. */
static inline size_t verify_inputs_liboqs(const verify_inputs *in) {
	size_t valid = 0;
	for (size_t i = 0; i < in->n; i++) {
		valid += in->sig_lens[i] <= in->max_sig &&
		         OQS_SIG_verify(in->oqs, verify_inputs_msg(in, i), VERIFY_COUNT_MSG_BYTES, verify_inputs_sig(in, i),
		                        in->sig_lens[i], in->pk) == OQS_SUCCESS;
	}
	return valid;
}

/* The measured region for callgrind (--toggle-collect): exactly one pass over the inputs. */
__attribute__((noinline)) size_t measured_verifies(const verify_counter *counter, int mode);
__attribute__((noinline)) size_t measured_verifies(const verify_counter *counter, int mode) {
	return counter->run(mode);
}

static inline double verify_count_now_s(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec + 1e-9 * (double) ts.tv_nsec;
}

static int verify_count_by_value(const void *a, const void *b) {
	double x = *(const double *) a, y = *(const double *) b;
	return (x > y) - (x < y);
}

/* The median of one mode's round times (rounds >= 1), from round_s[rounds][modes]. */
static inline double verify_count_median(const double *round_s, size_t rounds, int modes, int mode) {
	double *times = malloc(rounds * sizeof *times);
	if (times == NULL) {
		return 0.0;
	}
	for (size_t r = 0; r < rounds; r++) {
		times[r] = round_s[r * (size_t) modes + (size_t) mode];
	}
	qsort(times, rounds, sizeof *times, verify_count_by_value);
	double median = rounds % 2 ? times[rounds / 2] : 0.5 * (times[rounds / 2 - 1] + times[rounds / 2]);
	free(times);
	return median;
}

static inline int verify_count_time(const verify_counter *c, const char *variant, size_t n, double seconds) {
	double spent[16] = {0}, *round_s = NULL;
	size_t rounds = 0, capacity = 0;
	double started = verify_count_now_s();
	do {
		if (rounds == capacity) {
			capacity = capacity ? 2 * capacity : 1024;
			double *grown = realloc(round_s, capacity * (size_t) c->mode_count * sizeof *round_s);
			if (grown == NULL) {
				free(round_s);
				return 1;
			}
			round_s = grown;
		}
		for (int m = 0; m < c->mode_count; m++) {
			double t0 = verify_count_now_s();
			size_t valid = measured_verifies(c, m);
			double took = verify_count_now_s() - t0;
			round_s[rounds * (size_t) c->mode_count + (size_t) m] = took;
			spent[m] += took;
			if (valid != n) {
				fprintf(stderr, "%s accepted %zu of %zu valid signatures\n", c->modes[m], valid, n);
				free(round_s);
				return 1;
			}
		}
		rounds++;
	} while (verify_count_now_s() - started < seconds);
	for (int m = 0; m < c->mode_count; m++) {
		double ops = (double) (rounds * n) / spent[m];
		printf("{\"variant\": \"%s\", \"mode\": \"%s\", \"implementation\": \"%s\", \"verifies\": %zu, "
		       "\"ops_per_s\": %.1f, \"us_per_op\": %.3f, \"ratio_to_liboqs\": %.3f, \"median_round_ops_per_s\": %.1f}\n",
		       variant, c->modes[m], c->implementation(m), rounds * n, ops, 1e6 / ops, spent[0] / spent[m],
		       (double) n / verify_count_median(round_s, rounds, c->mode_count, m));
	}
	free(round_s);
	return 0;
}

static inline int verify_count_main(const verify_counter *c, int argc, char **argv) {
	int counting = argc >= 3 && strcmp(argv[1], "count") == 0;
	int timing = argc >= 2 && strcmp(argv[1], "time") == 0;
	if ((!counting && !timing) || c->mode_count > 16) {
		fprintf(stderr, "usage: %s count MODE [N] [VARIANT]\n       %s time [SECONDS] [N] [VARIANT]\nmodes:", argv[0],
		        argv[0]);
		for (int m = 0; m < c->mode_count; m++) {
			fprintf(stderr, " %s", c->modes[m]);
		}
		fputc('\n', stderr);
		return 2;
	}
	int only = -1;
	for (int m = 0; counting && m < c->mode_count; m++) {
		only = strcmp(c->modes[m], argv[2]) == 0 ? m : only;
	}
	double seconds = timing && argc > 2 ? atof(argv[2]) : 2.0;
	size_t n = argc > 3 ? strtoull(argv[3], NULL, 10) : 200;
	const char *variant = argc > 4 ? argv[4] : c->default_variant;
	if ((counting && only < 0) || n == 0) {
		fprintf(stderr, "%s: bad mode or N\n", argv[0]);
		return 2;
	}
	OQS_init();
	OQS_randombytes_custom_algorithm(verify_count_randombytes);
	int rc = 1;
	if (verify_inputs_make(&vc_in, variant, n) != 0 || c->setup(&vc_in) != 0) {
		fprintf(stderr, "%s: could not make inputs for %s\n", argv[0], variant);
	} else if (counting) {
		size_t valid = measured_verifies(c, only);
		printf("{\"variant\": \"%s\", \"mode\": \"%s\", \"implementation\": \"%s\", \"verifies\": %zu, \"valid\": %zu}\n",
		       variant, c->modes[only], c->implementation(only), n, valid);
		rc = valid == n ? 0 : 1;
	} else {
		rc = verify_count_time(c, variant, n, seconds);
	}
	c->teardown();
	verify_inputs_free(&vc_in);
	OQS_destroy();
	return rc;
}

#endif
