/*
 * native_cases.h - what the native test programs share (the Falcon and ML-DSA
 * differential harnesses and fuzz targets): a seeded PRNG, the same stream on every
 * machine and fed to liboqs too, so keys, signatures and mutations are the same every
 * run; the message lengths the pools sign; bit flips; hex dumps of a failing case.
 *
 * Header-only on purpose: each program is one file plus its pool header.
 */
#ifndef QMEMO_TESTS_NATIVE_CASES_H
#define QMEMO_TESTS_NATIVE_CASES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* xoshiro256** (Blackman & Vigna): small, fast, and the same stream on every machine. */
typedef struct {
	uint64_t s[4];
} pool_rng;

static inline uint64_t pool_rotl(uint64_t x, int k) {
	return (x << k) | (x >> (64 - k));
}

static inline uint64_t pool_next(pool_rng *r) {
	uint64_t result = pool_rotl(r->s[1] * 5, 7) * 9, t = r->s[1] << 17;
	r->s[2] ^= r->s[0];
	r->s[3] ^= r->s[1];
	r->s[1] ^= r->s[2];
	r->s[0] ^= r->s[3];
	r->s[2] ^= t;
	r->s[3] = pool_rotl(r->s[3], 45);
	return result;
}

static inline void pool_seed(pool_rng *r, uint64_t seed) {
	for (int i = 0; i < 4; i++) { /* splitmix64 expands the seed, as the xoshiro authors advise */
		uint64_t z = (seed += 0x9E3779B97F4A7C15u);
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
		z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
		r->s[i] = z ^ (z >> 31);
	}
}

static inline uint64_t pool_below(pool_rng *r, uint64_t n) {
	return n ? pool_next(r) % n : 0; /* the modulo bias is irrelevant for test inputs */
}

static inline void pool_bytes(pool_rng *r, uint8_t *out, size_t len) {
	while (len > 0) {
		uint64_t w = pool_next(r);
		size_t k = len < 8 ? len : 8;
		memcpy(out, &w, k);
		out += k, len -= k;
	}
}

/* liboqs's randomness while a pool is made (OQS_randombytes_custom_algorithm). */
static pool_rng pool_liboqs_rng;
static inline void pool_liboqs_randombytes(uint8_t *out, size_t len) {
	pool_bytes(&pool_liboqs_rng, out, len);
}

/* Message lengths around SHAKE256's 136-byte rate and the empty message. */
static const size_t POOL_MSG_LENGTHS[] = {0, 1, 2, 31, 32, 33, 64, 100, 135, 136, 137, 200, 271, 272, 1000, 4096};

static inline void pool_flip_bit(pool_rng *r, uint8_t *buf, size_t len) {
	if (len > 0) {
		size_t bit = pool_below(r, 8 * len);
		buf[bit / 8] ^= (uint8_t) (1u << (bit % 8));
	}
}

static inline void pool_print_hex(const char *label, const uint8_t *buf, size_t len) {
	fprintf(stderr, "  %s (%zu bytes) = ", label, len);
	for (size_t i = 0; i < len; i++) {
		fprintf(stderr, "%02x", buf[i]);
	}
	fputc('\n', stderr);
}

#endif
