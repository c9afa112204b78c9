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
 *
 * Two passes. The first walks the stream - the serial part, each coefficient's start
 * depends on the one before - and keeps per coefficient only its key, (head byte << 8)
 * | unary length: a shift, a count of leading zeros and a store. The second turns keys
 * into values and finds "minus zero" (key 0x8000) with no dependency between
 * coefficients: 16 per instruction in the AVX2 build (the one built with -mbmi2 -mlzcnt
 * -mavx2, used only by the AVX2 implementation on a CPU with all three). Splitting them
 * took the decoder from ~19,800 to ~10,300 instructions per Falcon-512 signature (callgrind).
 */
#include "falcon_vt_codec.h"

#if defined(__LZCNT__) || defined(__AVX2__)
#include <immintrin.h>
#endif

/* Big-endian: the stream's first bit is the first byte's top bit. Compilers make this one bswap. */
static inline uint64_t load_be64(const uint8_t *p) {
	return ((uint64_t) p[0] << 56) | ((uint64_t) p[1] << 48) | ((uint64_t) p[2] << 40) | ((uint64_t) p[3] << 32) |
	       ((uint64_t) p[4] << 24) | ((uint64_t) p[5] << 16) | ((uint64_t) p[6] << 8) | (uint64_t) p[7];
}

#ifndef FALCON_VT_COMP_DECODE /* the makefile builds this file twice: portable, and for BMI2 + LZCNT + AVX2 */
#define FALCON_VT_COMP_DECODE falcon_vt_comp_decode
#endif

/* Leading zero bits of x, capped or not at 16 (either way above 15 means reject). LZCNT
 * is defined at 0 (64); for clz a sentinel bit caps the count and spares a zero test. */
static inline unsigned count_leading_zeros(uint64_t x) {
#ifdef __LZCNT__
	return (unsigned) _lzcnt_u64(x);
#else
	return (unsigned) __builtin_clzll(x | (UINT64_C(1) << 47));
#endif
}

#define MINUS_ZERO 0x8000 /* the key of sign 1, low bits 0, no unary zeros: "-0", one value encoded twice */

/* Pass two: keys to coefficients; 0 if any is "minus zero". */
static int values_from_keys(int16_t *x, const uint16_t *keys, size_t n) {
#ifdef __AVX2__
	const __m256i low = _mm256_set1_epi16(127), minus_zero = _mm256_set1_epi16((short) MINUS_ZERO);
	__m256i seen = _mm256_setzero_si256();
	for (size_t u = 0; u < n; u += 16) { /* n is 512 or 1024 */
		__m256i k = _mm256_load_si256((const __m256i *) (keys + u));
		/* |x| = (head & 127) + (zeros << 7); zeros <= 15 sits in the key's low byte */
		__m256i m = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(k, 8), low), _mm256_slli_epi16(k, 7));
		m = _mm256_and_si256(m, _mm256_set1_epi16(2047));
		/* the key's top bit is the sign: negate where it is set (k == 0 gives m == 0 anyway) */
		_mm256_storeu_si256((__m256i *) (x + u), _mm256_sign_epi16(m, k));
		seen = _mm256_or_si256(seen, _mm256_cmpeq_epi16(k, minus_zero));
	}
	return _mm256_testz_si256(seen, seen);
#else
	unsigned seen = 0;
	for (size_t u = 0; u < n; u++) {
		unsigned k = keys[u], m = ((k >> 8) & 127) + ((k & 255) << 7), negative = k >> 15;
		seen |= k == MINUS_ZERO;
		x[u] = (int16_t) ((m ^ (0u - negative)) + negative); /* no branch on the sign: -m = (m ^ -1) + 1 */
	}
	return !seen;
#endif
}

size_t FALCON_VT_COMP_DECODE(int16_t *x, unsigned logn, const uint8_t *in, size_t max_in_len) {
	size_t n = (size_t) 1 << logn, u = 0, bitpos = 0;
	uint16_t keys[1024] __attribute__((aligned(32)));
	/* Pass one, fast: while 8 bytes remain from the current one, a load holds at least
	 * 57 bits of the stream, room for two coefficients (each at most 8 + 15 + 1 bits). */
	while (u < n && (bitpos >> 3) + 8 <= max_in_len) {
		uint64_t w = load_be64(in + (bitpos >> 3)) << (bitpos & 7);
		for (int pair = 0; pair < 2; pair++, u++) { /* n is even */
			unsigned zeros = count_leading_zeros(w << 8);
			if (zeros > 15) { /* |x| > 2047 */
				return 0;
			}
			keys[u] = (uint16_t) (((w >> 48) & 0xFF00) | zeros);
			w <<= 9 + zeros;
			bitpos += 9 + zeros;
		}
	}
	/* Pass one, careful: the last bytes. The stream's next bits, first at bit 63; `bits`
	 * of them are counted, past those acc holds zeros. The fast pass's last byte, partly
	 * used, comes first (if the fast pass decoded everything: only its unused bits). */
	size_t pos = bitpos >> 3;
	uint64_t acc = 0;
	unsigned bits = 0;
	if ((bitpos & 7) != 0) {
		acc = ((uint64_t) in[pos] << 56) << (bitpos & 7);
		bits = 8 - (unsigned) (bitpos & 7);
		pos++;
	}
	for (; u < n; u++) {
		for (; bits <= 56 && pos < max_in_len; pos++, bits += 8) {
			acc |= (uint64_t) in[pos] << (56 - bits);
		}
		if (bits < 8) { /* the stream ends inside the head */
			return 0;
		}
		unsigned head = (unsigned) (acc >> 56), zeros = count_leading_zeros(acc << 8);
		if (zeros > 15 || zeros >= bits - 8) { /* |x| > 2047, or the stream ends before the one */
			return 0;
		}
		keys[u] = (uint16_t) ((head << 8) | zeros);
		acc <<= 9 + zeros;
		bits -= 9 + zeros;
	}
	/* The last byte's unused bits (the top bits & 7 of acc) must be zero. */
	unsigned unused = bits & 7;
	if (unused != 0 && (acc >> (64 - unused)) != 0) {
		return 0;
	}
	if (!values_from_keys(x, keys, n)) {
		return 0;
	}
	return pos - bits / 8;
}
