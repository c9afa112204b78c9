/*
 * falcon_vt_cache.h - falcon_vt.c's view of the key cache (falcon_vt_cache.c). Internal:
 * the library exports only the qfv_* API of falcon_vt.h.
 */
#ifndef QMEMO_FALCON_VT_CACHE_H
#define QMEMO_FALCON_VT_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "falcon_vt.h"

#define FALCON_VT_MAX_N 1024        /* coefficients of a Falcon-1024 polynomial */
#define FALCON_VT_MAX_PK_BYTES 1793 /* Falcon-1024's public key (checked against PQClean's api.h) */

/* The set a key belongs to (cache must not be NULL). */
size_t falcon_vt_cache_set(const qfv_cache *cache, int variant, const uint8_t *pk, size_t pk_len);

/* Copy the key's decoded form (n coefficients) into h and count a hit: 1; else count a miss: 0.
 * `form` names the implementation whose form h is in (falcon_vt.c): entries of another
 * form never match, so an implementation never reads the other's. */
int falcon_vt_cache_lookup(qfv_cache *cache, size_t set, int variant, int form, const uint8_t *pk, size_t pk_len,
                           uint16_t *h, size_t n);

/* Keep a key's decoded form (unless another thread just did), evicting the set's least recently used. */
void falcon_vt_cache_insert(qfv_cache *cache, size_t set, int variant, int form, const uint8_t *pk, size_t pk_len,
                            const uint16_t *h, size_t n);

#endif
