/*
 * mldsa_vt_core.h - what one compiled copy of mldsa_vt_core.c offers mldsa_vt.c: the
 * key expansion and the verify after it, for one parameter set and one implementation
 * (pq-crystals' ref or AVX2 code as liboqs 0.13 ships it). Internal: the library
 * exports only the qmv_* API of mldsa_vt.h.
 */
#ifndef QMEMO_MLDSA_VT_CORE_H
#define QMEMO_MLDSA_VT_CORE_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
	size_t expanded_bytes; /* one expanded key: A-hat, NTT(t1 * 2^d), tr (32-byte aligned) */
	size_t public_key_bytes;
	size_t signature_bytes;
	/* expanded := the key's A-hat (NTT form), NTT(t1 * 2^d) and tr = H(pk), as this
	 * implementation's verify reads them; pk has exactly public_key_bytes. */
	void (*expand)(void *expanded, const uint8_t *pk);
	/* 1 if sig (exactly signature_bytes) is a valid signature of msg under the expanded
	 * key, with an empty context string; 0 otherwise. */
	int (*verify)(const void *expanded, const uint8_t *msg, size_t msg_len, const uint8_t *sig);
} mldsa_vt_core;

extern const mldsa_vt_core mldsa_vt_core_44_ref, mldsa_vt_core_65_ref, mldsa_vt_core_87_ref;
#ifdef QMV_HAVE_AVX2
extern const mldsa_vt_core mldsa_vt_core_44_avx2, mldsa_vt_core_65_avx2, mldsa_vt_core_87_avx2;
/* The FIPS 204 use_hint on a whole polynomial (AVX2), for the arithmetic tests:
 * b, a, hint are N = 256 int32 each, 32-byte aligned. */
void mldsa_vt_use_hint_44_avx2(int32_t *b, const int32_t *a, const int32_t *hint);
void mldsa_vt_use_hint_65_avx2(int32_t *b, const int32_t *a, const int32_t *hint);
void mldsa_vt_use_hint_87_avx2(int32_t *b, const int32_t *a, const int32_t *hint);
#endif

#endif
