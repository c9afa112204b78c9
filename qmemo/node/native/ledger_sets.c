/*
 * ledger_sets.c - the ledger's two containers: a map from digests to u32 values and an
 * insertion-ordered set of ids (ledger.h says what each promises).
 */
#define _GNU_SOURCE /* getrandom */
#include "ledger.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define DMAP_MIN_SLOTS 64u

static uint64_t load64(const uint8_t *p) {
	uint64_t v;
	memcpy(&v, p, sizeof v);
	return v;
}

static uint64_t hash_of(const dmap *m, const uint8_t *key) {
	/* Digests are uniform to whoever did not grind them; the seed keeps a grinder from
	 * knowing where a key lands, the multiply spreads the bits we use. */
	uint64_t h = (load64(key) ^ m->seed) * 0x9E3779B97F4A7C15ull;
	h ^= load64(key + 8) + (h >> 29);
	return h * 0xBF58476D1CE4E5B9ull;
}

int dmap_init(dmap *m, uint32_t key_bytes, dmap_key_fn key_of, const void *owner) {
	memset(m, 0, sizeof *m);
	m->slots = calloc(DMAP_MIN_SLOTS, sizeof *m->slots);
	if (!m->slots) {
		return -1;
	}
	m->mask = DMAP_MIN_SLOTS - 1;
	m->key_bytes = key_bytes;
	m->key_of = key_of;
	m->owner = owner;
	if (getrandom(&m->seed, sizeof m->seed, 0) != (ssize_t) sizeof m->seed) {
		m->seed = (uint64_t) (uintptr_t) m ^ 0x5851F42D4C957F2Dull;
	}
	return 0;
}

void dmap_free(dmap *m) {
	free(m->slots);
	m->slots = NULL;
}

static int key_equal(const dmap *m, uint32_t value, const uint8_t *key) {
	return memcmp(m->key_of(m->owner, value), key, m->key_bytes) == 0;
}

uint32_t dmap_find(const dmap *m, const uint8_t *key) {
	uint64_t h = hash_of(m, key);
	uint32_t tag = (uint32_t) (h >> 32);
	for (uint32_t i = (uint32_t) h & m->mask;; i = (i + 1) & m->mask) {
		const dmap_slot *slot = &m->slots[i];
		if (!slot->value_plus1) {
			return DMAP_NONE;
		}
		if (slot->tag == tag && key_equal(m, slot->value_plus1 - 1, key)) {
			return slot->value_plus1 - 1;
		}
	}
}

static void place(dmap_slot *slots, uint32_t mask, uint64_t h, uint32_t value) {
	uint32_t i = (uint32_t) h & mask;
	while (slots[i].value_plus1) {
		i = (i + 1) & mask;
	}
	slots[i].value_plus1 = value + 1;
	slots[i].tag = (uint32_t) (h >> 32);
}

static int grow(dmap *m) {
	uint32_t capacity = (m->mask + 1) * 2;
	dmap_slot *slots = calloc(capacity, sizeof *slots);
	if (!slots) {
		return -1;
	}
	for (uint32_t i = 0; i <= m->mask; i++) {
		if (m->slots[i].value_plus1) {
			uint32_t value = m->slots[i].value_plus1 - 1;
			place(slots, capacity - 1, hash_of(m, m->key_of(m->owner, value)), value);
		}
	}
	free(m->slots);
	m->slots = slots;
	m->mask = capacity - 1;
	return 0;
}

int dmap_insert(dmap *m, const uint8_t *key, uint32_t value) {
	if ((uint64_t) (m->count + 1) * 2 > (uint64_t) m->mask + 1 && grow(m) != 0) {
		return -1;
	}
	place(m->slots, m->mask, hash_of(m, key), value);
	m->count++;
	return 0;
}

int dmap_remove(dmap *m, const uint8_t *key) {
	uint64_t h = hash_of(m, key);
	uint32_t tag = (uint32_t) (h >> 32);
	uint32_t i = (uint32_t) h & m->mask;
	for (;; i = (i + 1) & m->mask) {
		dmap_slot *slot = &m->slots[i];
		if (!slot->value_plus1) {
			return 0;
		}
		if (slot->tag == tag && key_equal(m, slot->value_plus1 - 1, key)) {
			break;
		}
	}
	/* Backward shift: pull later members of the run into the hole where their probe start allows. */
	uint32_t hole = i;
	for (uint32_t j = (i + 1) & m->mask; m->slots[j].value_plus1; j = (j + 1) & m->mask) {
		uint32_t value = m->slots[j].value_plus1 - 1;
		uint32_t home = (uint32_t) hash_of(m, m->key_of(m->owner, value)) & m->mask;
		/* j may move to the hole unless its home lies cyclically in (hole, j]. */
		int home_after_hole = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
		if (!home_after_hole) {
			m->slots[hole] = m->slots[j];
			hole = j;
		}
	}
	m->slots[hole].value_plus1 = 0;
	m->slots[hole].tag = 0;
	m->count--;
	return 1;
}

