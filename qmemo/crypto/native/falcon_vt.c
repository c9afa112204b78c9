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
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c11 */
#include "falcon_vt.h"
#include "falcon_vt_cache.h"
#include "falcon_vt_codec.h"
#ifdef QFV_HAVE_AVX2
#include "falcon_vt_avx2.h"
#include <cpuid.h>
#endif

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <oqs/common.h>
#include <oqs/sha3.h>   /* liboqs's SHAKE256, compiled in from liboqs's sources (liboqs.so hides it) */
#include <oqs/sha3x4.h> /* ... and its four-lane SHAKE256 (KeccakP-1600-times4, AVX2 where the CPU has it) */

/* Sizes straight from the PQClean sources the setup compiles (-I .../src/sig/falcon). */
#include "pqclean_falcon-512_clean/api.h"
#include "pqclean_falcon-1024_clean/api.h"
#include "pqclean_falcon-padded-512_clean/api.h"
#include "pqclean_falcon-padded-1024_clean/api.h"

#define NONCE_BYTES 40 /* PQClean's NONCELEN: the signature's salt r */
#define MAX_N FALCON_VT_MAX_N
_Static_assert(PQCLEAN_FALCON1024_CLEAN_CRYPTO_PUBLICKEYBYTES == FALCON_VT_MAX_PK_BYTES, "cache key size");

/* The PQClean internal functions one verify needs, for one compiled copy. */
typedef struct {
	size_t (*modq_decode)(uint16_t *x, unsigned logn, const void *in, size_t max_in_len);
	void (*to_ntt_monty)(uint16_t *h, unsigned logn);
	int (*verify_raw)(const uint16_t *c0, const int16_t *s2, const uint16_t *h, unsigned logn, uint8_t *tmp);
} pqclean_ops;

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

static const variant_info *variant_of(int variant) {
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
	const variant_info *v = variant_of(variant);
	return v ? v->name : NULL;
}

size_t qfv_public_key_bytes(int variant) {
	const variant_info *v = variant_of(variant);
	return v ? v->pk_bytes : 0;
}

