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
#include "native_cases.h"

#define POOL_MAX_SIG 1462 /* Falcon-1024's length_signature, the largest of the four */
#define POOL_MAX_PK 1793
#define POOL_MAX_MSG 4096

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
