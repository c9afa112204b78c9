/*
 * falcon_vt_codec.c - the compressed-s2 decoder of falcon_vt_codec.h, written for qMEMO.
 *
 * Why: PQClean's comp_decode reads the unary high part of each coefficient one bit at
 * a time, a data-dependent branch per bit; it took ~28% of a cached Falcon-512 verify's
 * time for ~11% of its instructions. This reads the stream 64 bits at a time and finds
 * the unary part's end with one count-leading-zeros.
 *
 * The format (Falcon spec 3.11.2, PQClean codec.c): per coefficient, a sign bit, the
 * low 7 bits of |x|, then |x| >> 7 zero bits and a one. Rejected, as by PQClean: a
 * stream that ends early, |x| >> 7 above 15 (|x| > 2047), "minus zero", and unused
 * bits of the last byte that are not zero. Returns the bytes used, as PQClean does.
 * The differential tests compare the two decoders case by case.
 */
#include "falcon_vt_codec.h"

#ifdef __LZCNT__
#include <immintrin.h>
#endif

/* Big-endian: the stream's first bit is the first byte's top bit. Compilers make this one bswap. */
static inline uint64_t load_be64(const uint8_t *p) {
	return ((uint64_t) p[0] << 56) | ((uint64_t) p[1] << 48) | ((uint64_t) p[2] << 40) | ((uint64_t) p[3] << 32) |
	       ((uint64_t) p[4] << 24) | ((uint64_t) p[5] << 16) | ((uint64_t) p[6] << 8) | (uint64_t) p[7];
}

#ifndef FALCON_VT_COMP_DECODE /* the makefile builds this file twice: portable, and for BMI2 + LZCNT */
#define FALCON_VT_COMP_DECODE falcon_vt_comp_decode
#endif

/* Leading zero bits of x, capped or not at 16 (either way above 15 means reject). LZCNT
 * is defined at 0 (64); for clz a sentinel bit caps the count and spares a zero test,
 * at one more operation on the decoder's serial path. */
static inline unsigned count_leading_zeros(uint64_t x) {
#ifdef __LZCNT__
	return (unsigned) _lzcnt_u64(x);
#else
	return (unsigned) __builtin_clzll(x | (UINT64_C(1) << 47));
#endif
}

size_t FALCON_VT_COMP_DECODE(int16_t *x, unsigned logn, const uint8_t *in, size_t max_in_len) {
	size_t n = (size_t) 1 << logn, pos = 0; /* pos: bytes of `in` fully in acc */
	/* The stream's next bits, first at bit 63; `bits` of them are counted. Past those, acc
	 * holds either more of the stream (a word load brings in part of the next byte too;
	 * loading it again ORs in the same bits) or, past the end of the input, zeros. */
	uint64_t acc = 0;
	unsigned bits = 0, minus_zero = 0;
	for (size_t u = 0; u < n;) {
		/* Refill to 56+ bits, enough for two coefficients (each at most 8 + 15 + 1), which
		 * halves the refills on the decoder's serial path. Unconditional while 8 bytes
		 * remain: a branch on the bit count would be mispredicted every few coefficients. */
		if (max_in_len - pos >= 8) {
			acc |= load_be64(in + pos) >> bits;
			size_t whole = (63 - bits) >> 3;
			pos += whole;
			bits += 8 * (unsigned) whole;
		} else {
			for (; bits <= 56 && pos < max_in_len; pos++, bits += 8) {
				acc |= (uint64_t) in[pos] << (56 - bits);
			}
		}
		for (int pair = 0; pair < 2; pair++, u++) { /* n is even */
			/* Below 48 bits only at the end of the input, where all past `bits` is zero. */
			if (bits < 8) {
				return 0;
			}
			unsigned head = (unsigned) (acc >> 56); /* sign bit, low 7 bits of |x| */
			acc <<= 8;
			bits -= 8;
			unsigned zeros = count_leading_zeros(acc);
			if (zeros > 15 || zeros >= bits) { /* |x| > 2047, or the stream ends before the one */
				return 0;
			}
			acc <<= zeros + 1;
			bits -= zeros + 1;
			/* Without branches on the sign, a coin toss per coefficient for the predictor:
			 * (m ^ -1) + 1 = -m. "-0" (one encoding per value) is rejected after the loop. */
			unsigned m = (head & 127) + (zeros << 7), negative = head >> 7;
			minus_zero |= negative & (m == 0);
			x[u] = (int16_t) ((m ^ (0u - negative)) + negative);
		}
	}
	if (minus_zero) {
		return 0;
	}
	/* The last byte's unused bits (the top bits & 7 of acc) must be zero. */
	unsigned unused = bits & 7;
	if (unused != 0 && (acc >> (64 - unused)) != 0) {
		return 0;
	}
	return pos - bits / 8;
}
