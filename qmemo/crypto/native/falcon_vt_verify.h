/*
 * falcon_vt_verify.h - the steps of one Falcon verify, shared by falcon_vt.c (one
 * signature at a time) and falcon_vt_batch.c (four signatures' points hashed together).
 * Internal: the library exports only the qfv_* API of falcon_vt.h.
 */
#ifndef QMEMO_FALCON_VT_VERIFY_H
#define QMEMO_FALCON_VT_VERIFY_H

#include <stddef.h>
#include <stdint.h>

#include <oqs/sha3.h>

#include "falcon_vt.h"
#include "falcon_vt_cache.h"

#define NONCE_BYTES 40 /* PQClean's NONCELEN: the signature's salt r */
#define MAX_N FALCON_VT_MAX_N

/* The PQClean internal functions one verify needs, for one compiled copy. */
typedef struct {
	size_t (*modq_decode)(uint16_t *x, unsigned logn, const void *in, size_t max_in_len);
	void (*to_ntt_monty)(uint16_t *h, unsigned logn);
	int (*verify_raw)(const uint16_t *c0, const int16_t *s2, const uint16_t *h, unsigned logn, uint8_t *tmp);
} pqclean_ops;

enum { IMPL_CLEAN = 0, IMPL_AVX2 = 1 };

typedef struct {
	const char *name;         /* liboqs's algorithm name */
	unsigned logn;
	size_t pk_bytes;
	size_t max_sig_bytes;     /* liboqs's length_signature */
	size_t padded_body_bytes; /* s2 length of the padded encoding: do_verify accepts zero padding up to it */
	uint64_t norm_bound;      /* floor(beta^2), inclusive: PQClean's l2bound[logn] (common.c) */
	const pqclean_ops *ops[2];
} variant_info;

/*
 * The decoded key's form depends on the implementation: PQClean's NTT Montgomery form
 * (to_ntt_monty) for the portable code, falcon_vt_avx2.c's own transform for AVX2. The
 * cache keeps the two apart by `form`, so a switch of implementation (qfv_select_
 * implementation) only costs misses.
 */
typedef uint16_t decoded_key[MAX_N] __attribute__((aligned(32)));

/* Room for hash-to-point's output: the AVX2 code finishes a whole block past n, and may
 * write a few words past that. */
#define HASHED_ROOM (MAX_N + OQS_SHA3_SHAKE256_RATE / 2 + 8)

/* The variant's facts (NULL for a bad id); with the caller-side length rule of falcon_vt.h
 * (NULL if the input can never be valid). */
const variant_info *falcon_vt_variant_info(int variant);
const variant_info *falcon_vt_checked_variant(int variant, size_t pk_len, size_t sig_len);

/* The implementation running now (IMPL_CLEAN or IMPL_AVX2): read it once per verify. */
int falcon_vt_current_impl(void);

/* do_verify's public-key decoding into the form `impl` multiplies by; 0 if refused. */
int falcon_vt_decode_public_key(const variant_info *v, int impl, const uint8_t *pk, uint16_t *h);

/* The signature's own checks (header, nonce, s2's encoding): 1 with s2 and *nonce set, else 0. */
int falcon_vt_decode_signature(const variant_info *v, int impl, const uint8_t *sig, size_t sig_len, int16_t *s2,
                               const uint8_t **nonce);

/* Rejection-sample one SHAKE256 output block into x (holding `got` of n words): the new count. */
size_t falcon_vt_sample_block(uint16_t *x, size_t got, size_t n, const uint8_t *buf, int impl);

/* SHAKE256(nonce || msg) to a point (x: HASHED_ROOM words), one signature. */
void falcon_vt_hash_to_point(const uint8_t *nonce, const uint8_t *msg, size_t msg_len, uint16_t *x, unsigned logn,
                             int impl);

/* verify_raw's rule: ||(s2*h - c0, s2)||^2 within the variant's bound. */
int falcon_vt_short_enough(const variant_info *v, int impl, const uint16_t *c0, const int16_t *s2, const uint16_t *h);

#endif
