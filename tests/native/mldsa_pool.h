/*
 * mldsa_pool.h - what the ML-DSA differential harness and fuzz target share: a pool of
 * keys and signatures made by liboqs from a fixed seed, "lenient" signatures, and the
 * verdicts mldsa_vt is compared with.
 *
 * Two references, both liboqs 0.13's own code:
 *   pool_ref_verdict   the portable pq-crystals verify (pqcrystals_ml_dsa_*_ref_verify,
 *                      the crate's sign.c compiled unchanged: what OQS_SIG_verify runs on
 *                      a CPU without AVX2, and FIPS 204's verdict) - mldsa_vt must match
 *                      it on every input;
 *   pool_oqs_verdict   OQS_SIG_verify itself, which on an AVX2 CPU runs the AVX2 verify
 *                      that skips the ||z|| bound (mldsa_vt.h): every difference from the
 *                      ref verdict must be one the harness can explain.
 * Lenient signatures come from the same ref sign.c with only its z bound loosened to
 * what packs (|z| < gamma1; mldsa_vt.mk redirects the call, qmemo_lenient_*_chknorm
 * below): otherwise valid signatures whose z may break FIPS 204's bound, the inputs on
 * which the two references disagree.
 *
 * Header-only on purpose: each program is one file plus this.
 */
#ifndef QMEMO_TESTS_MLDSA_POOL_H
#define QMEMO_TESTS_MLDSA_POOL_H

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <oqs/oqs.h>

#include "mldsa_vt.h"
#include "native_cases.h"

#define POOL_MAX_SIG 4627 /* ML-DSA-87's signature, the largest of the three */
#define POOL_MAX_PK 2592
#define POOL_MAX_SK 4896
#define POOL_MAX_MSG 4096
#define POOL_MAX_L 7 /* polynomials in z (ML-DSA-87) */
#define POOL_MAX_K 8 /* polynomials in h */
#define POOL_N 256

/* The crate's ref sign.c, compiled unchanged (reference verdicts) and lenient (mldsa_vt.mk). */
#define POOL_REF_DECLS(mode)                                                                                      \
	int pqcrystals_ml_dsa_##mode##_ref_verify(const uint8_t *sig, size_t siglen, const uint8_t *m, size_t mlen,     \
	                                          const uint8_t *ctx, size_t ctxlen, const uint8_t *pk);                 \
	int pqcrystals_ml_dsa_##mode##_ref_unpack_sig(uint8_t *c, void *z, void *h, const uint8_t *sig);                \
	void pqcrystals_ml_dsa_##mode##_ref_polyz_pack(uint8_t *r, const void *a);                                      \
	int pqcrystals_ml_dsa_##mode##_ref_polyvecl_chknorm(const void *v, int32_t bound);                              \
	int qmemo_lenient_##mode##_signature(uint8_t *sig, size_t *siglen, const uint8_t *m, size_t mlen,              \
	                                     const uint8_t *ctx, size_t ctxlen, const uint8_t *sk);
POOL_REF_DECLS(44)
POOL_REF_DECLS(65)
POOL_REF_DECLS(87)

/* FIPS 204's parameters the harness needs per set (checked against liboqs's sizes in pool_make). */
typedef struct {
	int32_t gamma1, beta;
	size_t l, k, omega, ctilde_bytes, z_poly_bytes;
	int (*ref_verify)(const uint8_t *, size_t, const uint8_t *, size_t, const uint8_t *, size_t, const uint8_t *);
	int (*unpack_sig)(uint8_t *, void *, void *, const uint8_t *);
	void (*polyz_pack)(uint8_t *, const void *);
	int (*chknorm)(const void *, int32_t);
	int (*lenient_sign)(uint8_t *, size_t *, const uint8_t *, size_t, const uint8_t *, size_t, const uint8_t *);
} pool_params;

