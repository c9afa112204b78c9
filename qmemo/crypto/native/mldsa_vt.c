/*
 * mldsa_vt.c - ML-DSA verification with expanded public keys kept per sender
 * (mldsa_vt.h): parameter sets, the run-time choice of code, the cache, batches.
 *
 * The arithmetic lives in mldsa_vt_core.c (one compiled copy per parameter set and
 * implementation, each over liboqs 0.13's own pq-crystals code); this file only picks
 * the copy, applies the caller-side length rule and routes keys through the cache.
 *
 * Never: return an expansion for any key but the one whose bytes were compared in full,
 * or keep a key that has not just verified a valid signature.
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c11 */
#include "mldsa_vt.h"
#include "mldsa_vt_cache.h"
#include "mldsa_vt_core.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <oqs/common.h>

enum { IMPL_REF = 0, IMPL_AVX2 = 1 };

typedef struct {
	const char *name; /* liboqs's algorithm name */
	const mldsa_vt_core *cores[2];
} variant_info;

#ifdef QMV_HAVE_AVX2
#define AVX2_CORE(mode) (&mldsa_vt_core_##mode##_avx2)
#else
#define AVX2_CORE(mode) NULL
#endif

static const variant_info VARIANTS[QMV_VARIANT_COUNT] = {
	[QMV_ML_DSA_44] = {"ML-DSA-44", {&mldsa_vt_core_44_ref, AVX2_CORE(44)}},
	[QMV_ML_DSA_65] = {"ML-DSA-65", {&mldsa_vt_core_65_ref, AVX2_CORE(65)}},
	[QMV_ML_DSA_87] = {"ML-DSA-87", {&mldsa_vt_core_87_ref, AVX2_CORE(87)}},
};

static const variant_info *variant_of(int variant) {
	return variant >= 0 && variant < QMV_VARIANT_COUNT ? &VARIANTS[variant] : NULL;
}

int qmv_variant(const char *liboqs_name) {
	for (int i = 0; liboqs_name != NULL && i < QMV_VARIANT_COUNT; i++) {
		if (strcmp(VARIANTS[i].name, liboqs_name) == 0) {
			return i;
		}
	}
	return -1;
}

const char *qmv_variant_name(int variant) {
	const variant_info *v = variant_of(variant);
	return v ? v->name : NULL;
}

size_t qmv_public_key_bytes(int variant) {
	const variant_info *v = variant_of(variant);
	return v ? v->cores[IMPL_REF]->public_key_bytes : 0;
}

size_t qmv_signature_bytes(int variant) {
	const variant_info *v = variant_of(variant);
	return v ? v->cores[IMPL_REF]->signature_bytes : 0;
}

/* --- run-time choice of implementation ------------------------------------------------ */

static int selected_impl = IMPL_REF;
static pthread_once_t impl_once = PTHREAD_ONCE_INIT;

static int avx2_available(void) {
#ifdef QMV_HAVE_AVX2
	/* liboqs's own test for its AVX2 ML-DSA (sig_ml_dsa_*.c), so we pick what it picks. */
	return OQS_CPU_has_extension(OQS_CPU_EXT_AVX2) && OQS_CPU_has_extension(OQS_CPU_EXT_POPCNT);
#else
	return 0;
#endif
}

static void choose_impl(void) {
	const char *forced = getenv("QMEMO_MLDSA_IMPL");
	int impl = avx2_available() ? IMPL_AVX2 : IMPL_REF;
	if (forced != NULL && strcmp(forced, "ref") == 0) {
		impl = IMPL_REF;
	}
	__atomic_store_n(&selected_impl, impl, __ATOMIC_RELEASE);
}

static int current_impl(void) {
	pthread_once(&impl_once, choose_impl);
	return __atomic_load_n(&selected_impl, __ATOMIC_ACQUIRE);
}

const char *qmv_implementation(void) {
	return current_impl() == IMPL_AVX2 ? "avx2" : "ref";
}

int qmv_select_implementation(const char *name) {
	pthread_once(&impl_once, choose_impl);
	int impl;
	if (name != NULL && strcmp(name, "ref") == 0) {
		impl = IMPL_REF;
	} else if (name != NULL && strcmp(name, "avx2") == 0 && avx2_available()) {
		impl = IMPL_AVX2;
	} else {
		return -1;
	}
	__atomic_store_n(&selected_impl, impl, __ATOMIC_RELEASE);
	return 0;
}

