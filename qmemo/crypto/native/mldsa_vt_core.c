/*
 * mldsa_vt_core.c - ML-DSA verification split in two: what depends only on the public
 * key (expand), done once per key, and the rest (verify), done per signature.
 *
 * Compiled six times by mldsa_vt.mk, against each of liboqs 0.13's pq-crystals copies
 * (ML-DSA-44/65/87 x ref/AVX2: -DDILITHIUM_MODE=2|3|5 and that copy's folder first on
 * the include path), so every name below (poly_ntt, polyvec_matrix_expand, ...) is
 * that copy's own function and the same arithmetic as liboqs's verify. QMV_CORE names
 * the table this copy exports (mldsa_vt_core.h); QMV_AVX2 marks the AVX2 copies.
 *
 * The checks are those of the copy's crypto_sign_verify_internal (sign.c), with two
 * changes in the AVX2 copy, both to FIPS 204 and the ref code (see mldsa_vt.h):
 *   - ||z||_inf < gamma1 - beta is checked (ref: polyvecl_chknorm; AVX2 sign.c omits it);
 *   - use_hint moves r1 down when r0 == 0 (FIPS 204 Algorithm 40: up only for r0 > 0;
 *     the AVX2 use_hint_avx moves it up).
 * Everything that depends only on the public key - tr = H(pk), A-hat = ExpandA(rho),
 * NTT(t1 * 2^d) - comes from `expand`, computed by the same functions liboqs calls.
 *
 * Never: verify with a context string (qMEMO signs with none), or read past the
 * signature (it has exactly CRYPTO_BYTES, checked by the caller).
 */
#include <stdint.h>
#include <string.h>

#include "params.h"
#include "poly.h"
#include "polyvec.h"
#include "packing.h"
#include "symmetric.h"
#include "fips202.h"
#ifdef QMV_AVX2
#include <immintrin.h>
#include "rounding.h"
#endif

#include "mldsa_vt_core.h"

/* The expanded key. Its polynomials are this copy's `poly` (32-byte aligned in the AVX2
 * copy), so the whole struct is allocated 32-byte aligned (mldsa_vt_cache.c does). */
typedef struct {
	polyvecl mat[K]; /* A-hat: ExpandA(rho), in NTT form as sampled */
	polyveck t1;     /* NTT(t1 * 2^d), as the copy's verify computes it */
	uint8_t tr[TRBYTES];
} expanded_key;

/* The prefix OQS_SIG_verify's empty context string gives: 0 (pure ML-DSA), length 0. */
static const uint8_t EMPTY_CONTEXT[2] = {0, 0};

static void expand(void *out, const uint8_t *pk) {
	expanded_key *key = out;
	shake256(key->tr, TRBYTES, pk, CRYPTO_PUBLICKEYBYTES);
	polyvec_matrix_expand(key->mat, pk); /* rho is the key's first SEEDBYTES */
	for (unsigned i = 0; i < K; i++) {
		polyt1_unpack(&key->t1.vec[i], pk + SEEDBYTES + i * POLYT1_PACKEDBYTES);
		poly_shiftl(&key->t1.vec[i]);
		poly_ntt(&key->t1.vec[i]);
	}
}

/* mu = H(tr || 0 || 0 || msg): the message representative of FIPS 204 Algorithm 7. */
static void message_representative(uint8_t mu[CRHBYTES], const expanded_key *key, const uint8_t *msg,
                                   size_t msg_len, shake256incctx *state) {
	shake256_inc_init(state);
	shake256_inc_absorb(state, key->tr, TRBYTES);
	shake256_inc_absorb(state, EMPTY_CONTEXT, sizeof EMPTY_CONTEXT);
	shake256_inc_absorb(state, msg, msg_len);
	shake256_inc_finalize(state);
	shake256_inc_squeeze(mu, CRHBYTES, state);
}