size_t qfv_max_signature_bytes(int variant) {
	const variant_info *v = variant_of(variant);
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

static int current_impl(void) {
	pthread_once(&impl_once, choose_impl);
	return __atomic_load_n(&selected_impl, __ATOMIC_ACQUIRE);
}

const char *qfv_implementation(void) {
	return current_impl() == IMPL_AVX2 ? "avx2" : "clean";
}

/* The AVX2 implementation gets the decoder built for its CPUs (BMI2 + LZCNT, where they
 * are); the portable code the portable one. One test for the dispatch and its report. */
static int uses_bmi2_decoder(int impl) {
	return impl == IMPL_AVX2 && bmi2_lzcnt;
}

const char *qfv_decoder(void) {
	return uses_bmi2_decoder(current_impl()) ? "bmi2" : "portable";
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

/*
 * The decoded key's form depends on the implementation: PQClean's NTT Montgomery form
 * (to_ntt_monty) for the portable code, falcon_vt_avx2.c's own transform for AVX2. The
 * cache keeps the two apart by `form`, so a switch of implementation (qfv_select_
 * implementation) only costs misses.
 */
typedef uint16_t decoded_key[MAX_N] __attribute__((aligned(32)));

/* do_verify's public-key decoding: header byte 0x00 + logn, then 14-bit coefficients
 * below q filling the rest exactly; then the form the implementation multiplies by. */
static int decode_public_key(const variant_info *v, int impl, const uint8_t *pk, uint16_t *h) {
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
/* Room for hash-to-point's output: the AVX2 code finishes a whole block past n, and may
 * write a few words past that. */
#define HASHED_ROOM (MAX_N + OQS_SHA3_SHAKE256_RATE / 2 + 8)
#ifdef QFV_HAVE_AVX2
_Static_assert(FALCON_VT_HASH_BLOCK_BYTES == OQS_SHA3_SHAKE256_RATE && FALCON_VT_HASH_BLOCK_SLACK <= 8,
               "hash_to_point's room");
#endif

/* Rejection-sample one SHAKE256 output block into x (which holds `got` of n words):
 * returns the new count. The AVX2 code may write a few words past n (HASHED_ROOM). */
static size_t sample_block(uint16_t *x, size_t got, size_t n, const uint8_t *buf, int impl) {
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
static void hash_to_point_vartime(const uint8_t *nonce, const uint8_t *msg, size_t msg_len, uint16_t *x, unsigned logn,
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
		got = sample_block(x, got, n, buf, impl);
	}
	OQS_SHA3_shake256_inc_ctx_release(&sc);
}

/*
 * The same for 2 to 4 signatures whose messages have one length, on liboqs's four-lane
 * SHAKE256: one Keccak-f[1600] times4 permutation (AVX2: four states in one set of
 * registers) per output block of all four, where one lane costs one permutation of its
 * own. Lanes past `lanes` hash lane 0's input again, their output unused. Each lane's
 * stream is exactly its SHAKE256(nonce || msg), so each point is the one-lane point.
 */
static void hash_to_point_x4(const uint8_t *const nonce[4], const uint8_t *const msg[4], size_t msg_len,
                             uint16_t *const x[4], size_t lanes, unsigned logn, int impl) {
	uint8_t buf[4][OQS_SHA3_SHAKE256_RATE] __attribute__((aligned(32)));
	size_t n = (size_t) 1 << logn, got[4] = {0, 0, 0, 0};
	const uint8_t *in_nonce[4], *in_msg[4];
	for (size_t l = 0; l < 4; l++) {
		in_nonce[l] = nonce[l < lanes ? l : 0];
		in_msg[l] = msg[l < lanes ? l : 0];
	}
	OQS_SHA3_shake256_x4_inc_ctx sc;
	OQS_SHA3_shake256_x4_inc_init(&sc);
	OQS_SHA3_shake256_x4_inc_absorb(&sc, in_nonce[0], in_nonce[1], in_nonce[2], in_nonce[3], NONCE_BYTES);
	OQS_SHA3_shake256_x4_inc_absorb(&sc, in_msg[0], in_msg[1], in_msg[2], in_msg[3], msg_len);
	OQS_SHA3_shake256_x4_inc_finalize(&sc);
	for (size_t done = 0; done < lanes;) {
		OQS_SHA3_shake256_x4_inc_squeeze(buf[0], buf[1], buf[2], buf[3], OQS_SHA3_SHAKE256_RATE, &sc);
		done = 0;
		for (size_t l = 0; l < lanes; l++) {
			if (got[l] < n) {
				got[l] = sample_block(x[l], got[l], n, buf[l], impl);
			}
			done += got[l] >= n;
		}
	}
	OQS_SHA3_shake256_x4_inc_ctx_release(&sc);
}

/* verify_raw's rule: ||(s2*h - c0 mod q, centred; s2)||^2 <= floor(beta^2). PQClean sums
 * in 32 bits and saturates once a partial sum reaches 2^31; every partial sum is below
 * the total, and the bound is below 2^31, so the exact 64-bit total gives its verdict. */
static int short_enough(const variant_info *v, int impl, const uint16_t *c0, const int16_t *s2, const uint16_t *h) {
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
static int decode_signature(const variant_info *v, int impl, const uint8_t *sig, size_t sig_len, int16_t *s2,
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
	if (!decode_signature(v, impl, sig, sig_len, s2, &nonce)) {
		return 0;
	}
	hash_to_point_vartime(nonce, msg, msg_len, hm, v->logn, impl);
	return short_enough(v, impl, hm, s2, h);
}

/* The caller-side length rule of falcon_vt.h; NULL if the input can never be valid. */
static const variant_info *checked_variant(int variant, size_t pk_len, size_t sig_len) {
	const variant_info *v = variant_of(variant);
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
	const variant_info *v = checked_variant(variant, pk_len, sig_len);
	if (v == NULL) {
		return 0;
	}
	int impl = current_impl(); /* read once: the key's form and its use must agree */
	size_t n = (size_t) 1 << v->logn;
	decoded_key h;
	if (cache == NULL) {
		return decode_public_key(v, impl, pk, h) && verify_with_key(v, impl, h, msg, msg_len, sig, sig_len);
	}
	size_t set = falcon_vt_cache_set(cache, variant, pk, pk_len);
	if (falcon_vt_cache_lookup(cache, set, variant, impl, pk, pk_len, h, n)) {
		return verify_with_key(v, impl, h, msg, msg_len, sig, sig_len);
	}
	if (!decode_public_key(v, impl, pk, h)) {
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

/* --- many verifies in one call ------------------------------------------------------ */

/* One signature of a group, between its checks and its norm. */
typedef struct {
	size_t index;
	size_t set;       /* its key's cache set */
	int cached;       /* its key came from the cache (nothing to insert) */
	const uint8_t *pk, *msg, *nonce;
	decoded_key h;
	int16_t s2[MAX_N] __attribute__((aligned(32)));
	uint16_t hm[HASHED_ROOM] __attribute__((aligned(32)));
} staged;

#define GROUP 4 /* the lanes of liboqs's four-lane SHAKE256 */

/* Hash the group's points together, then finish each signature as qfv_verify_cached does. */
static size_t finish_group(qfv_cache *cache, int variant, const variant_info *v, int impl, staged *group, size_t count,
                           size_t msg_len, uint8_t *ok) {
	size_t valid = 0;
	if (count == 1) {
		hash_to_point_vartime(group[0].nonce, group[0].msg, msg_len, group[0].hm, v->logn, impl);
	} else if (count > 1) {
		const uint8_t *nonce[GROUP], *msg[GROUP];
		uint16_t *hm[GROUP];
		for (size_t l = 0; l < count; l++) {
			nonce[l] = group[l].nonce, msg[l] = group[l].msg, hm[l] = group[l].hm;
		}
		hash_to_point_x4(nonce, msg, msg_len, hm, count, v->logn, impl);
	}
	for (size_t l = 0; l < count; l++) {
		staged *g = &group[l];
		int good = short_enough(v, impl, g->hm, g->s2, g->h);
		if (good && cache != NULL && !g->cached) { /* as qfv_verify_cached: only keys that verified */
			falcon_vt_cache_insert(cache, g->set, variant, impl, g->pk, v->pk_bytes, g->h, (size_t) 1 << v->logn);
		}
		ok[g->index] = (uint8_t) good;
		valid += (size_t) good;
	}
	return valid;
}

size_t qfv_verify_items(qfv_cache *cache, int variant, const qfv_item *items, size_t count,
                        int fixed_signature_length, uint8_t *ok) {
	staged group[GROUP];
	size_t staged_count = 0, group_msg_len = 0, valid = 0;
	int impl = current_impl(); /* read once: the keys' form and their use must agree */
	for (size_t i = 0; i < count; i++) {
		ok[i] = 0;
	}
	for (size_t i = 0; i < count; i++) {
		const qfv_item *it = &items[i];
		const variant_info *v = checked_variant(variant, it->public_key_length, it->signature_length);
		if (v == NULL || it->signature_length == 0 ||
		        (fixed_signature_length && it->signature_length != v->max_sig_bytes)) {
			continue;
		}
		/* Four lanes absorb equal lengths: a message of another length starts a new group. */
		if (staged_count > 0 && it->message_length != group_msg_len) {
			valid += finish_group(cache, variant, v, impl, group, staged_count, group_msg_len, ok);
			staged_count = 0;
		}
		staged *g = &group[staged_count];
		size_t n = (size_t) 1 << v->logn;
		/* The key first, then the signature: qfv_verify_cached's order (and its cache counts). */
		g->cached = 0;
		if (cache != NULL) {
			g->set = falcon_vt_cache_set(cache, variant, it->public_key, it->public_key_length);
			g->cached = falcon_vt_cache_lookup(cache, g->set, variant, impl, it->public_key, it->public_key_length,
			                                   g->h, n);
		}
		if ((!g->cached && !decode_public_key(v, impl, it->public_key, g->h)) ||
		        !decode_signature(v, impl, it->signature, it->signature_length, g->s2, &g->nonce)) {
			continue;
		}
		g->index = i, g->pk = it->public_key, g->msg = it->message;
		group_msg_len = it->message_length;
		if (++staged_count == GROUP) {
			valid += finish_group(cache, variant, v, impl, group, staged_count, group_msg_len, ok);
			staged_count = 0;
		}
	}
	if (staged_count > 0) {
		valid += finish_group(cache, variant, variant_of(variant), impl, group, staged_count, group_msg_len, ok);
	}
	return valid;
}

static uint64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* Items per qfv_verify_items call of qfv_verify_batch: a multiple of the group, small
 * enough for the stack, large enough that the call's overhead is nothing. */
#define CHUNK 64

size_t qfv_verify_batch(qfv_cache *cache, int variant, size_t count, const uint8_t *blob, uint64_t blob_len,
                        const uint64_t *lengths, int fixed_signature_length, uint8_t *ok, uint64_t *elapsed_ns) {
	size_t valid = 0, reached = 0;
	uint64_t offset = 0;
	qfv_item chunk[CHUNK];
	for (size_t i = 0; i < count; i++) {
		ok[i] = 0;
		if (elapsed_ns) {
			elapsed_ns[i] = 0;
		}
	}
	while (reached < count) {
		size_t in_chunk = 0, first = reached;
		for (; in_chunk < CHUNK && reached < count; in_chunk++, reached++) {
			uint64_t pk_len = lengths[3 * reached], msg_len = lengths[3 * reached + 1], sig_len = lengths[3 * reached + 2];
			/* Never read past the blob, whatever lengths we are handed (overflow-safe): this
			 * item and every later one stay invalid. */
			if (pk_len > blob_len - offset || msg_len > blob_len - offset - pk_len ||
			        sig_len > blob_len - offset - pk_len - msg_len) {
				count = reached;
				break;
			}
			const uint8_t *pk = blob + offset;
			chunk[in_chunk] = (qfv_item){pk, (size_t) pk_len, pk + pk_len, (size_t) msg_len, pk + pk_len + msg_len,
			                             (size_t) sig_len};
			offset += pk_len + msg_len + sig_len;
		}
		uint64_t started = elapsed_ns ? now_ns() : 0;
		valid += qfv_verify_items(cache, variant, chunk, in_chunk, fixed_signature_length, ok + first);
		/* Four signatures share each hash: a verify's own time is the chunk's, shared out. */
		uint64_t share = elapsed_ns && in_chunk ? (now_ns() - started) / in_chunk : 0;
		for (size_t i = 0; elapsed_ns && i < in_chunk; i++) {
			elapsed_ns[first + i] = share;
		}
	}
	return valid;
}

/* --- the admission kernel's hooks (qmemo_admit.h) ------------------------------------- */

typedef struct {
	qfv_cache *cache;
	int variant;
} admit_context;

void *qfv_admit_context_new(qfv_cache *cache, int variant) {
	admit_context *context = variant_of(variant) ? malloc(sizeof *context) : NULL;
	if (context != NULL) {
		*context = (admit_context){cache, variant};
	}
	return context;
}

void qfv_admit_context_free(void *context) {
	free(context);
}

int qfv_admit_verify(void *context, const uint8_t *pk, size_t pk_len, const uint8_t *msg, size_t msg_len,
                     const uint8_t *sig, size_t sig_len) {
	const admit_context *c = context;
	return c != NULL && qfv_verify_cached(c->cache, c->variant, pk, pk_len, msg, msg_len, sig, sig_len);
}

void qfv_admit_verify_many(void *context, const qfv_item *items, size_t count, uint8_t *ok) {
	const admit_context *c = context;
	if (c == NULL) {
		memset(ok, 0, count);
		return;
	}
	qfv_verify_items(c->cache, c->variant, items, count, 0, ok); /* the kernel applied the length rule */
}
