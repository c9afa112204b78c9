/*
 * falcon_vt_codec.h - decoding of a Falcon signature's compressed s2, a word at a time
 * (falcon_vt_codec.c). Internal: not exported by the library.
 */
#ifndef QMEMO_FALCON_VT_CODEC_H
#define QMEMO_FALCON_VT_CODEC_H

#include <stddef.h>
#include <stdint.h>

/* PQClean's comp_decode, the same function: the bytes used (n = 2^logn coefficients
 * into x), or 0 for an encoding PQClean rejects. */
size_t falcon_vt_comp_decode(int16_t *x, unsigned logn, const uint8_t *in, size_t max_in_len);

/* The same code built with -mbmi2 -mlzcnt -mavx2 (one-cycle count of leading zeros, flagless
 * shifts; keys to values 16 at a time); only for CPUs that have all three (falcon_vt.c checks
 * BMI2 and LZCNT, and calls it only from its AVX2 implementation). */
size_t falcon_vt_comp_decode_bmi2(int16_t *x, unsigned logn, const uint8_t *in, size_t max_in_len);

#endif
