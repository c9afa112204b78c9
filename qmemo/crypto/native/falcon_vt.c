/*
 * falcon_vt.c - Falcon verification for public messages from liboqs 0.13's own PQClean
 * functions: variable-time hash-to-point and decoded public keys kept in a cache.
 *
 * The accept/reject rules are those of PQClean's crypto_sign_verify + do_verify
 * (pqclean_falcon-*_{clean,avx2}/pqclean.c, identical in all eight copies but for
 * names and logn), in the same order of checks; see falcon_vt.h for the exact rule
 * and why the caller's length checks belong to it. The only change to the arithmetic
 * is hash_to_point_vartime instead of hash_to_point_ct: both map the SHAKE256 stream
 * to the same point (rejection sampling of 16-bit words below 61445, reduced mod q);
 * _ct only hides, at ~6x the cost, which words were rejected.
 *
 * Never: hash a secret message here (see docs/methodology.md), or return a decoded
 * key for any public key but the one whose bytes were compared in full.
 */
#include "falcon_vt.h"
#include "falcon_vt_cache.h"
#include "falcon_vt_verify.h"
#include "falcon_vt_codec.h"
#ifdef QFV_HAVE_AVX2
#include "falcon_vt_avx2.h"
#include <cpuid.h>
#endif

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <oqs/common.h>
#include <oqs/sha3.h>   /* liboqs's SHAKE256, compiled in from liboqs's sources (liboqs.so hides it) */

/* Sizes straight from the PQClean sources the setup compiles (-I .../src/sig/falcon). */
#include "pqclean_falcon-512_clean/api.h"
#include "pqclean_falcon-1024_clean/api.h"
#include "pqclean_falcon-padded-512_clean/api.h"
#include "pqclean_falcon-padded-1024_clean/api.h"

_Static_assert(PQCLEAN_FALCON1024_CLEAN_CRYPTO_PUBLICKEYBYTES == FALCON_VT_MAX_PK_BYTES, "cache key size");

#define PQCLEAN_OPS(NS)                                                                                 \
	size_t NS##_modq_decode(uint16_t *x, unsigned logn, const void *in, size_t max_in_len);             \
	void NS##_to_ntt_monty(uint16_t *h, unsigned logn);                                                 \
	int NS##_verify_raw(const uint16_t *c0, const int16_t *s2, const uint16_t *h, unsigned logn,        \
	                    uint8_t *tmp);                                                                  \
	static const pqclean_ops NS##_ops = {NS##_modq_decode, NS##_to_ntt_monty, NS##_verify_raw};

PQCLEAN_OPS(PQCLEAN_FALCON512_CLEAN)
PQCLEAN_OPS(PQCLEAN_FALCON1024_CLEAN)
PQCLEAN_OPS(PQCLEAN_FALCONPADDED512_CLEAN)
PQCLEAN_OPS(PQCLEAN_FALCONPADDED1024_CLEAN)
#ifdef QFV_HAVE_AVX2
PQCLEAN_OPS(PQCLEAN_FALCON512_AVX2)
PQCLEAN_OPS(PQCLEAN_FALCON1024_AVX2)
PQCLEAN_OPS(PQCLEAN_FALCONPADDED512_AVX2)
PQCLEAN_OPS(PQCLEAN_FALCONPADDED1024_AVX2)
#define AVX2_OPS(NS) (&NS##_ops)
#else
#define AVX2_OPS(NS) NULL
#endif

#define PADDED_BODY(bytes) ((bytes) - 1 - NONCE_BYTES) /* minus header byte and nonce */
#define NORM_BOUND_512 34034726u  /* PQClean's l2bound[9] (common.c), floor(beta^2) of the Falcon spec */
#define NORM_BOUND_1024 70265242u /* l2bound[10] */