/* c~ == H(mu || w1Encode(w1)) (truncated to CTILDEBYTES), the final check; releases `state`. */
static int challenge_matches(const uint8_t *sig, const uint8_t mu[CRHBYTES], const uint8_t *w1_packed,
                             shake256incctx *state) {
	uint8_t c2[CTILDEBYTES];
	shake256_inc_ctx_reset(state);
	shake256_inc_absorb(state, mu, CRHBYTES);
	shake256_inc_absorb(state, w1_packed, K * POLYW1_PACKEDBYTES);
	shake256_inc_finalize(state);
	shake256_inc_squeeze(c2, CTILDEBYTES, state);
	shake256_inc_ctx_release(state);
	return memcmp(c2, sig, CTILDEBYTES) == 0; /* public data: no need for a constant-time compare */
}

#ifdef QMV_AVX2

/*
 * FIPS 204's UseHint (Algorithm 40) on a polynomial: r1 + 1 if the hint is set and r0 > 0,
 * r1 - 1 if it is set and r0 <= 0, modulo (q - 1) / (2 gamma2). This copy's use_hint_avx
 * selects on the sign bit of r0, i.e. r0 >= 0 moves up; here r0 == 0 moves down, as in
 * the ref code (rounding.c's use_hint). The rest is use_hint_avx's own arithmetic.
 */
/* A 32-bit lane blend on each lane's sign bit, as the AVX2 copy's rounding.c defines it. */
#define blendv_epi32(a, b, mask) \
	_mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(a), _mm256_castsi256_ps(b), _mm256_castsi256_ps(mask)))

static void use_hint_fips(poly *b, const poly *a, const poly *hint) {
	__m256i a0[N / 8];
	const __m256i zero = _mm256_setzero_si256();
#if GAMMA2 == (Q - 1) / 32
	const __m256i mask = _mm256_set1_epi32(15);
#elif GAMMA2 == (Q - 1) / 88
	const __m256i max = _mm256_set1_epi32(43);
#endif
	decompose_avx(b->vec, a0, a->vec);
	for (unsigned i = 0; i < N / 8; i++) {
		__m256i f = _mm256_load_si256(&a0[i]), g = _mm256_load_si256(&b->vec[i]), h = _mm256_load_si256(&hint->vec[i]);
		__m256i up = _mm256_cmpgt_epi32(f, zero);          /* r0 > 0 */
		__m256i t = _mm256_slli_epi32(_mm256_andnot_si256(up, h), 1);
		g = _mm256_add_epi32(g, _mm256_sub_epi32(h, t));   /* +hint where r0 > 0, -hint elsewhere */
#if GAMMA2 == (Q - 1) / 32
		g = _mm256_and_si256(g, mask);
#elif GAMMA2 == (Q - 1) / 88
		g = blendv_epi32(g, max, g);               /* -1 -> 43 */
		f = _mm256_cmpgt_epi32(g, max);
		g = blendv_epi32(g, zero, f);              /* 44 -> 0 */
#endif
		_mm256_store_si256(&b->vec[i], g);
	}
}

