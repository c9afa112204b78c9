/*
 * falcon_pool.h - what the differential harness and the fuzz target share: a seeded
 * PRNG (also fed to liboqs, so keys and signatures are the same every run), a pool of
 * keys and valid signatures made by liboqs, and liboqs's verdict as a length-checking
 * caller sees it (the rule falcon_vt.h promises to match).
 *
 * Header-only on purpose: each program is one file plus this.
 */
#ifndef QMEMO_TESTS_FALCON_POOL_H
#define QMEMO_TESTS_FALCON_POOL_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <oqs/oqs.h>

#include "falcon_vt.h"

#define POOL_MAX_SIG 1462 /* Falcon-1024's length_signature, the largest of the four */
#define POOL_MAX_PK 1793
#define POOL_MAX_MSG 4096

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

static pool_rng pool_liboqs_rng;
static inline void pool_liboqs_randombytes(uint8_t *out, size_t len) {
	pool_bytes(&pool_liboqs_rng, out, len);
}

typedef struct {
	size_t key;
	uint8_t msg[POOL_MAX_MSG];
	size_t msg_len;
	uint8_t sig[POOL_MAX_SIG];
	size_t sig_len;
} pool_item;

typedef struct {
	OQS_SIG *oqs;
	int variant;
	size_t pk_len, nkeys, nitems;
	uint8_t *pks; /* nkeys * pk_len */
	pool_item *items;
} pool;

/* Message lengths around SHAKE256's 136-byte rate and the empty message. */
static const size_t POOL_MSG_LENGTHS[] = {0, 1, 2, 31, 32, 33, 64, 100, 135, 136, 137, 200, 271, 272, 1000, 4096};

/* liboqs's verdict for a caller that checks lengths first (see falcon_vt.h). */
static inline int pool_liboqs_verdict(const OQS_SIG *oqs, const uint8_t *pk, size_t pk_len, const uint8_t *msg,
                               size_t msg_len, const uint8_t *sig, size_t sig_len) {
	if (pk_len != oqs->length_public_key || sig_len > oqs->length_signature) {
		return 0;
	}
	return OQS_SIG_verify(oqs, msg, msg_len, sig, sig_len, pk) == OQS_SUCCESS;
}

/* nkeys keys and nitems valid signatures over random messages, all from `seed`. */
static inline int pool_make(pool *p, const char *name, size_t nkeys, size_t nitems, uint64_t seed) {
	memset(p, 0, sizeof *p);
	p->variant = qfv_variant(name);
	p->oqs = OQS_SIG_new(name);
	if (p->variant < 0 || p->oqs == NULL || p->oqs->length_signature > POOL_MAX_SIG ||
	        p->oqs->length_public_key > POOL_MAX_PK) {
		fprintf(stderr, "pool: %s is not available\n", name);
		return -1;
	}
	if (qfv_public_key_bytes(p->variant) != p->oqs->length_public_key ||
	        qfv_max_signature_bytes(p->variant) != p->oqs->length_signature) {
		fprintf(stderr, "pool: %s sizes differ between falcon_vt and liboqs\n", name);
		return -1;
	}
	pool_seed(&pool_liboqs_rng, seed);
	OQS_randombytes_custom_algorithm(pool_liboqs_randombytes);
	p->pk_len = p->oqs->length_public_key;
	p->nkeys = nkeys;
	p->nitems = nitems;
	p->pks = malloc(nkeys * p->pk_len);
	p->items = calloc(nitems, sizeof *p->items);
	uint8_t *sks = malloc(nkeys * p->oqs->length_secret_key);
	int rc = -1;
	if (p->pks == NULL || p->items == NULL || sks == NULL) {
		goto cleanup;
	}
	for (size_t k = 0; k < nkeys; k++) {
		if (OQS_SIG_keypair(p->oqs, p->pks + k * p->pk_len, sks + k * p->oqs->length_secret_key) != OQS_SUCCESS) {
			goto cleanup;
		}
	}
	pool_rng r;
	pool_seed(&r, seed ^ 0x5157u);
	for (size_t i = 0; i < nitems; i++) {
		pool_item *it = &p->items[i];
		it->key = i % nkeys;
		it->msg_len = POOL_MSG_LENGTHS[pool_below(&r, sizeof POOL_MSG_LENGTHS / sizeof POOL_MSG_LENGTHS[0])];
		pool_bytes(&r, it->msg, it->msg_len);
		if (OQS_SIG_sign(p->oqs, it->sig, &it->sig_len, it->msg, it->msg_len,
		                 sks + it->key * p->oqs->length_secret_key) != OQS_SUCCESS) {
			goto cleanup;
		}
	}
	rc = 0;
cleanup:
	if (sks != NULL) {
		OQS_MEM_cleanse(sks, nkeys * p->oqs->length_secret_key);
		free(sks);
	}
	if (rc != 0) {
		fprintf(stderr, "pool: could not make keys and signatures for %s\n", name);
	}
	return rc;
}

static inline void pool_free(pool *p) {
	OQS_SIG_free(p->oqs);
	free(p->pks);
	free(p->items);
	memset(p, 0, sizeof *p);
}

#endif
