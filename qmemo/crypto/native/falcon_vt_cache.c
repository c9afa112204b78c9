/*
 * falcon_vt_cache.c - the bounded cache of decoded Falcon public keys (falcon_vt.h).
 *
 * Keyed by the variant and the FULL public-key bytes: the set index only spreads keys,
 * a lookup compares every byte, so it can never hand out another key's decoded form.
 * 4-way set associative, least recently used way replaced. One mutex per set, held only
 * to compare and to copy the 1-2 KiB decoded form in or out: verifying runs unlocked,
 * and two threads wait for each other only when their keys share a set. A set's lock,
 * its clock and its counters sit on cache lines of their own (aligned to 64 bytes): with one mutex and
 * counters for the whole cache, two verify threads of one process went no faster than
 * one on the AVX2 path (a ~4 µs verify, a few hundred ns of it locked), while two
 * processes went twice as fast (docs/methodology.md, "The lean node").
 */
#include "falcon_vt_cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define WAYS 4 /* a few hot senders that share a set do not evict each other */

typedef struct {
	uint64_t last_used; /* its set's tick at the last hit or insert; 0 = empty */
	int variant;
	int form; /* which implementation's form h is in: a lookup must match it too */
	uint8_t pk[FALCON_VT_MAX_PK_BYTES];
	uint16_t h[FALCON_VT_MAX_N]; /* as decode_public_key leaves it, in that form */
} cache_entry;

typedef struct {
	pthread_mutex_t lock; /* held only to compare and copy, never while verifying */
	uint64_t tick, hits, misses;
	size_t size;
} __attribute__((aligned(64))) cache_set_state; /* 128 bytes: no line shared with another set's */

struct qfv_cache {
	size_t sets;
	cache_set_state *state;   /* sets */
	cache_entry *entries;     /* sets * WAYS */
};

qfv_cache *qfv_cache_new(size_t capacity) {
	qfv_cache *cache = calloc(1, sizeof *cache);
	if (cache == NULL) {
		return NULL;
	}
	cache->sets = capacity < WAYS ? 1 : (capacity + WAYS - 1) / WAYS;
	cache->entries = calloc(cache->sets * WAYS, sizeof *cache->entries);
	cache->state = aligned_alloc(64, cache->sets * sizeof *cache->state);
	size_t ready = 0;
	if (cache->entries != NULL && cache->state != NULL) {
		memset(cache->state, 0, cache->sets * sizeof *cache->state);
		while (ready < cache->sets && pthread_mutex_init(&cache->state[ready].lock, NULL) == 0) {
			ready++;
		}
	}
	if (ready < cache->sets) {
		for (size_t i = 0; i < ready; i++) {
			pthread_mutex_destroy(&cache->state[i].lock);
		}
		free(cache->state);
		free(cache->entries);
		free(cache);
		return NULL;
	}
	return cache;
}

void qfv_cache_free(qfv_cache *cache) {
	if (cache != NULL) {
		for (size_t i = 0; i < cache->sets; i++) {
			pthread_mutex_destroy(&cache->state[i].lock);
		}
		free(cache->state);
		free(cache->entries);
		free(cache);
	}
}

void qfv_cache_stats(qfv_cache *cache, uint64_t *hits, uint64_t *misses, size_t *size, size_t *capacity) {
	uint64_t h = 0, m = 0;
	size_t s = 0, c = 0;
	if (cache != NULL) {
		for (size_t i = 0; i < cache->sets; i++) {
			cache_set_state *set = &cache->state[i];
			pthread_mutex_lock(&set->lock);
			h += set->hits, m += set->misses, s += set->size;
			pthread_mutex_unlock(&set->lock);
		}
		c = cache->sets * WAYS;
	}
	if (hits) *hits = h;
	if (misses) *misses = m;
	if (size) *size = s;
	if (capacity) *capacity = c;
}

/* Which set a key lives in. Only spreads keys: a lookup still compares the whole key.
 * Four independent multiply chains (one per 8-byte lane of each 32 bytes): one chain
 * over a 1-2 KiB key was a serial ~450 cycles per verify; four overlap. */
size_t falcon_vt_cache_set(const qfv_cache *cache, int variant, const uint8_t *pk, size_t pk_len) {
	uint64_t x[4] = {0x9E3779B97F4A7C15u ^ (uint64_t) variant, 1, 2, 3}; /* 2^64 / golden ratio: odd, well mixed */
	size_t i = 0;
	for (; i + 32 <= pk_len; i += 32) {
		for (int k = 0; k < 4; k++) {
			uint64_t w;
			memcpy(&w, pk + i + 8 * k, 8);
			x[k] = (x[k] ^ w) * 0xFF51AFD7ED558CCDu; /* MurmurHash3's fmix64 multiplier */
			x[k] ^= x[k] >> 32;
		}
	}
	uint64_t h = x[0];
	for (int k = 1; k < 4; k++) {
		h = (h ^ x[k]) * 0xFF51AFD7ED558CCDu;
		h ^= h >> 32;
	}
	for (; i < pk_len; i++) { /* the last < 32 bytes */
		h = (h ^ pk[i]) * 0xFF51AFD7ED558CCDu;
		h ^= h >> 32;
	}
	return (size_t) (h % cache->sets);
}

static cache_entry *find_locked(qfv_cache *cache, size_t set, int variant, int form, const uint8_t *pk,
                                size_t pk_len) {
	cache_entry *way = &cache->entries[set * WAYS];
	for (int i = 0; i < WAYS; i++) {
		if (way[i].last_used != 0 && way[i].variant == variant && way[i].form == form &&
		        memcmp(way[i].pk, pk, pk_len) == 0) {
			return &way[i];
		}
	}
	return NULL;
}

/* Copy the key's decoded form into h; 1 if it was cached. */
int falcon_vt_cache_lookup(qfv_cache *cache, size_t set, int variant, int form, const uint8_t *pk, size_t pk_len,
                           uint16_t *h, size_t n) {
	cache_set_state *state = &cache->state[set];
	pthread_mutex_lock(&state->lock);
	cache_entry *e = find_locked(cache, set, variant, form, pk, pk_len);
	if (e != NULL) {
		memcpy(h, e->h, n * sizeof *h);
		e->last_used = ++state->tick;
		state->hits++;
	} else {
		state->misses++;
	}
	pthread_mutex_unlock(&state->lock);
	return e != NULL;
}

void falcon_vt_cache_insert(qfv_cache *cache, size_t set, int variant, int form, const uint8_t *pk, size_t pk_len,
                            const uint16_t *h, size_t n) {
	cache_set_state *state = &cache->state[set];
	pthread_mutex_lock(&state->lock);
	if (find_locked(cache, set, variant, form, pk, pk_len) == NULL) { /* another thread may have added it */
		cache_entry *way = &cache->entries[set * WAYS], *victim = &way[0];
		for (int i = 1; i < WAYS; i++) {
			if (way[i].last_used < victim->last_used) {
				victim = &way[i]; /* an empty way (0) first, else the least recently used */
			}
		}
		state->size += victim->last_used == 0;
		victim->variant = variant;
		victim->form = form;
		memcpy(victim->pk, pk, pk_len);
		memcpy(victim->h, h, n * sizeof *h);
		victim->last_used = ++state->tick;
	}
	pthread_mutex_unlock(&state->lock);
}
