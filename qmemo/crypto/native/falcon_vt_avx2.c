/*
 * falcon_vt_avx2.c - s2*h mod (x^n + 1, q = 12289) and the verify norm in AVX2 (see
 * falcon_vt_avx2.h). Written for qMEMO; compiled with -mavx2 and called only after
 * falcon_vt.c's run-time check found AVX2.
 *
 * The method: a negacyclic number-theoretic transform (NTT) of s2, a pointwise product
 * with the key's transform (computed once per key and cached), the inverse transform.
 * Coefficients are signed 16-bit lanes, 16 to a vector, in Montgomery arithmetic with
 * R = 2^16 (products need 3 multiplies and a subtraction; no division anywhere).
 *
 * Layout: the layers whose butterflies pair coefficients 16 or more apart pair whole
 * vectors. For the last four (distances 8, 4, 2, 1) each group of 16 vectors is
 * transposed (16 x 16), so that those pairs are whole vectors too, each lane then
 * carrying its own block and twiddle factor. The transform's output order is thus our
 * own; it never leaves this file: the key is transformed by the same code, the product
 * is taken in that order, and the inverse undoes the transposition.
 *
 * Overflow: 16-bit lanes hold |x| <= 32767 = 2.67q, so values are kept bounded by a
 * schedule derived here and checked by tests/native/falcon_arith.h against a schoolbook
 * product on extreme inputs (|h| = 6144 and |s2| = 2047 in sign patterns):
 *   montmul(a, z), |a| <= B, |z| <= q/2 (every twiddle and the key are centred):
 *       the result is (a*z - m*q) / 2^16 exactly, |m| <= 2^15, so
 *       |result| <= M(B) = (B*6144 + 32768*q) / 2^16    (M(32767) = 9216.5)
 *   barrett(x), any int16 x:            |result| <= 6146
 *   forward, a butterfly (x, y) -> x +- montmul(y): a layer takes the bound B to
 *       B' = B + M(B), or 6146 + M(B) on layers 4, 7 and 10, whose x is Barrett-reduced.
 *       So a layer adds M(B) (6144.5 to 9216.5 as B grows), not a fixed 9217: the
 *       schedule is safe only for the tighter B', and only for inputs centred as below.
 *       From the key's |h| <= 6144 the bounds after layers 1..10 are
 *           12864 20215 28254 | 14939 22484 30736 | 15172 22738 31015 | 15198
 *       peak 31015 after layer 9 (logn 9's output), 1752 below 32767; logn 10's
 *       output is 15198 after layer 10's reduce. From |s2| <= 2047 every layer's bound is
 *       lower (peak 30947). Python to recompute: B = 6144 (or 2047); for L in 1..logn:
 *       B = (6146 if L in (4, 7, 10) else B) + (B*6144 + 32768*12289) / 65536.
 *   pointwise: montmul(ntt(s2), key), key centred: |result| <= M(32767) < 9217.
 *   inverse, a butterfly (x, y) -> (barrett(x + y), montmul(x - y)): the first layer
 *       sees |x|, |y| <= 9216, so |x +- y| <= 18432 and its montmul gives M(18432) =
 *       7872.5; every later layer sees at most that (sums <= 15745, results <= 7620,
 *       falling to 7562): values stay < 7873, and the centring of s2*h - c0 for the
 *       norm (c0 in [0, q)) stays inside int16.
 * Never: use this for secret data (the code is constant-time, but was not written or
 * reviewed as such), or hand its key form to PQClean's functions.
 */
#include "falcon_vt_avx2.h"

#include <immintrin.h>
#include <pthread.h>
#include <stddef.h>

#define Q 12289
#define HALF_Q 6144                   /* (q - 1) / 2: the centred range is [-HALF_Q, HALF_Q] */
#define BARRETT_V 21845               /* round(2^28 / q): x*V / 2^28 ~ x / q, V fits in int16 */
#define MAX_LOGN 10
#define MAX_VECTORS ((1 << MAX_LOGN) / 16)
#define MAX_GROUPS (MAX_VECTORS / 16)
#define TRANSPOSED_TWIDDLES 15        /* 1 + 2 + 4 + 8 vectors for the four in-block layers */

