/*
 * mldsa_vt_cache.c - the bounded cache of expanded ML-DSA public keys (mldsa_vt.h).
 *
 * One cache per parameter set. An expanded key is 22 KiB (ML-DSA-44) to 67 KiB
 * (ML-DSA-87): too much to copy out under a lock per verify, as the Falcon cache does
 * with its 1-2 KiB. So entries are reference-counted: a lookup takes a reference under
 * the mutex, the verify reads the key unlocked, and the last release frees it, whether
 * the cache still holds it or evicted it meanwhile.
 *
 * Keyed by the FULL public-key bytes: the hash only picks the set and a fingerprint to
 * skip most comparisons; a lookup compares every byte. The hash is seeded at random per
 * cache, so a sender cannot grind keys into one set to evict another sender's (a
 * collision, chosen or not, only ever costs a miss).
 */
#define _DEFAULT_SOURCE /* getrandom; posix_memalign */
#include "mldsa_vt_cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define WAYS 8 /* a set of 8: a full cache keeps most keys even when a few sets crowd */

struct mldsa_vt_key {
	int refs; /* __atomic */
	int form; /* which implementation's expansion `expanded` is */
	size_t pk_len;
	uint8_t *pk;    /* in the same allocation, after `expanded` */
	void *expanded; /* 32-byte aligned: the start of the allocation's second cache line */
};

typedef struct {
	uint64_t last_used; /* cache tick of the last hit or insert; 0 = empty */
	uint64_t hash;
	mldsa_vt_key *key;
} way;

struct qmv_cache {
	pthread_mutex_t lock; /* held only to find, count and swap pointers: never while verifying */
	int variant;
	size_t sets;
	way *ways; /* sets * WAYS */
	uint64_t seed, tick, hits, misses;
	size_t size;
};

/* --- keys ------------------------------------------------------------------------------- */

#define HEADER_BYTES 64 /* the struct, rounded to a cache line: `expanded` stays 64-byte aligned */
_Static_assert(sizeof(struct mldsa_vt_key) <= HEADER_BYTES, "key header");

mldsa_vt_key *mldsa_vt_key_new(const uint8_t *pk, size_t pk_len, size_t expanded_bytes, int form) {
	void *block = NULL;
	if (posix_memalign(&block, 64, HEADER_BYTES + expanded_bytes + pk_len) != 0) {
		return NULL;
	}
	mldsa_vt_key *key = block;
	key->refs = 1;
	key->form = form;
	key->pk_len = pk_len;
	key->expanded = (uint8_t *) block + HEADER_BYTES;
	key->pk = (uint8_t *) key->expanded + expanded_bytes;
	memcpy(key->pk, pk, pk_len);
	return key;
}

void *mldsa_vt_key_expanded(mldsa_vt_key *key) {
	return key->expanded;
}

static void key_retain(mldsa_vt_key *key) {
	__atomic_add_fetch(&key->refs, 1, __ATOMIC_RELAXED);
}

void mldsa_vt_key_release(mldsa_vt_key *key) {
	if (key != NULL && __atomic_sub_fetch(&key->refs, 1, __ATOMIC_ACQ_REL) == 0) {
		free(key);
	}
}

static int key_is(const mldsa_vt_key *key, int form, const uint8_t *pk, size_t pk_len) {
	return key->form == form && key->pk_len == pk_len && memcmp(key->pk, pk, pk_len) == 0;
}

/* --- the cache ---------------------------------------------------------------------------- */

qmv_cache *qmv_cache_new(int variant, size_t capacity) {
	if (qmv_variant_name(variant) == NULL) {
		return NULL;
	}
	qmv_cache *cache = calloc(1, sizeof *cache);
	if (cache == NULL) {
		return NULL;
	}
	cache->variant = variant;
	cache->sets = capacity < WAYS ? 1 : (capacity + WAYS - 1) / WAYS;
	cache->ways = calloc(cache->sets * WAYS, sizeof *cache->ways);
	if (cache->ways == NULL || pthread_mutex_init(&cache->lock, NULL) != 0) {
		free(cache->ways);
		free(cache);
		return NULL;
	}
	if (getrandom(&cache->seed, sizeof cache->seed, 0) != (ssize_t) sizeof cache->seed) {
		/* No kernel randomness: still a seed that differs per process and per cache. */
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		cache->seed = (uint64_t) ts.tv_nsec ^ ((uint64_t) ts.tv_sec << 32) ^ (uint64_t) (uintptr_t) cache;
	}
	return cache;
}

