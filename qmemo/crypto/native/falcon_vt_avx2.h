/*
 * falcon_vt_avx2.h - the arithmetic core of a Falcon verify in AVX2, written for qMEMO
 * (falcon_vt_avx2.c): s1 = c0 - s2*h mod (x^n + 1, q), and the squared norm of (s1, s2).
 *
 * Why our own: PQClean's AVX2 Falcon keeps the portable scalar NTT for verification
 * (mq_NTT/mq_iNTT, ~94,000 of ~158,000 instructions of a cached Falcon-512 verify,
 * and half its time). This computes the same polynomial product, so the same norm and
 * the same verdict, 16 coefficients per instruction.
 *
 * The decoded key lives in this module's own NTT form (falcon_vt_avx2_prepare_key),
 * which only falcon_vt_avx2_norm understands: a key cache must keep it apart from
 * PQClean's form (falcon_vt_cache.h's `form`). Internal: not exported by the library.
 */
#ifndef QMEMO_FALCON_VT_AVX2_H
#define QMEMO_FALCON_VT_AVX2_H

#include <stddef.h>
#include <stdint.h>

/* hh (n = 2^logn entries, logn 9 or 10) := the key h (PQClean's modq_decode output,
 * coefficients in [0, q)) in the form falcon_vt_avx2_norm multiplies by. */
void falcon_vt_avx2_prepare_key(int16_t *hh, const uint16_t *h, unsigned logn);

/* ||s2*h - c0 mod q, centred||^2 + ||s2||^2, exactly (64-bit): c0 in [0, q), |s2| <= 2047
 * (what comp_decode can produce), hh from falcon_vt_avx2_prepare_key. */
uint64_t falcon_vt_avx2_norm(const uint16_t *c0, const int16_t *s2, const int16_t *hh, unsigned logn);

/* Hash-to-point's rejection sampling on one SHAKE256 output block (136 bytes): its
 * big-endian 16-bit words below 61445 = 5q, reduced mod q, in order, to x; returns how
 * many. May write up to FALCON_VT_HASH_BLOCK_SLACK entries past them (x must have room). */
#define FALCON_VT_HASH_BLOCK_BYTES 136
#define FALCON_VT_HASH_BLOCK_SLACK 8
size_t falcon_vt_avx2_hash_block(uint16_t *x, const uint8_t *block);

#endif