/* Twiddle factors of one degree, in Montgomery form (z * 2^16 mod q, centred) with their
 * products by q^-1 mod 2^16 (the first multiply of montmul, precomputed). */
typedef struct {
	int16_t fwd[MAX_VECTORS], fwd_q[MAX_VECTORS]; /* zeta_k, k in [1, n/16): whole-vector layers */
	int16_t inv[MAX_VECTORS], inv_q[MAX_VECTORS]; /* zeta_k^-1 */
	/* In-block layers, per group of 16 blocks: vector (layer s, half h) at [2^s - 1 + h], lane l = block. */
	int16_t tfwd[MAX_GROUPS][TRANSPOSED_TWIDDLES][16] __attribute__((aligned(32)));
	int16_t tfwd_q[MAX_GROUPS][TRANSPOSED_TWIDDLES][16] __attribute__((aligned(32)));
	int16_t tinv[MAX_GROUPS][TRANSPOSED_TWIDDLES][16] __attribute__((aligned(32)));
	int16_t tinv_q[MAX_GROUPS][TRANSPOSED_TWIDDLES][16] __attribute__((aligned(32)));
	int16_t key_scale, key_scale_q; /* n^-1 * 2^32 mod q: folds the inverse's 1/n into the key */
} twiddles;

static twiddles TABLES[2]; /* logn 9 and 10 */

/* Left-packing for hash-to-point: for each 8-bit "kept" mask of 8 words, the byte
 * shuffle that moves the kept words to the front (16-byte aligned rows: loaded as
 * vectors), and how many there are. */
static uint8_t PACK_SHUFFLE[256][16] __attribute__((aligned(16)));
static uint8_t PACK_COUNT[256];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;
static int16_t QINV;       /* q^-1 mod 2^16 */

static uint32_t pow_mod(uint32_t b, uint32_t e) {
	uint32_t r = 1;
	for (b %= Q; e; e >>= 1, b = b * b % Q) {
		if (e & 1) {
			r = r * b % Q;
		}
	}
	return r;
}

static unsigned bit_reverse(unsigned x, unsigned bits) {
	unsigned r = 0;
	for (unsigned i = 0; i < bits; i++, x >>= 1) {
		r = (r << 1) | (x & 1);
	}
	return r;
}

/* z * 2^16 mod q, centred, and its product by q^-1 mod 2^16: a montmul operand for z. */
static void montgomery_operand(uint32_t z, int16_t *m, int16_t *mq) {
	int32_t v = (int32_t) ((z << 16) % Q);
	v -= v > HALF_Q ? Q : 0;
	*m = (int16_t) v;
	*mq = (int16_t) (uint16_t) ((uint32_t) v * (uint32_t) (uint16_t) QINV);
}

/* Computed, not tabled: a generator of Z_q^* gives psi, a primitive 2n-th root of unity,
 * and zeta_k = psi^bitrev(k) as in every negacyclic Cooley-Tukey NTT. */
