/*
 * falcon_vt.h - a Falcon verifier for PUBLIC messages, verdict for verdict the same as
 * liboqs 0.13's OQS_SIG_verify.
 *
 * Why it exists: liboqs verifies Falcon through PQClean's do_verify, which hashes the
 * message to a point in constant time (hash_to_point_ct, ~63% of a Falcon-512 verify)
 * and re-derives the public key's NTT form on every call (~10%). A chain's messages
 * are public and its senders' keys recur, so neither cost buys anything there. This
 * library composes the same PQClean functions (compiled by scripts/setup.sh from
 * liboqs 0.13's own sources, never copied into the repo) with hash_to_point_vartime,
 * which computes the same function, and keeps decoded keys in a bounded cache.
 *
 * What "the same verdict" means (the rule the differential tests check): for any
 * input, qfv_verify returns 1 exactly when a caller that checks lengths and then asks
 * OQS_SIG_verify would accept, i.e.
 *     pk_len == the variant's public-key length
 *  && sig_len <= the variant's maximum signature length
 *  && OQS_SIG_verify(...) == OQS_SUCCESS.
 * liboqs itself trusts the caller for the public key's length (it reads exactly that
 * many bytes), so that check is the caller's, and ours. For the unpadded variants the
 * maximum-length check never changes a verdict (a compressed s2 longer than that has
 * a squared norm above the bound: each coefficient costs 9 + |x|/128 bits). For the
 * padded variants it does: it rejects an unpadded-encoded signature longer than the
 * padded length, which liboqs's raw call would accept. Note what liboqs 0.13
 * accepts and so do we: an unpadded Falcon verify also accepts the padded encoding
 * (trailing zero bytes up to the padded length), and a padded Falcon verify also
 * accepts the shorter unpadded encoding. A caller that wants exactly one encoding per
 * signature (qMEMO's padded schemes do) adds the exact-length rule itself: see
 * qfv_verify_batch's fixed_signature_length.
 *
 * Thread safety: every function may be called from any number of threads at once. A
 * cache holds one mutex per set, taken only to look up or insert a key of that set (the
 * decoded key is copied out, so verification itself runs unlocked).
 */
#ifndef QMEMO_FALCON_VT_H
#define QMEMO_FALCON_VT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Variant ids (qfv_variant maps liboqs's names to these). */
enum {
	QFV_FALCON_512 = 0,
	QFV_FALCON_1024 = 1,
	QFV_FALCON_PADDED_512 = 2,
	QFV_FALCON_PADDED_1024 = 3,
	QFV_VARIANT_COUNT = 4
};

/* The id of a liboqs algorithm name ("Falcon-512", "Falcon-padded-1024", ...), or -1. */
int qfv_variant(const char *liboqs_name);

/* The variant's liboqs name, public-key length and maximum signature length (0/NULL for a bad id). */
const char *qfv_variant_name(int variant);
size_t qfv_public_key_bytes(int variant);
size_t qfv_max_signature_bytes(int variant);

/*
 * Which PQClean implementation runs: "avx2" where the CPU has AVX2 (the same test as
 * liboqs's run-time dispatch, OQS_CPU_has_extension), "clean" otherwise. The
 * environment variable QMEMO_FALCON_IMPL=clean|avx2, read on first use, overrides the
 * choice (avx2 only where the CPU has it).
 */
const char *qfv_implementation(void);

/* Switch implementation for the whole process ("clean" or "avx2"): 0 on success, -1 if
 * unknown or not available on this CPU. For tests and benchmarks that compare both. */
int qfv_select_implementation(const char *name);

/* Which signature decoder (s2's compressed encoding) the current implementation
 * dispatches to: "bmi2" (the AVX2 implementation on a CPU with BMI2 and LZCNT) or
 * "portable". Lets tests check the decoder that actually runs, without their own CPUID. */
const char *qfv_decoder(void);