#define POOL_PARAMS(mode, g1, b, L, K, om, ct, zb)                                                               \
	{(g1), (b), (L), (K), (om), (ct), (zb), pqcrystals_ml_dsa_##mode##_ref_verify,                              \
	 pqcrystals_ml_dsa_##mode##_ref_unpack_sig, pqcrystals_ml_dsa_##mode##_ref_polyz_pack,                      \
	 pqcrystals_ml_dsa_##mode##_ref_polyvecl_chknorm, qmemo_lenient_##mode##_signature}
static const pool_params POOL_PARAMS_OF[QMV_VARIANT_COUNT] = {
	[QMV_ML_DSA_44] = POOL_PARAMS(44, 1 << 17, 78, 4, 4, 80, 32, 576),  /* FIPS 204, Table 1 */
	[QMV_ML_DSA_65] = POOL_PARAMS(65, 1 << 19, 196, 5, 6, 55, 48, 640),
	[QMV_ML_DSA_87] = POOL_PARAMS(87, 1 << 19, 120, 7, 8, 75, 64, 640),
};

/* The lenient signer's z bound: everything that packs (|z| < gamma1), not gamma1 - beta. */
#define POOL_LENIENT_CHKNORM(mode, gamma1)                                                                         \
	int qmemo_lenient_##mode##_chknorm(const void *v, int32_t bound);                                              \
	int qmemo_lenient_##mode##_chknorm(const void *v, int32_t bound) {                                             \
		(void) bound;                                                                                              \
		return pqcrystals_ml_dsa_##mode##_ref_polyvecl_chknorm(v, (gamma1));                                       \
	}
POOL_LENIENT_CHKNORM(44, 1 << 17)
POOL_LENIENT_CHKNORM(65, 1 << 19)
POOL_LENIENT_CHKNORM(87, 1 << 19)

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
	const pool_params *params;
	size_t pk_len, sk_len, sig_len, nkeys, nitems;
	uint8_t *pks; /* nkeys * pk_len */
	uint8_t *sks; /* nkeys * sk_len: the lenient signer needs them; cleansed in pool_free */
	pool_item *items;   /* signed by OQS_SIG_sign */
	pool_item *lenient; /* the same messages signed by the lenient signer */
	size_t lenient_out_of_bound; /* lenient signatures whose z breaks FIPS 204's bound */
} pool;

static inline int pool_key_length_ok(const pool *p, size_t pk_len) {
	return pk_len == p->pk_len; /* liboqs reads exactly that many bytes: the caller's check */
}

/* The portable liboqs verify's verdict (FIPS 204's), for a caller that checks the key's length. */
static inline int pool_ref_verdict(const pool *p, const uint8_t *pk, size_t pk_len, const uint8_t *msg,
                                   size_t msg_len, const uint8_t *sig, size_t sig_len) {
	return pool_key_length_ok(p, pk_len) && p->params->ref_verify(sig, sig_len, msg, msg_len, NULL, 0, pk) == 0;
}

/* OQS_SIG_verify's verdict (the AVX2 code on an AVX2 CPU), for the same caller. */
static inline int pool_oqs_verdict(const pool *p, const uint8_t *pk, size_t pk_len, const uint8_t *msg,
                                   size_t msg_len, const uint8_t *sig, size_t sig_len) {
	return pool_key_length_ok(p, pk_len) && OQS_SIG_verify(p->oqs, msg, msg_len, sig, sig_len, pk) == OQS_SUCCESS;
}

/* Does this signature (of the right length, with a well-formed hint) have a z
 * coefficient at or beyond gamma1 - beta (FIPS 204, Algorithm 8, line 13)? -1 if it does
 * not unpack. */
static inline int pool_z_out_of_bound(const pool *p, const uint8_t *sig, size_t sig_len) {
	static int32_t z[POOL_MAX_L * POOL_N] __attribute__((aligned(32))), h[POOL_MAX_K * POOL_N];
	uint8_t c[64];
	if (sig_len != p->sig_len || p->params->unpack_sig(c, z, h, sig) != 0) {
		return -1;
	}
	return p->params->chknorm(z, p->params->gamma1 - p->params->beta);
}

