/*
 * mldsa_vt_cache.h - mldsa_vt.c's view of the expanded-key cache (mldsa_vt_cache.c).
 * Internal: the library exports only the qmv_* API of mldsa_vt.h.
 */
#ifndef QMEMO_MLDSA_VT_CACHE_H
#define QMEMO_MLDSA_VT_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "mldsa_vt.h"

/* One expanded key and the public key it came from, reference-counted: the cache holds
 * one reference while it keeps the key, each verify in flight one more. */
typedef struct mldsa_vt_key mldsa_vt_key;

/* A key with room for an expansion of `expanded_bytes` (32-byte aligned) made by
 * implementation `form`, holding one reference; NULL if out of memory. */
mldsa_vt_key *mldsa_vt_key_new(const uint8_t *pk, size_t pk_len, size_t expanded_bytes, int form);
void *mldsa_vt_key_expanded(mldsa_vt_key *key);
void mldsa_vt_key_release(mldsa_vt_key *key); /* drops one reference; frees at the last */

/* The set a key belongs to, and its fingerprint (both from one seeded hash of the key). */
uint64_t mldsa_vt_cache_hash(const qmv_cache *cache, const uint8_t *pk, size_t pk_len);

/* The cached key with these bytes and form, with a reference for the caller (who
 * releases it), counted as a hit; or NULL, counted as a miss. */
mldsa_vt_key *mldsa_vt_cache_lookup(qmv_cache *cache, uint64_t hash, int form, const uint8_t *pk, size_t pk_len);

/* Keep `key` (the cache takes a reference of its own) unless an equal one is held,
 * evicting the set's least recently used. */
void mldsa_vt_cache_insert(qmv_cache *cache, uint64_t hash, mldsa_vt_key *key);

#endif