/* 1 for a valid signature, 0 otherwise (including a bad variant id). No cache. */
int qfv_verify(int variant, const uint8_t *pk, size_t pk_len, const uint8_t *msg, size_t msg_len,
               const uint8_t *sig, size_t sig_len);

/*
 * A bounded cache of decoded public keys (NTT Montgomery form), keyed by the variant
 * and the FULL public-key bytes: a lookup compares the whole key, so it can never
 * return another key's decoded form. 4-way set associative, least recently used way
 * replaced; `capacity` is rounded up to a multiple of 4 (minimum 4). About 4 KiB per
 * entry. A key is kept only after it verified a valid signature, so junk keys sent
 * with junk signatures never evict a real sender's.
 */
typedef struct qfv_cache qfv_cache;

qfv_cache *qfv_cache_new(size_t capacity); /* NULL if out of memory */
void qfv_cache_free(qfv_cache *cache);     /* NULL is fine */

/* qfv_verify through the cache; a NULL cache means no cache. Same verdicts. */
int qfv_verify_cached(qfv_cache *cache, int variant, const uint8_t *pk, size_t pk_len,
                      const uint8_t *msg, size_t msg_len, const uint8_t *sig, size_t sig_len);

/* Lookups that found their key, lookups that did not, keys held now, capacity. Any pointer may be NULL. */
void qfv_cache_stats(qfv_cache *cache, uint64_t *hits, uint64_t *misses, size_t *size, size_t *capacity);

/* One signature to verify: where its three parts are. The admission kernel's
 * qmemo_admit_item (qmemo_admit.h) has this layout, field for field. */
typedef struct {
	const uint8_t *public_key;
	size_t public_key_length;
	const uint8_t *message;
	size_t message_length;
	const uint8_t *signature;
	size_t signature_length;
} qfv_item;

/*
 * Verify `count` items, four at a time: the signatures that pass their checks are
 * grouped by four (of equal message length) and their points hashed together on
 * liboqs's four-lane SHAKE256 (AVX2 where the CPU has it), then each is finished alone.
 * Verdicts, and the cache's keys and counts, are qfv_verify_cached's for each item in
 * order. With fixed_signature_length, a signature must be exactly the maximum length
 * (qMEMO's rule for padded schemes: one encoding per signature); an empty one is always
 * invalid. `cache` may be NULL. ok[i] gets 1/0. Returns the number of valid items.
 */
size_t qfv_verify_items(qfv_cache *cache, int variant, const qfv_item *items, size_t count,
                        int fixed_signature_length, uint8_t *ok);

/*
 * qfv_verify_items over the layout of qmemo_batch.c's qmemo_verify_batch: `blob` holds
 * each item's public key, message and signature back to back, `lengths` the three
 * lengths per item; an item whose lengths would run past `blob_len` is invalid, as is
 * every later one. ok[i] gets 1/0; elapsed_ns, when not NULL, each verify's share of its
 * chunk's duration (CLOCK_MONOTONIC; four verifies share each hash, so a verify has no
 * time of its own). Returns the number of valid items.
 */
size_t qfv_verify_batch(qfv_cache *cache, int variant, size_t count, const uint8_t *blob, uint64_t blob_len,
                        const uint64_t *lengths, int fixed_signature_length, uint8_t *ok, uint64_t *elapsed_ns);

/*
 * The admission kernel's hooks (qmemo_admit.h: qmemo_admit_verify_fn and
 * qmemo_admit_verify_many_fn), bound to one variant and one cache by a context. The
 * kernel applies the scheme's length rule before calling them. The cache stays the
 * caller's and must outlive the context.
 */
void *qfv_admit_context_new(qfv_cache *cache, int variant); /* NULL for a bad variant or no memory */
void qfv_admit_context_free(void *context);
int qfv_admit_verify(void *context, const uint8_t *pk, size_t pk_len, const uint8_t *msg, size_t msg_len,
                     const uint8_t *sig, size_t sig_len);
void qfv_admit_verify_many(void *context, const qfv_item *items, size_t count, uint8_t *ok);

#ifdef __cplusplus
}
#endif

#endif