static void build_tables(void) {
	for (unsigned mask = 0; mask < 256; mask++) {
		unsigned count = 0;
		for (unsigned lane = 0; lane < 8; lane++) {
			if (mask & (1u << lane)) {
				PACK_SHUFFLE[mask][2 * count] = (uint8_t) (2 * lane);
				PACK_SHUFFLE[mask][2 * count + 1] = (uint8_t) (2 * lane + 1);
				count++;
			}
		}
		for (unsigned rest = 2 * count; rest < 16; rest++) {
			PACK_SHUFFLE[mask][rest] = 0x80; /* zero: written past the kept words, overwritten later */
		}
		PACK_COUNT[mask] = (uint8_t) count;
	}
	uint32_t inv = Q; /* Newton's iteration for q^-1 mod 2^16: each step doubles the correct bits */
	for (int i = 0; i < 4; i++) {
		inv *= 2 - Q * inv;
	}
	QINV = (int16_t) (uint16_t) inv;
	uint32_t g = 2; /* q - 1 = 2^12 * 3: g generates iff g^((q-1)/2) != 1 and g^((q-1)/3) != 1 */
	while (pow_mod(g, (Q - 1) / 2) == 1 || pow_mod(g, (Q - 1) / 3) == 1) {
		g++;
	}
	for (unsigned logn = 9; logn <= MAX_LOGN; logn++) {
		twiddles *t = &TABLES[logn - 9];
		unsigned n = 1u << logn, vectors = n / 16;
		uint32_t psi = pow_mod(g, (Q - 1) >> (logn + 1));
		for (unsigned k = 1; k < vectors; k++) {
			unsigned e = bit_reverse(k, logn);
			montgomery_operand(pow_mod(psi, e), &t->fwd[k], &t->fwd_q[k]);
			montgomery_operand(pow_mod(psi, 2 * n - e), &t->inv[k], &t->inv_q[k]);
		}
		for (unsigned grp = 0; grp < vectors / 16; grp++) {
			for (unsigned s = 0; s < 4; s++) {
				unsigned halves = 1u << s, first = vectors * halves; /* layer s: k = n/(2*(8>>s)) + ... */
				for (unsigned h = 0; h < halves; h++) {
					for (unsigned l = 0; l < 16; l++) {
						unsigned k = first + halves * (16 * grp + l) + h, e = bit_reverse(k, logn);
						montgomery_operand(pow_mod(psi, e), &t->tfwd[grp][halves - 1 + h][l],
						                   &t->tfwd_q[grp][halves - 1 + h][l]);
						montgomery_operand(pow_mod(psi, 2 * n - e), &t->tinv[grp][halves - 1 + h][l],
						                   &t->tinv_q[grp][halves - 1 + h][l]);
					}
				}
			}
		}
		/* montmul(x, key_scale) = x * n^-1 * 2^16: the key's transform then carries the
		 * inverse's 1/n and cancels the 2^-16 of the pointwise montmul. */
		uint32_t n_inv = pow_mod(n, Q - 2);
		montgomery_operand(n_inv * 65536u % Q, &t->key_scale, &t->key_scale_q);
	}
}

static const twiddles *tables_for(unsigned logn) {
	pthread_once(&tables_once, build_tables);
	return &TABLES[logn - 9];
}

/* --- 16-lane arithmetic mod q ----------------------------------------------------------- */

/* a * z * 2^-16 mod q, |result| <= M(|a|) < 9217 when |z| <= q/2 (zq = z * q^-1 mod 2^16; M: file comment). */
static inline __m256i montmul(__m256i a, __m256i z, __m256i zq) {
	__m256i lo = _mm256_mullo_epi16(a, zq);
	__m256i hi = _mm256_mulhi_epi16(a, z);
	return _mm256_sub_epi16(hi, _mm256_mulhi_epi16(lo, _mm256_set1_epi16(Q)));
}

/* x mod q in [-6146, 6146] for any int16 x: x minus round(x / q) * q, the quotient from
 * x * round(2^28 / q) / 2^28 (mulhi drops 16 bits, mulhrs by 8 rounds off the other 12). */
static inline __m256i barrett(__m256i x) {
	__m256i t = _mm256_mulhi_epi16(x, _mm256_set1_epi16(BARRETT_V));
	t = _mm256_mulhrs_epi16(t, _mm256_set1_epi16(8));
	return _mm256_sub_epi16(x, _mm256_mullo_epi16(t, _mm256_set1_epi16(Q)));
}

/* x mod q in [-HALF_Q, HALF_Q], the one centred representative, for any int16 x. */
static inline __m256i centred(__m256i x) {
	x = barrett(x);
	__m256i too_high = _mm256_cmpgt_epi16(x, _mm256_set1_epi16(HALF_Q));
	__m256i too_low = _mm256_cmpgt_epi16(_mm256_set1_epi16(-HALF_Q), x);
	x = _mm256_sub_epi16(x, _mm256_and_si256(too_high, _mm256_set1_epi16(Q)));
	return _mm256_add_epi16(x, _mm256_and_si256(too_low, _mm256_set1_epi16(Q)));
}

