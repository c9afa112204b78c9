/*
 * falcon_arith.h - the fast verifier's own arithmetic checked piece by piece, before the
 * differential harness compares whole verdicts (falcon_diff.c runs it first).
 *
 * Why: a whole-verdict comparison sees the norm only through "<= bound", and random
 * signatures land far from the bound; an arithmetic slip of a few units would pass it.
 * Here the exact values are compared:
 *   - the AVX2 norm (falcon_vt_avx2.c) against a schoolbook negacyclic product mod q,
 *     for random inputs and the extremes of the overflow schedule (falcon_vt_avx2.c's
 *     comment): h at 6144 and 6145 (centred +-6144, the largest magnitudes) in sign
 *     patterns, against |s2| = 2047 in sign patterns; and h at 0 and q - 1 (centred 0
 *     and -1: edge cases of the centring, not of the magnitude);
 *   - the AVX2 hash-to-point sampler against the obvious loop, on random SHAKE-sized
 *     blocks with many, few or no rejected words;
 *   - falcon_vt_comp_decode (portable, and the BMI2 build where the CPU has it) against
 *     PQClean's comp_decode: return value and every decoded coefficient, on encodings
 *     made by PQClean's comp_encode, then mutated (bit flips, truncation, extension,
 *     random bytes).
 * Header-only, like falcon_pool.h: falcon_diff.c runs it all; falcon_fuzz.c uses
 * arith_decoders and arith_decode_case on every fuzzed signature.
 */
#ifndef QMEMO_TESTS_FALCON_ARITH_H
#define QMEMO_TESTS_FALCON_ARITH_H

#include "falcon_pool.h"
#include "falcon_vt_codec.h"
#ifdef QFV_HAVE_AVX2
#include "falcon_vt_avx2.h"
#endif

#define ARITH_Q 12289

size_t PQCLEAN_FALCON1024_CLEAN_comp_encode(void *out, size_t max_out_len, const int16_t *x, unsigned logn);
size_t PQCLEAN_FALCON1024_CLEAN_comp_decode(int16_t *x, unsigned logn, const void *in, size_t max_in_len);

/* ||s2*h - c0 mod (x^n + 1, q), centred||^2 + ||s2||^2 the slow, obvious way. */
static inline uint64_t arith_reference_norm(const uint16_t *c0, const int16_t *s2, const uint16_t *h, unsigned logn) {
	size_t n = (size_t) 1 << logn;
	static int64_t prod[1024];
	memset(prod, 0, sizeof prod);
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j < n; j++) {
			int64_t t = (int64_t) s2[i] * h[j];
			if (i + j < n) {
				prod[i + j] += t;
			} else {
				prod[i + j - n] -= t; /* x^n = -1 */
			}
		}
	}
	uint64_t norm = 0;
	for (size_t i = 0; i < n; i++) {
		int64_t d = ((prod[i] - c0[i]) % ARITH_Q + ARITH_Q) % ARITH_Q;
		d -= d > ARITH_Q / 2 ? ARITH_Q : 0;
		norm += (uint64_t) (d * d) + (uint64_t) ((int64_t) s2[i] * s2[i]);
	}
	return norm;
}

#ifdef QFV_HAVE_AVX2
/* Compare one case; prints it and returns 1 on a difference. */
static inline int arith_norm_case(const uint16_t *c0, const int16_t *s2, const uint16_t *h, unsigned logn, const char *kind) {
	int16_t hh[1024] __attribute__((aligned(32)));
	falcon_vt_avx2_prepare_key(hh, h, logn);
	uint64_t got = falcon_vt_avx2_norm(c0, s2, hh, logn), want = arith_reference_norm(c0, s2, h, logn);
	if (got != want) {
		fprintf(stderr, "ARITH norm (%s, logn %u): avx2 %" PRIu64 ", reference %" PRIu64 "\n", kind, logn, got, want);
		return 1;
	}
	return 0;
}

