/*
 * mldsa_vt.h - an ML-DSA (FIPS 204) verifier for PUBLIC messages that keeps each
 * sender's expanded public key, built from liboqs 0.13's own ML-DSA sources.
 *
 * Why it exists: liboqs verifies ML-DSA by re-deriving everything the public key
 * implies on every call - the matrix A expanded from rho with SHAKE128 (16 to 56
 * polynomials), tr = H(pk) over the whole key, and t1 * 2^d in NTT form - which is
 * most of a verify. A chain's senders' keys recur, so this library does that work
 * once per key and keeps the result in a bounded cache: A-hat (NTT form), tr and
 * NTT(t1 * 2^d). The rest of the verify is liboqs's own code (pq-crystals' ML-DSA, ref
 * and AVX2, compiled by scripts/setup.sh from the oqs-sys crate, never copied into the
 * repo), called in liboqs's order.
 *
 * What "the same verdict" means (the rule the differential tests check): for any input,
 * qmv_verify returns 1 exactly when a caller that checks the public key's length and
 * then calls liboqs 0.13's portable ML-DSA verify with an empty context string (what
 * OQS_SIG_verify passes) would accept:
 *     pk_len == the parameter set's public-key length
 *  && pqcrystals_ml_dsa_*_ref_verify(sig, sig_len, msg, msg_len, "", 0, pk) == 0.
 * That is FIPS 204's ML-DSA.Verify, on every CPU. liboqs 0.13's AVX2 verify, which
 * OQS_SIG_verify runs on a CPU with AVX2, differs from it in two known ways
 * (pq-crystals/dilithium fixed both upstream in 2026: commits d35ba3f and bba9534):
 * it never checks ||z||_inf < gamma1 - beta (FIPS 204, Algorithm 8, line 13), and its
 * use_hint treats r0 == 0 as positive. So on such a CPU OQS_SIG_verify accepts some
 * signatures FIPS 204 rejects (and the portable code, on a CPU without AVX2, rejects):
 * no honest signer makes them, but anyone can. This verifier answers the same on
 * every CPU: its AVX2 path has the norm check and the FIPS use_hint (see
 * docs/methodology.md and tests/native/mldsa_diff.c, which checks both differences
 * case by case).
 *
 * Thread safety: every function may be called from any number of threads at once. A
 * cache holds one mutex, taken only to look a key up or insert it; an expanded key is
 * reference-counted, so a verify reads it unlocked and an eviction never frees it
 * under a verify.
 */
#ifndef QMEMO_MLDSA_VT_H
#define QMEMO_MLDSA_VT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Parameter sets (qmv_variant maps liboqs's names to these). */
enum { QMV_ML_DSA_44 = 0, QMV_ML_DSA_65 = 1, QMV_ML_DSA_87 = 2, QMV_VARIANT_COUNT = 3 };

/* The id of a liboqs algorithm name ("ML-DSA-44", ...), or -1. */
int qmv_variant(const char *liboqs_name);

/* The parameter set's liboqs name, public-key and signature lengths (0/NULL for a bad id). */
const char *qmv_variant_name(int variant);
size_t qmv_public_key_bytes(int variant);
size_t qmv_signature_bytes(int variant);

/* Bytes of one expanded key (A-hat, tr, NTT(t1 * 2^d)) as the cache holds it, plus the
 * key's own bytes: what one cache entry costs. 0 for a bad id. */
size_t qmv_entry_bytes(int variant);

/*
 * Which code runs: "avx2" where the CPU has AVX2 and POPCNT (liboqs's own test for its
 * AVX2 ML-DSA), "ref" otherwise. QMEMO_MLDSA_IMPL=ref|avx2, read on first use, overrides
 * the choice (avx2 only where the CPU has it).
 */
const char *qmv_implementation(void);

/* Switch implementation for the whole process ("ref" or "avx2"): 0, or -1 if unknown or
 * not available on this CPU. For tests and benchmarks that compare both. */
int qmv_select_implementation(const char *name);

/* 1 for a valid signature, 0 otherwise (including a bad variant id). No cache. */
int qmv_verify(int variant, const uint8_t *pk, size_t pk_len, const uint8_t *msg, size_t msg_len,
               const uint8_t *sig, size_t sig_len);

/*
 * A bounded cache of expanded public keys for ONE parameter set, keyed by the FULL
 * public-key bytes: a lookup compares the whole key, so it can never return another
 * key's expansion. 8-way set associative, least recently used way replaced, the set
 * chosen by a hash seeded at random per cache (so nobody can aim keys at one set);
 * `capacity` is rounded up to a multiple of 8 (minimum 8). Entries are allocated as keys
 * arrive: qmv_entry_bytes(variant) each. A key is kept only after it verified a valid
 * signature, so junk keys sent with junk signatures never evict a real sender's.
 */
typedef struct qmv_cache qmv_cache;

qmv_cache *qmv_cache_new(int variant, size_t capacity); /* NULL if out of memory or a bad id */
void qmv_cache_free(qmv_cache *cache);                  /* NULL is fine */
int qmv_cache_variant(const qmv_cache *cache);          /* -1 for NULL */

/* qmv_verify through the cache; a NULL cache, or one of another parameter set, means no
 * cache. Same verdicts. */
int qmv_verify_cached(qmv_cache *cache, int variant, const uint8_t *pk, size_t pk_len,
                      const uint8_t *msg, size_t msg_len, const uint8_t *sig, size_t sig_len);

/* Lookups that found their key, lookups that did not, keys held now, capacity. Any pointer may be NULL. */
void qmv_cache_stats(qmv_cache *cache, uint64_t *hits, uint64_t *misses, size_t *size, size_t *capacity);

/*
 * The admission kernel's hook (qmemo_admit.h's qmemo_admit_verify_fn): verify through
 * `cache` (a qmv_cache *), in its parameter set. 0 for a NULL cache.
 */
int qmv_verify_with_cache(void *cache, const uint8_t *pk, size_t pk_len, const uint8_t *msg, size_t msg_len,
                          const uint8_t *sig, size_t sig_len);

/*
 * Verify `count` items in one call, with the layout of qfv_verify_batch (falcon_vt.h) and
 * qmemo_batch.c: `blob` holds each item's public key, message and signature back to
 * back, `lengths` the three lengths per item; an item whose lengths would run past
 * `blob_len` is invalid, as is every later one. `cache` may be NULL. ok[i] gets 1/0;
 * elapsed_ns, when not NULL, each verify's duration (CLOCK_MONOTONIC). Returns the number
 * of valid items.
 */
size_t qmv_verify_batch(qmv_cache *cache, int variant, size_t count, const uint8_t *blob, uint64_t blob_len,
                        const uint64_t *lengths, uint8_t *ok, uint64_t *elapsed_ns);

#ifdef __cplusplus
}
#endif

#endif