/* 16 x 16 transpose of int16: r[j] lane l := old r[l] lane j. Its own inverse. Three
 * rounds of interleaving inside 128-bit halves transpose each 8 x 8 quarter; the
 * 128-bit swap puts the quarters in place. */
static inline void transpose16(__m256i r[16]) {
	__m256i a[16], b[16];
	for (int i = 0; i < 16; i += 2) {
		a[i] = _mm256_unpacklo_epi16(r[i], r[i + 1]);
		a[i + 1] = _mm256_unpackhi_epi16(r[i], r[i + 1]);
	}
	for (int i = 0; i < 16; i += 4) {
		for (int j = 0; j < 2; j++) {
			b[i + 2 * j] = _mm256_unpacklo_epi32(a[i + j], a[i + 2 + j]);
			b[i + 2 * j + 1] = _mm256_unpackhi_epi32(a[i + j], a[i + 2 + j]);
		}
	}
	/* b[4m + c], c < 4: columns 2c and 2c + 1 (per 128-bit half) of rows 4m..4m+3. */
	for (int i = 0; i < 16; i += 8) {
		for (int j = 0; j < 4; j++) {
			a[i + 2 * j] = _mm256_unpacklo_epi64(b[i + j], b[i + 4 + j]);
			a[i + 2 * j + 1] = _mm256_unpackhi_epi64(b[i + j], b[i + 4 + j]);
		}
	}
	/* a[8m + c], c < 8: column c (low half) and column 8 + c (high half) of rows 8m..8m+7. */
	for (int c = 0; c < 8; c++) {
		r[c] = _mm256_permute2x128_si256(a[c], a[8 + c], 0x20);
		r[8 + c] = _mm256_permute2x128_si256(a[c], a[8 + c], 0x31);
	}
}

/* --- the transforms ----------------------------------------------------------------------- */

/* Forward NTT in place (n = 2^logn int16): see the file comment for layout and bounds. */
static void ntt(int16_t *a, unsigned logn) {
	const twiddles *t = tables_for(logn);
	size_t vectors = (size_t) 1 << (logn - 4);
	unsigned layer = 1;
	__m256i *v = (__m256i *) a;
	for (size_t span = vectors / 2, blocks = 1; span >= 1; span >>= 1, blocks <<= 1, layer++) {
		int reduce = layer % 3 == 1 && layer > 1;
		for (size_t b = 0; b < blocks; b++) {
			__m256i z = _mm256_set1_epi16(t->fwd[blocks + b]), zq = _mm256_set1_epi16(t->fwd_q[blocks + b]);
			for (size_t i = 2 * span * b; i < 2 * span * b + span; i++) {
				__m256i x = _mm256_loadu_si256(&v[i]), y = montmul(_mm256_loadu_si256(&v[i + span]), z, zq);
				x = reduce ? barrett(x) : x;
				_mm256_storeu_si256(&v[i], _mm256_add_epi16(x, y));
				_mm256_storeu_si256(&v[i + span], _mm256_sub_epi16(x, y));
			}
		}
	}
	for (size_t grp = 0; grp < vectors / 16; grp++) {
		__m256i r[16];
		for (int j = 0; j < 16; j++) {
			r[j] = _mm256_loadu_si256(&v[16 * grp + j]);
		}
		transpose16(r);
		for (unsigned s = 0, l = layer; s < 4; s++, l++) {
			int reduce = l % 3 == 1;
			unsigned halves = 1u << s, d = 8u >> s;
			for (unsigned h = 0; h < halves; h++) {
				__m256i z = _mm256_load_si256((const __m256i *) t->tfwd[grp][halves - 1 + h]);
				__m256i zq = _mm256_load_si256((const __m256i *) t->tfwd_q[grp][halves - 1 + h]);
				for (unsigned j = 2 * d * h; j < 2 * d * h + d; j++) {
					__m256i x = reduce ? barrett(r[j]) : r[j], y = montmul(r[j + d], z, zq);
					r[j] = _mm256_add_epi16(x, y);
					r[j + d] = _mm256_sub_epi16(x, y);
				}
			}
		}
		for (int j = 0; j < 16; j++) {
			_mm256_storeu_si256(&v[16 * grp + j], r[j]);
		}
	}
}