static inline size_t arith_check_norm(pool_rng *r, size_t *checks) {
	static uint16_t c0[1024], h[1024];
	static int16_t s2[1024];
	size_t failures = 0;
	for (unsigned logn = 9; logn <= 10; logn++) {
		size_t n = (size_t) 1 << logn;
		for (int k = 0; k < (logn == 9 ? 192 : 48); k++) {
			/* 0-3 random of several sizes; 4-7 h at 0 / q - 1; 8-11 |h| = 6144 (largest
			 * magnitude) by sign: all +, all -, alternating, random; against s2 = +-2047
			 * by sign, its pattern cycling with k / 12 (every pair for logn 9). */
			int pattern = k % 12, s2_signs = (k / 12) % 4;
			for (size_t i = 0; i < n; i++) {
				c0[i] = (uint16_t) pool_below(r, ARITH_Q);
				h[i] = (uint16_t) pool_below(r, ARITH_Q);
				int span = pattern == 0 ? 2047 : pattern == 1 ? 300 : pattern == 2 ? 5 : 2047;
				s2[i] = (int16_t) ((int) pool_below(r, 2 * (uint64_t) span + 1) - span);
				if (pattern >= 4) { /* extremes: |s2| = 2047, h in {0, q - 1} by sign patterns */
					s2[i] = (pattern & 1) || (i & 1) ? 2047 : -2047;
					h[i] = (uint16_t) ((pattern & 2) || (pool_next(r) & 1) ? ARITH_Q - 1 : 0);
					c0[i] = pattern == 7 ? ARITH_Q - 1 : c0[i];
				}
				if (pattern >= 8) {
					int h_plus = pattern == 8 || (pattern == 10 && (i & 1)) || (pattern == 11 && (pool_next(r) & 1));
					int s2_plus = s2_signs == 0 || (s2_signs == 2 && (i & 1)) ||
					              (s2_signs == 3 && (pool_next(r) & 1));
					h[i] = (uint16_t) (h_plus ? 6144 : 6145); /* 6145 = q - 6144: centred -6144 */
					s2[i] = (int16_t) (s2_plus ? 2047 : -2047);
				}
			}
			failures += (size_t) arith_norm_case(c0, s2, h, logn,
			                                     pattern >= 8 ? "|h| 6144" : pattern >= 4 ? "h 0/q-1" : "random");
			(*checks)++;
		}
	}
	return failures;
}

static inline size_t arith_check_hash_block(pool_rng *r, size_t *checks) {
	uint8_t block[FALCON_VT_HASH_BLOCK_BYTES];
	uint16_t got[FALCON_VT_HASH_BLOCK_BYTES / 2 + FALCON_VT_HASH_BLOCK_SLACK], want[FALCON_VT_HASH_BLOCK_BYTES / 2];
	size_t failures = 0;
	for (int k = 0; k < 4000; k++) {
		pool_bytes(r, block, sizeof block);
		for (size_t i = 0; i < sizeof block; i += 2) { /* a high byte >= 0xF0 makes rejection likely */
			block[i] |= (uint8_t) (k % 4 == 0 ? 0 : k % 4 == 1 ? 0xF0 : (pool_next(r) & 1) ? 0xF0 : 0);
		}
		size_t want_count = 0;
		for (size_t i = 0; i < sizeof block; i += 2) {
			uint32_t w = ((uint32_t) block[i] << 8) | block[i + 1];
			if (w < 61445) {
				want[want_count++] = (uint16_t) (w % ARITH_Q);
			}
		}
		size_t got_count = falcon_vt_avx2_hash_block(got, block);
		if (got_count != want_count || memcmp(got, want, want_count * sizeof *want) != 0) {
			fprintf(stderr, "ARITH hash block %d: avx2 kept %zu, reference %zu\n", k, got_count, want_count);
			failures++;
		}
		(*checks)++;
	}
	return failures;
}

#endif

typedef size_t (*arith_decoder)(int16_t *x, unsigned logn, const uint8_t *in, size_t max_in_len);