static const variant_info VARIANTS[QFV_VARIANT_COUNT] = {
	[QFV_FALCON_512] = {"Falcon-512", 9, PQCLEAN_FALCON512_CLEAN_CRYPTO_PUBLICKEYBYTES,
	                    PQCLEAN_FALCON512_CLEAN_CRYPTO_BYTES, PADDED_BODY(PQCLEAN_FALCONPADDED512_CLEAN_CRYPTO_BYTES),
	                    NORM_BOUND_512, {&PQCLEAN_FALCON512_CLEAN_ops, AVX2_OPS(PQCLEAN_FALCON512_AVX2)}},
	[QFV_FALCON_1024] = {"Falcon-1024", 10, PQCLEAN_FALCON1024_CLEAN_CRYPTO_PUBLICKEYBYTES,
	                     PQCLEAN_FALCON1024_CLEAN_CRYPTO_BYTES, PADDED_BODY(PQCLEAN_FALCONPADDED1024_CLEAN_CRYPTO_BYTES),
	                     NORM_BOUND_1024, {&PQCLEAN_FALCON1024_CLEAN_ops, AVX2_OPS(PQCLEAN_FALCON1024_AVX2)}},
	[QFV_FALCON_PADDED_512] = {"Falcon-padded-512", 9, PQCLEAN_FALCONPADDED512_CLEAN_CRYPTO_PUBLICKEYBYTES,
	                           PQCLEAN_FALCONPADDED512_CLEAN_CRYPTO_BYTES,
	                           PADDED_BODY(PQCLEAN_FALCONPADDED512_CLEAN_CRYPTO_BYTES), NORM_BOUND_512,
	                           {&PQCLEAN_FALCONPADDED512_CLEAN_ops, AVX2_OPS(PQCLEAN_FALCONPADDED512_AVX2)}},
	[QFV_FALCON_PADDED_1024] = {"Falcon-padded-1024", 10, PQCLEAN_FALCONPADDED1024_CLEAN_CRYPTO_PUBLICKEYBYTES,
	                            PQCLEAN_FALCONPADDED1024_CLEAN_CRYPTO_BYTES,
	                            PADDED_BODY(PQCLEAN_FALCONPADDED1024_CLEAN_CRYPTO_BYTES), NORM_BOUND_1024,
	                            {&PQCLEAN_FALCONPADDED1024_CLEAN_ops, AVX2_OPS(PQCLEAN_FALCONPADDED1024_AVX2)}},
};

const variant_info *falcon_vt_variant_info(int variant) {
	return variant >= 0 && variant < QFV_VARIANT_COUNT ? &VARIANTS[variant] : NULL;
}

int qfv_variant(const char *liboqs_name) {
	for (int i = 0; liboqs_name != NULL && i < QFV_VARIANT_COUNT; i++) {
		if (strcmp(VARIANTS[i].name, liboqs_name) == 0) {
			return i;
		}
	}
	return -1;
}

const char *qfv_variant_name(int variant) {
	const variant_info *v = falcon_vt_variant_info(variant);
	return v ? v->name : NULL;
}

size_t qfv_public_key_bytes(int variant) {
	const variant_info *v = falcon_vt_variant_info(variant);
	return v ? v->pk_bytes : 0;
}

size_t qfv_max_signature_bytes(int variant) {
	const variant_info *v = falcon_vt_variant_info(variant);
	return v ? v->max_sig_bytes : 0;
}

/* --- run-time choice of implementation ------------------------------------------- */

static int selected_impl = IMPL_CLEAN;
static pthread_once_t impl_once = PTHREAD_ONCE_INIT;

static int avx2_available(void) {
#ifdef QFV_HAVE_AVX2
	/* liboqs's own test (CPUID + OS support), so we pick what OQS_SIG_verify picks. */
	return OQS_CPU_has_extension(OQS_CPU_EXT_AVX2);
#else
	return 0;
#endif
}