/* Inverse NTT in place, times n (the 1/n is in the key): the forward layers undone in
 * reverse order, each butterfly (u, v) -> (u + v reduced, (u - v) / zeta). */
static void inverse_ntt(int16_t *a, unsigned logn) {
	const twiddles *t = tables_for(logn);
	size_t vectors = (size_t) 1 << (logn - 4);
	__m256i *v = (__m256i *) a;
	for (size_t grp = 0; grp < vectors / 16; grp++) {
		__m256i r[16];
		for (int j = 0; j < 16; j++) {
			r[j] = _mm256_loadu_si256(&v[16 * grp + j]);
		}
		for (int s = 3; s >= 0; s--) {
			unsigned halves = 1u << s, d = 8u >> s;
			for (unsigned h = 0; h < halves; h++) {
				__m256i z = _mm256_load_si256((const __m256i *) t->tinv[grp][halves - 1 + h]);
				__m256i zq = _mm256_load_si256((const __m256i *) t->tinv_q[grp][halves - 1 + h]);
				for (unsigned j = 2 * d * h; j < 2 * d * h + d; j++) {
					__m256i x = r[j], y = r[j + d];
					r[j] = barrett(_mm256_add_epi16(x, y));
					r[j + d] = montmul(_mm256_sub_epi16(x, y), z, zq);
				}
			}
		}
		transpose16(r);
		for (int j = 0; j < 16; j++) {
			_mm256_storeu_si256(&v[16 * grp + j], r[j]);
		}
	}
	for (size_t span = 1, blocks = vectors / 2; span < vectors; span <<= 1, blocks >>= 1) {
		for (size_t b = 0; b < blocks; b++) {
			__m256i z = _mm256_set1_epi16(t->inv[blocks + b]), zq = _mm256_set1_epi16(t->inv_q[blocks + b]);
			for (size_t i = 2 * span * b; i < 2 * span * b + span; i++) {
				__m256i x = _mm256_loadu_si256(&v[i]), y = _mm256_loadu_si256(&v[i + span]);
				_mm256_storeu_si256(&v[i], barrett(_mm256_add_epi16(x, y)));
				_mm256_storeu_si256(&v[i + span], montmul(_mm256_sub_epi16(x, y), z, zq));
			}
		}
	}
}

/* --- the entry points ------------------------------------------------------------------------ */

/* 8 words in a 128-bit half: the kept ones (mask) to x, their count returned. */
static inline size_t pack8(uint16_t *x, __m128i words, __m128i kept) {
	unsigned mask = (unsigned) _mm_movemask_epi8(_mm_packs_epi16(kept, _mm_setzero_si128()));
	_mm_storeu_si128((__m128i *) x, _mm_shuffle_epi8(words, _mm_load_si128((const __m128i *) PACK_SHUFFLE[mask])));
	return PACK_COUNT[mask];
}