/* The AVX2 copy's crypto_sign_verify_internal after the key, row by row as it goes. */
static int verify(const void *expanded, const uint8_t *msg, size_t msg_len, const uint8_t *sig) {
	const expanded_key *key = expanded;
	ALIGNED_UINT8(K * POLYW1_PACKEDBYTES + 14) buf; /* polyw1_pack writes 14 bytes more */
	uint8_t mu[CRHBYTES];
	const uint8_t *hint = sig + CTILDEBYTES + L * POLYZ_PACKEDBYTES;
	polyvecl z;
	poly c, w1, h;
	shake256incctx state;
	unsigned pos = 0;

	/* z first: a signature that fails the norm bound costs no hashing. polyz_unpack
	 * reads 14 bytes past its polynomial: the hint bytes, still inside the signature. */
	for (unsigned i = 0; i < L; i++) {
		polyz_unpack(&z.vec[i], sig + CTILDEBYTES + i * POLYZ_PACKEDBYTES);
		if (poly_chknorm(&z.vec[i], GAMMA1 - BETA)) {
			return 0;
		}
		poly_ntt(&z.vec[i]);
	}
	message_representative(mu, key, msg, msg_len, &state);
	poly_challenge(&c, sig);
	poly_ntt(&c);
	for (unsigned i = 0; i < K; i++) {
		polyvecl_pointwise_acc_montgomery(&w1, &key->mat[i], &z);
		poly_pointwise_montgomery(&h, &c, &key->t1.vec[i]);
		poly_sub(&w1, &w1, &h);
		poly_reduce(&w1);
		poly_invntt_tomont(&w1);
		/* The hint of row i: strictly increasing positions, at most OMEGA in all. */
		memset(h.vec, 0, sizeof(poly));
		if (hint[OMEGA + i] < pos || hint[OMEGA + i] > OMEGA) {
			shake256_inc_ctx_release(&state);
			return 0;
		}
		for (unsigned j = pos; j < hint[OMEGA + i]; j++) {
			if (j > pos && hint[j] <= hint[j - 1]) {
				shake256_inc_ctx_release(&state);
				return 0;
			}
			h.coeffs[hint[j]] = 1;
		}
		pos = hint[OMEGA + i];
		poly_caddq(&w1);
		use_hint_fips(&w1, &w1, &h);
		polyw1_pack(buf.coeffs + i * POLYW1_PACKEDBYTES, &w1);
	}
	for (unsigned j = pos; j < OMEGA; j++) { /* unused hint positions are zero */
		if (hint[j]) {
			shake256_inc_ctx_release(&state);
			return 0;
		}
	}
	return challenge_matches(sig, mu, buf.coeffs, &state);
}

#define USE_HINT_EXPORT_(mode) mldsa_vt_use_hint_##mode##_avx2
#define USE_HINT_EXPORT(mode) USE_HINT_EXPORT_(mode)
void USE_HINT_EXPORT(QMV_MODE_NAME)(int32_t *b, const int32_t *a, const int32_t *hint) {
	poly pb, pa, ph;
	memcpy(pa.coeffs, a, sizeof pa.coeffs);
	memcpy(ph.coeffs, hint, sizeof ph.coeffs);
	use_hint_fips(&pb, &pa, &ph);
	memcpy(b, pb.coeffs, sizeof pb.coeffs);
}

#else /* the ref copy */

/* The ref copy's crypto_sign_verify_internal after the key, unchanged in its checks. */
static int verify(const void *expanded, const uint8_t *msg, size_t msg_len, const uint8_t *sig) {
	const expanded_key *key = expanded;
	uint8_t buf[K * POLYW1_PACKEDBYTES], mu[CRHBYTES], c[CTILDEBYTES];
	poly cp;
	polyvecl z;
	polyveck w1, h, ct1;
	shake256incctx state;

	if (unpack_sig(c, &z, &h, sig) || polyvecl_chknorm(&z, GAMMA1 - BETA)) {
		return 0;
	}
	message_representative(mu, key, msg, msg_len, &state);
	poly_challenge(&cp, c);
	polyvecl_ntt(&z);
	polyvec_matrix_pointwise_montgomery(&w1, key->mat, &z);
	poly_ntt(&cp);
	polyveck_pointwise_poly_montgomery(&ct1, &cp, &key->t1);
	polyveck_sub(&w1, &w1, &ct1);
	polyveck_reduce(&w1);
	polyveck_invntt_tomont(&w1);
	polyveck_caddq(&w1);
	polyveck_use_hint(&w1, &w1, &h);
	polyveck_pack_w1(buf, &w1);
	return challenge_matches(sig, mu, buf, &state);
}

#endif

const mldsa_vt_core QMV_CORE = {
	.expanded_bytes = (sizeof(expanded_key) + 31) / 32 * 32,
	.public_key_bytes = CRYPTO_PUBLICKEYBYTES,
	.signature_bytes = CRYPTO_BYTES,
	.expand = expand,
	.verify = verify,
};