void qmv_cache_free(qmv_cache *cache) {
	if (cache == NULL) {
		return;
	}
	for (size_t i = 0; i < cache->sets * WAYS; i++) {
		mldsa_vt_key_release(cache->ways[i].key);
	}
	pthread_mutex_destroy(&cache->lock);
	free(cache->ways);
	free(cache);
}

int qmv_cache_variant(const qmv_cache *cache) {
	return cache != NULL ? cache->variant : -1;
}

void qmv_cache_stats(qmv_cache *cache, uint64_t *hits, uint64_t *misses, size_t *size, size_t *capacity) {
	uint64_t h = 0, m = 0;
	size_t s = 0, c = 0;
	if (cache != NULL) {
		pthread_mutex_lock(&cache->lock);
		h = cache->hits, m = cache->misses, s = cache->size, c = cache->sets * WAYS;
		pthread_mutex_unlock(&cache->lock);
	}
	if (hits) *hits = h;
	if (misses) *misses = m;
	if (size) *size = s;
	if (capacity) *capacity = c;
}

/* Four independent multiply chains over 8-byte lanes of each 32 bytes (they overlap in
 * the pipeline), started from the cache's random seed; the key's 1-3 KiB cost ~300 cycles. */
uint64_t mldsa_vt_cache_hash(const qmv_cache *cache, const uint8_t *pk, size_t pk_len) {
	const uint64_t mul = 0xFF51AFD7ED558CCDu; /* MurmurHash3's fmix64 multiplier */
	uint64_t x[4] = {cache->seed, cache->seed ^ 0x9E3779B97F4A7C15u, ~cache->seed, cache->seed + pk_len};
	size_t i = 0;
	for (; i + 32 <= pk_len; i += 32) {
		for (int k = 0; k < 4; k++) {
			uint64_t w;
			memcpy(&w, pk + i + 8 * k, 8);
			x[k] = (x[k] ^ w) * mul;
			x[k] ^= x[k] >> 29;
		}
	}
	uint64_t h = x[0];
	for (int k = 1; k < 4; k++) {
		h = (h ^ x[k]) * mul;
		h ^= h >> 32;
	}
	for (; i < pk_len; i++) { /* the last < 32 bytes */
		h = (h ^ pk[i]) * mul;
		h ^= h >> 32;
	}
	return h;
}

static way *set_of(qmv_cache *cache, uint64_t hash) {
	return &cache->ways[(hash % cache->sets) * WAYS];
}

static way *find_locked(qmv_cache *cache, uint64_t hash, int form, const uint8_t *pk, size_t pk_len) {
	way *set = set_of(cache, hash);
	for (int i = 0; i < WAYS; i++) {
		if (set[i].key != NULL && set[i].hash == hash && key_is(set[i].key, form, pk, pk_len)) {
			return &set[i];
		}
	}
	return NULL;
}

mldsa_vt_key *mldsa_vt_cache_lookup(qmv_cache *cache, uint64_t hash, int form, const uint8_t *pk, size_t pk_len) {
	mldsa_vt_key *key = NULL;
	pthread_mutex_lock(&cache->lock);
	way *w = find_locked(cache, hash, form, pk, pk_len);
	if (w != NULL) {
		key = w->key;
		key_retain(key);
		w->last_used = ++cache->tick;
		cache->hits++;
	} else {
		cache->misses++;
	}
	pthread_mutex_unlock(&cache->lock);
	return key;
}

void mldsa_vt_cache_insert(qmv_cache *cache, uint64_t hash, mldsa_vt_key *key) {
	mldsa_vt_key *evicted = NULL;
	pthread_mutex_lock(&cache->lock);
	if (find_locked(cache, hash, key->form, key->pk, key->pk_len) == NULL) { /* another thread may have added it */
		way *set = set_of(cache, hash), *victim = &set[0];
		for (int i = 1; i < WAYS; i++) {
			if (set[i].last_used < victim->last_used) {
				victim = &set[i]; /* an empty way (0) first, else the least recently used */
			}
		}
		cache->size += victim->key == NULL;
		evicted = victim->key;
		key_retain(key);
		*victim = (way){++cache->tick, hash, key};
	}
	pthread_mutex_unlock(&cache->lock);
	mldsa_vt_key_release(evicted); /* outside the lock: freeing 22-67 KiB is not free */
}