size_t falcon_vt_avx2_hash_block(uint16_t *x, const uint8_t *block) {
	pthread_once(&tables_once, build_tables);
	/* Big-endian 16-bit words: swap the bytes of each lane. */
	const __m256i swap = _mm256_setr_epi8(1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14,
	                                      1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
	const __m256i q = _mm256_set1_epi16(Q), limit = _mm256_set1_epi16((short) 61444);
	size_t got = 0;
	for (int i = 0; i < FALCON_VT_HASH_BLOCK_BYTES / 32; i++) {
		__m256i w = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *) (block + 32 * i)), swap);
		__m256i kept = _mm256_cmpeq_epi16(_mm256_min_epu16(w, limit), w); /* w <= 61444 = 5q - 1 */
		for (int k = 0; k < 4; k++) { /* w mod q for w < 5q: w - q wraps above w when w < q */
			w = _mm256_min_epu16(w, _mm256_sub_epi16(w, q));
		}
		got += pack8(x + got, _mm256_castsi256_si128(w), _mm256_castsi256_si128(kept));
		got += pack8(x + got, _mm256_extracti128_si256(w, 1), _mm256_extracti128_si256(kept, 1));
	}
	for (int pos = FALCON_VT_HASH_BLOCK_BYTES / 32 * 32; pos < FALCON_VT_HASH_BLOCK_BYTES; pos += 2) {
		uint32_t w = ((uint32_t) block[pos] << 8) | (uint32_t) block[pos + 1];
		x[got] = (uint16_t) (w % Q);
		got += w < 61445;
	}
	return got;
}

void falcon_vt_avx2_prepare_key(int16_t *hh, const uint16_t *h, unsigned logn) {
	const twiddles *t = tables_for(logn);
	size_t vectors = (size_t) 1 << (logn - 4);
	__m256i *v = (__m256i *) hh;
	for (size_t i = 0; i < vectors; i++) { /* [0, q) -> centred, the forward's input bound */
		_mm256_storeu_si256(&v[i], centred(_mm256_loadu_si256((const __m256i *) h + i)));
	}
	ntt(hh, logn);
	__m256i scale = _mm256_set1_epi16(t->key_scale), scale_q = _mm256_set1_epi16(t->key_scale_q);
	for (size_t i = 0; i < vectors; i++) { /* centred: the pointwise product's bound assumes |hh| <= q/2 */
		_mm256_storeu_si256(&v[i], centred(montmul(_mm256_loadu_si256(&v[i]), scale, scale_q)));
	}
}

uint64_t falcon_vt_avx2_norm(const uint16_t *c0, const int16_t *s2, const int16_t *hh, unsigned logn) {
	size_t vectors = (size_t) 1 << (logn - 4);
	int16_t w[1 << MAX_LOGN] __attribute__((aligned(32)));
	__m256i *v = (__m256i *) w, qinv = _mm256_set1_epi16(QINV);
	const __m256i *s = (const __m256i *) s2, *k = (const __m256i *) hh, *c = (const __m256i *) c0;
	(void) tables_for(logn); /* QINV */
	for (size_t i = 0; i < vectors; i++) {
		_mm256_store_si256(&v[i], _mm256_loadu_si256(&s[i]));
	}
	ntt(w, logn);
	for (size_t i = 0; i < vectors; i++) {
		__m256i key = _mm256_loadu_si256(&k[i]);
		_mm256_store_si256(&v[i], montmul(v[i], key, _mm256_mullo_epi16(key, qinv)));
	}
	inverse_ntt(w, logn);
	/* -s1 = s2*h - c0, centred; each lane pair's d^2 + d'^2 + s^2 + s'^2 < 2^27 fits in 32
	 * bits, and the total (up to 2^34) is summed in 64-bit lanes, so it is exact. */
	__m256i sum = _mm256_setzero_si256();
	for (size_t i = 0; i < vectors; i++) {
		__m256i d = centred(_mm256_sub_epi16(v[i], _mm256_loadu_si256(&c[i])));
		__m256i si = _mm256_loadu_si256(&s[i]);
		__m256i sq = _mm256_add_epi32(_mm256_madd_epi16(d, d), _mm256_madd_epi16(si, si));
		sum = _mm256_add_epi64(sum, _mm256_cvtepu32_epi64(_mm256_castsi256_si128(sq)));
		sum = _mm256_add_epi64(sum, _mm256_cvtepu32_epi64(_mm256_extracti128_si256(sq, 1)));
	}
	__m128i half = _mm_add_epi64(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
	return (uint64_t) _mm_cvtsi128_si64(half) + (uint64_t) _mm_extract_epi64(half, 1);
}