/* BMI2 and LZCNT, for falcon_vt_comp_decode_bmi2: every AVX2 CPU of Intel (Haswell on)
 * and AMD (Excavator on) has both, but AVX2 does not imply them, so they are asked for. */
static int bmi2_lzcnt = 0;

static int bmi2_lzcnt_available(void) {
#ifdef QFV_HAVE_AVX2
	unsigned a, b, c, d;
	return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & bit_BMI2) && __get_cpuid(0x80000001, &a, &b, &c, &d) &&
	       (c & bit_LZCNT);
#else
	return 0;
#endif
}

static void choose_impl(void) {
	bmi2_lzcnt = bmi2_lzcnt_available();
	const char *forced = getenv("QMEMO_FALCON_IMPL");
	int impl = avx2_available() ? IMPL_AVX2 : IMPL_CLEAN;
	if (forced != NULL && strcmp(forced, "clean") == 0) {
		impl = IMPL_CLEAN;
	}
	__atomic_store_n(&selected_impl, impl, __ATOMIC_RELEASE);
}

int falcon_vt_current_impl(void) {
	pthread_once(&impl_once, choose_impl);
	return __atomic_load_n(&selected_impl, __ATOMIC_ACQUIRE);
}

const char *qfv_implementation(void) {
	return falcon_vt_current_impl() == IMPL_AVX2 ? "avx2" : "clean";
}

/* The AVX2 implementation gets the decoder built for its CPUs (BMI2 + LZCNT, where they
 * are); the portable code the portable one. One test for the dispatch and its report. */
static int uses_bmi2_decoder(int impl) {
	return impl == IMPL_AVX2 && bmi2_lzcnt;
}

const char *qfv_decoder(void) {
	return uses_bmi2_decoder(falcon_vt_current_impl()) ? "bmi2" : "portable";
}

int qfv_select_implementation(const char *name) {
	pthread_once(&impl_once, choose_impl);
	int impl;
	if (name != NULL && strcmp(name, "clean") == 0) {
		impl = IMPL_CLEAN;
	} else if (name != NULL && strcmp(name, "avx2") == 0 && avx2_available()) {
		impl = IMPL_AVX2;
	} else {
		return -1;
	}
	__atomic_store_n(&selected_impl, impl, __ATOMIC_RELEASE);
	return 0;
}

/* --- one verify ------------------------------------------------------------------- */

/* do_verify's public-key decoding: header byte 0x00 + logn, then 14-bit coefficients
 * below q filling the rest exactly; then the form the implementation multiplies by. */
int falcon_vt_decode_public_key(const variant_info *v, int impl, const uint8_t *pk, uint16_t *h) {
	const pqclean_ops *ops = v->ops[impl];
	if (pk[0] != v->logn) {
		return 0;
	}
	decoded_key raw;
	if (ops->modq_decode(raw, v->logn, pk + 1, v->pk_bytes - 1) != v->pk_bytes - 1) {
		return 0;
	}
#ifdef QFV_HAVE_AVX2
	if (impl == IMPL_AVX2) {
		falcon_vt_avx2_prepare_key((int16_t *) h, raw, v->logn);
		return 1;
	}
#endif
	memcpy(h, raw, sizeof(uint16_t) << v->logn);
	ops->to_ntt_monty(h, v->logn);
	return 1;
}

/*
 * PQClean's hash_to_point_vartime (common.c), with two changes that keep its output:
 * it squeezes SHAKE256 one rate-sized block at a time instead of two bytes per call
 * (SHAKE's output is one byte stream however it is cut; the per-call overhead was two
 * thirds of PQClean's version's cost, ~45,000 of ~68,000 instructions per Falcon-512
 * verify under callgrind), and it has no data-dependent branch: PQClean's subtraction
 * loop (0 to 4 unpredictable rounds) is a %, the same remainder, and every word is
 * written to the next free slot, which only a kept word claims.
 * Rejection sampling: a 16-bit word below 61445 = 5q is kept, reduced mod q = 12289;
 * the rest are skipped, so the time depends on the hashed message, public here.
 */