/* Every decoder agrees with PQClean's on `in`: the same length, and when accepted the same coefficients. */
static inline int arith_decode_case(const uint8_t *in, size_t len, unsigned logn, const arith_decoder *ours, int count) {
	static int16_t want[1024], got[1024];
	size_t want_len = PQCLEAN_FALCON1024_CLEAN_comp_decode(want, logn, in, len);
	for (int k = 0; k < count; k++) {
		size_t got_len = ours[k](got, logn, in, len);
		if (got_len != want_len || (want_len != 0 && memcmp(got, want, sizeof(int16_t) << logn) != 0)) {
			fprintf(stderr, "ARITH comp_decode #%d (logn %u, %zu bytes): ours %zu, PQClean %zu\n", k, logn, len,
			        got_len, want_len);
			return 1;
		}
	}
	return 0;
}

/* Our decoders this CPU runs: the portable one, and the BMI2 build where the library
 * dispatches the AVX2 implementation to it (qfv_decoder, asked with AVX2 selected, then
 * the implementation put back): the test follows the library's dispatch, not a CPUID
 * check of its own. */
static inline int arith_decoders(arith_decoder ours[2]) {
	int count = 0;
	ours[count++] = falcon_vt_comp_decode;
#ifdef QFV_HAVE_AVX2
	const char *was = qfv_implementation();
	if (qfv_select_implementation("avx2") == 0 && strcmp(qfv_decoder(), "bmi2") == 0) {
		ours[count++] = falcon_vt_comp_decode_bmi2;
	}
	qfv_select_implementation(was);
#endif
	return count;
}

static inline size_t arith_check_decode(pool_rng *r, size_t *checks) {
	arith_decoder ours[2];
	int count = arith_decoders(ours);
	static uint8_t buf[4096];
	static int16_t x[1024];
	size_t failures = 0;
	for (int k = 0; k < 20000; k++) {
		unsigned logn = k % 4 == 0 ? 10 : 9;
		size_t n = (size_t) 1 << logn;
		int span = (int) pool_below(r, 4) == 0 ? 2047 : 1 + (int) pool_below(r, 400);
		for (size_t i = 0; i < n; i++) {
			x[i] = (int16_t) ((int) pool_below(r, 2 * (uint64_t) span + 1) - span);
		}
		size_t len = PQCLEAN_FALCON1024_CLEAN_comp_encode(buf, sizeof buf - 64, x, logn);
		if (len == 0) {
			continue;
		}
		switch (k % 6) {
		case 0: /* as encoded */
			break;
		case 1: /* a bit flipped: sign, value, unary part or the last byte's padding */
			buf[pool_below(r, len)] ^= (uint8_t) (1u << pool_below(r, 8));
			break;
		case 2: /* truncated */
			len = pool_below(r, len + 1);
			break;
		case 3: /* extended by random or zero bytes */
		{
			size_t extra = 1 + pool_below(r, 32);
			if (pool_next(r) & 1) {
				pool_bytes(r, buf + len, extra);
			} else {
				memset(buf + len, 0, extra);
			}
			len += extra;
			break;
		}
		case 4: /* random bytes */
			pool_bytes(r, buf, len);
			break;
		default: /* a run of zero bits (too large a value) or of ones */
		{
			size_t at = pool_below(r, len), run = 1 + pool_below(r, 4);
			memset(buf + at, (pool_next(r) & 1) ? 0xFF : 0, at + run <= len ? run : len - at);
			break;
		}
		}
		failures += (size_t) arith_decode_case(buf, len, logn, ours, count);
		(*checks)++;
	}
	return failures;
}

/* All the checks; prints one line and returns the number of failures. */
static inline size_t falcon_arith_check(uint64_t seed) {
	pool_rng r;
	pool_seed(&r, seed ^ 0xA217u);
	size_t checks = 0, failures = arith_check_decode(&r, &checks);
	const char *norm = "no AVX2: norm not checked";
#ifdef QFV_HAVE_AVX2
	if (OQS_CPU_has_extension(OQS_CPU_EXT_AVX2)) {
		failures += arith_check_norm(&r, &checks) + arith_check_hash_block(&r, &checks);
		norm = "AVX2 norm and hash-to-point checked";
	}
#endif
	arith_decoder ours[2];
	printf("falcon_arith: %zu checks, %zu failures (%s; decoders: %s)\n", checks, failures, norm,
	       arith_decoders(ours) == 2 ? "portable + bmi2" : "portable");
	return failures;
}

#endif