size_t qmv_entry_bytes(int variant) {
	const variant_info *v = variant_of(variant);
	if (v == NULL) {
		return 0;
	}
	size_t largest = v->cores[IMPL_REF]->expanded_bytes;
	if (v->cores[IMPL_AVX2] != NULL && v->cores[IMPL_AVX2]->expanded_bytes > largest) {
		largest = v->cores[IMPL_AVX2]->expanded_bytes;
	}
	return 64 + largest + v->cores[IMPL_REF]->public_key_bytes; /* mldsa_vt_cache.c's header, the expansion, the key */
}

/* --- one verify --------------------------------------------------------------------------- */

int qmv_verify(int variant, const uint8_t *pk, size_t pk_len, const uint8_t *msg, size_t msg_len,
               const uint8_t *sig, size_t sig_len) {
	return qmv_verify_cached(NULL, variant, pk, pk_len, msg, msg_len, sig, sig_len);
}

int qmv_verify_cached(qmv_cache *cache, int variant, const uint8_t *pk, size_t pk_len, const uint8_t *msg,
                      size_t msg_len, const uint8_t *sig, size_t sig_len) {
	const variant_info *v = variant_of(variant);
	int impl = current_impl(); /* read once: the key's form and its use must agree */
	const mldsa_vt_core *core = v ? v->cores[impl] : NULL;
	/* The caller's rule (liboqs reads exactly the key's length) and liboqs's own (one length). */
	if (core == NULL || pk == NULL || sig == NULL || (msg == NULL && msg_len > 0) ||
	        pk_len != core->public_key_bytes || sig_len != core->signature_bytes) {
		return 0;
	}
	if (qmv_cache_variant(cache) != variant) {
		cache = NULL;
	}
	uint64_t hash = 0;
	mldsa_vt_key *key = NULL;
	if (cache != NULL) {
		hash = mldsa_vt_cache_hash(cache, pk, pk_len);
		key = mldsa_vt_cache_lookup(cache, hash, impl, pk, pk_len);
		if (key != NULL) {
			int valid = core->verify(mldsa_vt_key_expanded(key), msg, msg_len, sig);
			mldsa_vt_key_release(key);
			return valid;
		}
	}
	key = mldsa_vt_key_new(pk, pk_len, core->expanded_bytes, impl);
	if (key == NULL) {
		return 0; /* out of memory: not a verdict on the signature, but never an acceptance */
	}
	core->expand(mldsa_vt_key_expanded(key), pk);
	int valid = core->verify(mldsa_vt_key_expanded(key), msg, msg_len, sig);
	/* Only keys that just verified a signature are kept: a flood of made-up keys with
	 * junk signatures costs its sender an expansion each, and evicts nobody. */
	if (valid && cache != NULL) {
		mldsa_vt_cache_insert(cache, hash, key);
	}
	mldsa_vt_key_release(key);
	return valid;
}

int qmv_verify_with_cache(void *cache, const uint8_t *pk, size_t pk_len, const uint8_t *msg, size_t msg_len,
                          const uint8_t *sig, size_t sig_len) {
	int variant = qmv_cache_variant(cache);
	return variant >= 0 && qmv_verify_cached(cache, variant, pk, pk_len, msg, msg_len, sig, sig_len);
}

/* --- many verifies in one call ------------------------------------------------------------ */

static uint64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

size_t qmv_verify_batch(qmv_cache *cache, int variant, size_t count, const uint8_t *blob, uint64_t blob_len,
                        const uint64_t *lengths, uint8_t *ok, uint64_t *elapsed_ns) {
	size_t valid = 0;
	uint64_t offset = 0;
	for (size_t i = 0; i < count; i++) {
		ok[i] = 0;
		if (elapsed_ns) {
			elapsed_ns[i] = 0;
		}
	}
	for (size_t i = 0; i < count; i++) {
		uint64_t pk_len = lengths[3 * i], msg_len = lengths[3 * i + 1], sig_len = lengths[3 * i + 2];
		/* Never read past the blob, whatever lengths we are handed (overflow-safe). */
		if (pk_len > blob_len - offset || msg_len > blob_len - offset - pk_len ||
		        sig_len > blob_len - offset - pk_len - msg_len) {
			break;
		}
		const uint8_t *pk = blob + offset, *msg = pk + pk_len, *sig = msg + msg_len;
		offset += pk_len + msg_len + sig_len;
		uint64_t started = elapsed_ns ? now_ns() : 0;
		int good = qmv_verify_cached(cache, variant, pk, (size_t) pk_len, msg, (size_t) msg_len, sig, (size_t) sig_len);
		if (elapsed_ns) {
			elapsed_ns[i] = now_ns() - started;
		}
		ok[i] = (uint8_t) good;
		valid += (size_t) good;
	}
	return valid;
}