#ifdef QFV_HAVE_AVX2
_Static_assert(FALCON_VT_HASH_BLOCK_BYTES == OQS_SHA3_SHAKE256_RATE && FALCON_VT_HASH_BLOCK_SLACK <= 8,
               "hash_to_point's room");
#endif

/* Rejection-sample one SHAKE256 output block into x (which holds `got` of n words):
 * returns the new count. The AVX2 code may write a few words past n (HASHED_ROOM). */
size_t falcon_vt_sample_block(uint16_t *x, size_t got, size_t n, const uint8_t *buf, int impl) {
#ifdef QFV_HAVE_AVX2
	if (impl == IMPL_AVX2) { /* the same words kept, 16 at a time (falcon_vt_avx2.c) */
		return got + falcon_vt_avx2_hash_block(x + got, buf);
	}
#else
	(void) impl;
#endif
	for (size_t pos = 0; pos < OQS_SHA3_SHAKE256_RATE && got < n; pos += 2) {
		uint32_t w = ((uint32_t) buf[pos] << 8) | (uint32_t) buf[pos + 1];
		x[got] = (uint16_t) (w % 12289); /* a rejected word's slot is overwritten by the next */
		got += w < 61445;
	}
	return got;
}

/* SHAKE256(nonce || msg) to a point, one signature. */
void falcon_vt_hash_to_point(const uint8_t *nonce, const uint8_t *msg, size_t msg_len, uint16_t *x, unsigned logn,
                                  int impl) {
	uint8_t buf[OQS_SHA3_SHAKE256_RATE] __attribute__((aligned(32))); /* 136 bytes: even, so no word straddles two blocks */
	size_t n = (size_t) 1 << logn, got = 0;
	OQS_SHA3_shake256_inc_ctx sc;
	OQS_SHA3_shake256_inc_init(&sc);
	OQS_SHA3_shake256_inc_absorb(&sc, nonce, NONCE_BYTES);
	OQS_SHA3_shake256_inc_absorb(&sc, msg, msg_len);
	OQS_SHA3_shake256_inc_finalize(&sc);
	while (got < n) {
		OQS_SHA3_shake256_inc_squeeze(buf, sizeof buf, &sc);
		got = falcon_vt_sample_block(x, got, n, buf, impl);
	}
	OQS_SHA3_shake256_inc_ctx_release(&sc);
}

/* verify_raw's rule: ||(s2*h - c0 mod q, centred; s2)||^2 <= floor(beta^2). PQClean sums
 * in 32 bits and saturates once a partial sum reaches 2^31; every partial sum is below
 * the total, and the bound is below 2^31, so the exact 64-bit total gives its verdict. */
int falcon_vt_short_enough(const variant_info *v, int impl, const uint16_t *c0, const int16_t *s2, const uint16_t *h) {
#ifdef QFV_HAVE_AVX2
	if (impl == IMPL_AVX2) {
		return falcon_vt_avx2_norm(c0, s2, (const int16_t *) h, v->logn) <= v->norm_bound;
	}
#endif
	union {
		uint8_t b[2 * MAX_N];
		uint64_t align_u64; /* verify_raw uses tmp as uint16_t[]; PQClean aligns it the same way */
	} tmp;
	return v->ops[impl]->verify_raw(c0, s2, h, v->logn, tmp.b) != 0;
}

/* crypto_sign_verify + do_verify's checks of the signature itself, in liboqs's order:
 * its header, its nonce (set in *nonce), and s2's encoding (decoded into s2). */