/* --- idring ----------------------------------------------------------------------------------- */

static const uint8_t *ring_key(const void *owner, uint32_t value) {
	return ((const idring *) owner)->items[value].id;
}

int idring_init(idring *r, uint32_t limit) {
	memset(r, 0, sizeof *r);
	r->limit = limit;
	r->cap = 64;
	r->items = calloc(r->cap, sizeof *r->items);
	if (!r->items) {
		return -1;
	}
	if (dmap_init(&r->index, ID_BYTES, ring_key, r) != 0) {
		free(r->items);
		return -1;
	}
	return 0;
}

void idring_free(idring *r) {
	dmap_free(&r->index);
	free(r->items);
	r->items = NULL;
}

/* Rebuild the ring with only its live ids, oldest first, into `capacity` slots. */
static int relayout(idring *r, uint32_t capacity) {
	ring_item *items = calloc(capacity, sizeof *items);
	if (!items) {
		return -1;
	}
	uint32_t n = 0;
	for (uint32_t k = 0; k < r->len; k++) {
		const ring_item *item = &r->items[(r->head + k) % r->cap];
		if (item->live) {
			items[n++] = *item;
		}
	}
	dmap fresh;
	if (dmap_init(&fresh, ID_BYTES, ring_key, r) != 0) {
		free(items);
		return -1;
	}
	ring_item *old = r->items;
	r->items = items;
	r->cap = capacity;
	r->head = 0;
	r->len = n;
	for (uint32_t k = 0; k < n; k++) {
		if (dmap_insert(&fresh, items[k].id, k) != 0) {
			/* out of memory midway: put the old layout back */
			dmap_free(&fresh);
			r->items = old;
			free(items);
			return -1;
		}
	}
	free(old);
	dmap_free(&r->index);
	r->index = fresh;
	return 0;
}

static void drop_oldest(idring *r) {
	while (r->len) {
		ring_item *item = &r->items[r->head];
		r->head = (r->head + 1) % r->cap;
		r->len--;
		if (item->live) {
			dmap_remove(&r->index, item->id);
			item->live = 0;
			return;
		}
	}
}

int idring_add(idring *r, const uint8_t *id, uint8_t data) {
	uint32_t at = dmap_find(&r->index, id);
	if (at != DMAP_NONE) {
		r->items[at].data = data;
		return 0;
	}
	if (r->limit && r->index.count >= r->limit) {
		drop_oldest(r);
	}
	if (r->len == r->cap) {
		/* Full of slots: compact if half are dead, else grow. */
		uint32_t capacity = r->index.count * 2 <= r->cap ? r->cap : r->cap * 2;
		if (relayout(r, capacity) != 0) {
			return -1;
		}
	}
	uint32_t slot = (r->head + r->len) % r->cap;
	memcpy(r->items[slot].id, id, ID_BYTES);
	r->items[slot].live = 1;
	r->items[slot].data = data;
	if (dmap_insert(&r->index, id, slot) != 0) {
		r->items[slot].live = 0;
		return -1;
	}
	r->len++;
	return 0;
}

int idring_get(const idring *r, const uint8_t *id, uint8_t *data) {
	uint32_t at = dmap_find(&r->index, id);
	if (at == DMAP_NONE) {
		return 0;
	}
	if (data) {
		*data = r->items[at].data;
	}
	return 1;
}

int idring_remove(idring *r, const uint8_t *id) {
	uint32_t at = dmap_find(&r->index, id);
	if (at == DMAP_NONE) {
		return 0;
	}
	dmap_remove(&r->index, id);
	r->items[at].live = 0;
	/* Dead slots at the old end cost nothing to drop now. */
	while (r->len && !r->items[r->head].live) {
		r->head = (r->head + 1) % r->cap;
		r->len--;
	}
	return 1;
}