/* nkeys keys, and nitems messages each signed by liboqs and by the lenient signer, all from `seed`. */
static inline int pool_make(pool *p, const char *name, size_t nkeys, size_t nitems, uint64_t seed) {
	memset(p, 0, sizeof *p);
	p->variant = qmv_variant(name);
	p->oqs = OQS_SIG_new(name);
	if (p->variant < 0 || p->oqs == NULL || p->oqs->length_signature > POOL_MAX_SIG ||
	        p->oqs->length_public_key > POOL_MAX_PK || p->oqs->length_secret_key > POOL_MAX_SK) {
		fprintf(stderr, "pool: %s is not available\n", name);
		return -1;
	}
	p->params = &POOL_PARAMS_OF[p->variant];
	p->pk_len = p->oqs->length_public_key;
	p->sk_len = p->oqs->length_secret_key;
	p->sig_len = p->oqs->length_signature;
	if (qmv_public_key_bytes(p->variant) != p->pk_len || qmv_signature_bytes(p->variant) != p->sig_len ||
	        p->sig_len != p->params->ctilde_bytes + p->params->l * p->params->z_poly_bytes + p->params->omega +
	                          p->params->k) {
		fprintf(stderr, "pool: %s sizes differ between mldsa_vt, liboqs and FIPS 204\n", name);
		return -1;
	}
	pool_seed(&pool_liboqs_rng, seed);
	OQS_randombytes_custom_algorithm(pool_liboqs_randombytes);
	p->nkeys = nkeys;
	p->nitems = nitems;
	p->pks = malloc(nkeys * p->pk_len);
	p->sks = malloc(nkeys * p->sk_len);
	p->items = calloc(nitems, sizeof *p->items);
	p->lenient = calloc(nitems, sizeof *p->lenient);
	if (p->pks == NULL || p->sks == NULL || p->items == NULL || p->lenient == NULL) {
		fprintf(stderr, "pool: out of memory\n");
		return -1;
	}
	for (size_t k = 0; k < nkeys; k++) {
		if (OQS_SIG_keypair(p->oqs, p->pks + k * p->pk_len, p->sks + k * p->sk_len) != OQS_SUCCESS) {
			fprintf(stderr, "pool: keypair failed for %s\n", name);
			return -1;
		}
	}
	pool_rng r;
	pool_seed(&r, seed ^ 0x5157u);
	for (size_t i = 0; i < nitems; i++) {
		pool_item *it = &p->items[i], *lenient = &p->lenient[i];
		it->key = i % nkeys;
		it->msg_len = POOL_MSG_LENGTHS[pool_below(&r, sizeof POOL_MSG_LENGTHS / sizeof POOL_MSG_LENGTHS[0])];
		pool_bytes(&r, it->msg, it->msg_len);
		const uint8_t *sk = p->sks + it->key * p->sk_len;
		*lenient = *it;
		if (OQS_SIG_sign(p->oqs, it->sig, &it->sig_len, it->msg, it->msg_len, sk) != OQS_SUCCESS ||
		        p->params->lenient_sign(lenient->sig, &lenient->sig_len, it->msg, it->msg_len, NULL, 0, sk) != 0) {
			fprintf(stderr, "pool: signing failed for %s\n", name);
			return -1;
		}
		p->lenient_out_of_bound += (size_t) (pool_z_out_of_bound(p, lenient->sig, lenient->sig_len) == 1);
	}
	return 0;
}

static inline void pool_free(pool *p) {
	if (p->sks != NULL) {
		OQS_MEM_cleanse(p->sks, p->nkeys * p->sk_len);
	}
	OQS_SIG_free(p->oqs);
	free(p->pks);
	free(p->sks);
	free(p->items);
	free(p->lenient);
	memset(p, 0, sizeof *p);
}

#endif