int falcon_vt_decode_signature(const variant_info *v, int impl, const uint8_t *sig, size_t sig_len, int16_t *s2,
                            const uint8_t **nonce) {
	if (sig_len < 1 + NONCE_BYTES || sig[0] != 0x30 + v->logn) {
		return 0;
	}
	const uint8_t *body = sig + 1 + NONCE_BYTES;
	size_t body_len = sig_len - 1 - NONCE_BYTES;
	*nonce = sig + 1;
	if (body_len == 0) {
		return 0;
	}
#ifdef QFV_HAVE_AVX2
	size_t used = uses_bmi2_decoder(impl) ? falcon_vt_comp_decode_bmi2(s2, v->logn, body, body_len)
	                                      : falcon_vt_comp_decode(s2, v->logn, body, body_len);
#else
	(void) impl;
	size_t used = falcon_vt_comp_decode(s2, v->logn, body, body_len);
#endif
	if (used == 0) {
		return 0;
	}
	if (used != body_len) {
		/* Trailing bytes: only the padded length, and only zeros (both variants, as liboqs). */
		if (body_len != v->padded_body_bytes) {
			return 0;
		}
		for (; used < body_len; used++) {
			if (body[used] != 0) {
				return 0;
			}
		}
	}
	return 1;
}

/* crypto_sign_verify + do_verify after the key: every rule in liboqs's order. */
static int verify_with_key(const variant_info *v, int impl, const uint16_t *h, const uint8_t *msg, size_t msg_len,
                           const uint8_t *sig, size_t sig_len) {
	uint16_t hm[HASHED_ROOM] __attribute__((aligned(32)));
	int16_t s2[MAX_N] __attribute__((aligned(32)));
	const uint8_t *nonce;
	if (!falcon_vt_decode_signature(v, impl, sig, sig_len, s2, &nonce)) {
		return 0;
	}
	falcon_vt_hash_to_point(nonce, msg, msg_len, hm, v->logn, impl);
	return falcon_vt_short_enough(v, impl, hm, s2, h);
}

/* The caller-side length rule of falcon_vt.h; NULL if the input can never be valid. */
const variant_info *falcon_vt_checked_variant(int variant, size_t pk_len, size_t sig_len) {
	const variant_info *v = falcon_vt_variant_info(variant);
	if (v == NULL || pk_len != v->pk_bytes || sig_len > v->max_sig_bytes) {
		return NULL;
	}
	return v;
}

int qfv_verify(int variant, const uint8_t *pk, size_t pk_len, const uint8_t *msg, size_t msg_len,
               const uint8_t *sig, size_t sig_len) {
	return qfv_verify_cached(NULL, variant, pk, pk_len, msg, msg_len, sig, sig_len);
}

int qfv_verify_cached(qfv_cache *cache, int variant, const uint8_t *pk, size_t pk_len, const uint8_t *msg,
                      size_t msg_len, const uint8_t *sig, size_t sig_len) {
	const variant_info *v = falcon_vt_checked_variant(variant, pk_len, sig_len);
	if (v == NULL) {
		return 0;
	}
	int impl = falcon_vt_current_impl(); /* read once: the key's form and its use must agree */
	size_t n = (size_t) 1 << v->logn;
	decoded_key h;
	if (cache == NULL) {
		return falcon_vt_decode_public_key(v, impl, pk, h) && verify_with_key(v, impl, h, msg, msg_len, sig, sig_len);
	}
	size_t set = falcon_vt_cache_set(cache, variant, pk, pk_len);
	if (falcon_vt_cache_lookup(cache, set, variant, impl, pk, pk_len, h, n)) {
		return verify_with_key(v, impl, h, msg, msg_len, sig, sig_len);
	}
	if (!falcon_vt_decode_public_key(v, impl, pk, h)) {
		return 0;
	}
	int valid = verify_with_key(v, impl, h, msg, msg_len, sig, sig_len);
	/* Only keys that just verified a signature are kept: a flood of made-up keys with
	 * junk signatures costs its sender a decode each, and evicts nobody. */
	if (valid) {
		falcon_vt_cache_insert(cache, set, variant, impl, pk, pk_len, h, n);
	}
	return valid;
}
