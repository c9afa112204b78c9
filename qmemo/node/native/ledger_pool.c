/*
 * ledger_pool.c - the accounts at the tip and the pool of accepted transactions: admission
 * of a batch (its cheap checks, then its commit once the signatures are known), the pool's
 * upkeep when a block commits or is undone, and the choice of a block's transactions.
 *
 * Each function names the Python it mirrors (in qmemo.core): the reference, against
 * which tests/unit/test_ledger_*.py compare every outcome. Amounts are u64 and sums of
 * them u128, so no sum wraps; a balance minus what is spoken for is signed (i128), as
 * Python's ints are.
 */
#include "ledger.h"

#include <stdlib.h>
#include <string.h>

/* --- growth helpers ------------------------------------------------------------------------- */

static int reserve(void **items, uint32_t *cap, uint32_t need, size_t size) {
	if (need <= *cap) {
		return 0;
	}
	uint32_t capacity = *cap ? *cap : 8;
	while (capacity < need) {
		capacity *= 2;
	}
	void *grown = realloc(*items, (size_t) capacity * size);
	if (!grown) {
		return -1;
	}
	*items = grown;
	*cap = capacity;
	return 0;
}

/* --- keys for the maps ------------------------------------------------------------------------ */

static const uint8_t *account_key(const void *owner, uint32_t value) { return ((const ledger *) owner)->accounts[value].addr; }
static const uint8_t *entry_key(const void *owner, uint32_t value) { return ((const ledger *) owner)->entries[value].rec.id; }
static const uint8_t *sender_key(const void *owner, uint32_t value) { return ((const ledger *) owner)->senders[value].addr; }

int ledger_init(ledger *l, const ledger_config *c) {
	memset(l, 0, sizeof *l);
	l->chain_id = c->chain_id;
	l->min_fee = c->min_fee;
	l->max_txs = c->max_txs;
	l->max_bytes = c->max_bytes;
	l->relay_max_txs = c->relay_max_txs < c->max_txs ? c->max_txs : c->relay_max_txs;
	l->relay_max_bytes = c->relay_max_bytes < c->max_bytes ? c->max_bytes : c->relay_max_bytes;
	l->max_per_sender = c->max_per_sender;
	l->held_window = c->held_window;
	l->held_max = c->held_max;
	l->held_per_sender = c->held_per_sender;
	if (pthread_mutex_init(&l->verified_lock, NULL) != 0) {
		return -1;
	}
	if (dmap_init(&l->account_index, ADDR_BYTES, account_key, l) || dmap_init(&l->entry_index, ID_BYTES, entry_key, l) ||
	        dmap_init(&l->sender_index, ADDR_BYTES, sender_key, l) || idring_init(&l->inflight, 0) ||
	        idring_init(&l->committed, c->committed_memory) || idring_init(&l->evicted, c->evicted_memory) ||
	        idring_init(&l->verified, c->verified_memory)) {
		ledger_free(l);
		return -1;
	}
	return 0;
}

void ledger_free(ledger *l) {
	for (uint32_t i = 0; i < l->nentries; i++) {
		free(l->entries[i].enc);
	}
	for (uint32_t i = 0; i < l->nsenders; i++) {
		free(l->senders[i].pending);
		free(l->senders[i].held);
	}
	free(l->entries);
	free(l->free_entries);
	free(l->senders);
	free(l->accounts);
	free(l->fifo);
	dmap_free(&l->account_index);
	dmap_free(&l->entry_index);
	dmap_free(&l->sender_index);
	if (l->inflight.items) idring_free(&l->inflight);
	if (l->committed.items) idring_free(&l->committed);
	if (l->evicted.items) idring_free(&l->evicted);
	if (l->verified.items) idring_free(&l->verified);
	pthread_mutex_destroy(&l->verified_lock);
	memset(l, 0, sizeof *l);
}

/* --- accounts (ChainState.accounts) -------------------------------------------------------- */

const account *ledger_account(const ledger *l, const uint8_t *addr) {
	uint32_t at = dmap_find(&l->account_index, addr);
	return at == DMAP_NONE ? NULL : &l->accounts[at];
}

int ledger_set_account(ledger *l, const uint8_t *addr, uint64_t balance, uint64_t nonce) {
	uint32_t at = dmap_find(&l->account_index, addr);
	if (at == DMAP_NONE) {
		if (reserve((void **) &l->accounts, &l->cap_accounts, l->naccounts + 1, sizeof(account)) != 0) {
			return -1;
		}
		at = l->naccounts;
		memcpy(l->accounts[at].addr, addr, ADDR_BYTES);
		if (dmap_insert(&l->account_index, addr, at) != 0) {
			return -1;
		}
		l->naccounts++;
	}
	l->accounts[at].balance = balance;
	l->accounts[at].nonce = nonce;
	return 0;
}

void ledger_remove_account(ledger *l, const uint8_t *addr) {
	uint32_t at = dmap_find(&l->account_index, addr);
	if (at == DMAP_NONE) {
		return;
	}
	uint32_t last = l->naccounts - 1;
	dmap_remove(&l->account_index, addr);
	if (at != last) {   /* the last account moves into the hole */
		dmap_remove(&l->account_index, l->accounts[last].addr);
		l->accounts[at] = l->accounts[last];
		dmap_insert(&l->account_index, l->accounts[at].addr, at); /* a removal freed room: cannot fail */
	}
	l->naccounts--;
}

/* --- senders (Mempool._by_sender and the held queue's) --------------------------------------- */

sender_q *ledger_sender(const ledger *l, const uint8_t *addr) {
	uint32_t at = dmap_find(&l->sender_index, addr);
	return at == DMAP_NONE ? NULL : &l->senders[at];
}

static sender_q *sender_or_new(ledger *l, const uint8_t *addr) {
	sender_q *q = ledger_sender(l, addr);
	if (q) {
		return q;
	}
	if (reserve((void **) &l->senders, &l->cap_senders, l->nsenders + 1, sizeof(sender_q)) != 0) {
		return NULL;
	}
	q = &l->senders[l->nsenders];
	memset(q, 0, sizeof *q);
	memcpy(q->addr, addr, ADDR_BYTES);
	if (dmap_insert(&l->sender_index, addr, l->nsenders) != 0) {
		return NULL;
	}
	l->nsenders++;
	return q;
}

/* Forget a sender with nothing pending or held (the pointer is invalid afterwards). */
static void sender_drop_if_empty(ledger *l, const uint8_t *addr) {
	uint32_t at = dmap_find(&l->sender_index, addr);
	if (at == DMAP_NONE || l->senders[at].npending || l->senders[at].nheld) {
		return;
	}
	free(l->senders[at].pending);
	free(l->senders[at].held);
	uint32_t last = l->nsenders - 1;
	dmap_remove(&l->sender_index, l->senders[at].addr);
	if (at != last) {
		dmap_remove(&l->sender_index, l->senders[last].addr);
		l->senders[at] = l->senders[last];
		dmap_insert(&l->sender_index, l->senders[at].addr, at);
	}
	l->nsenders--;
}

uint64_t ledger_pending_nonce(const ledger *l, const uint8_t *addr) {
	const account *a = ledger_account(l, addr);
	const sender_q *q = ledger_sender(l, addr);
	return (a ? a->nonce : 0) + (q ? q->npending : 0);
}

/* --- entries ----------------------------------------------------------------------------------- */

/* A new entry holding a copy of `rec`'s transaction from `body`; its offsets rebased onto the
 * copy. UINT32_MAX if out of memory. The id is put in entry_index. */
static uint32_t entry_new(ledger *l, const qmemo_admit_record *rec, const uint8_t *body, uint8_t *owned_enc) {
	uint32_t at;
	int reused = l->nfree > 0;
	if (reused) {
		at = l->free_entries[--l->nfree];
	} else {
		if (reserve((void **) &l->entries, &l->cap_entries, l->nentries + 1, sizeof(entry)) != 0) {
			return UINT32_MAX;
		}
		at = l->nentries++;
	}
	entry *e = &l->entries[at];
	memset(e, 0, sizeof *e);
	uint8_t *enc = owned_enc;
	if (!enc) {
		enc = malloc(rec->record_length ? rec->record_length : 1);
		if (!enc) {
			goto fail;
		}
		memcpy(enc, body + rec->record_offset, rec->record_length);
	}
	e->rec = *rec;
	e->rec.public_key_offset -= rec->record_offset;
	e->rec.signature_offset -= rec->record_offset;
	e->rec.record_offset = 0;
	e->enc = enc;
	if (dmap_insert(&l->entry_index, e->rec.id, at) != 0) {
		if (!owned_enc) {
			free(enc);
		}
		e->enc = NULL;
		goto fail;
	}
	return at;
fail:
	if (reused) {
		l->free_entries[l->nfree++] = at; /* back where it came from: the room is there */
	} else {
		l->nentries--;
	}
	return UINT32_MAX;
}

/* Free an entry (it is in no sender list any more). Keeps its bytes if `keep_enc`. */
static uint8_t *entry_release(ledger *l, uint32_t at, int keep_enc) {
	entry *e = &l->entries[at];
	uint8_t *enc = e->enc;
	dmap_remove(&l->entry_index, e->rec.id);
	if (!keep_enc) {
		free(enc);
		enc = NULL;
	}
	e->enc = NULL;
	e->state = E_FREE;
	if (reserve((void **) &l->free_entries, &l->cap_free, l->nfree + 1, sizeof(uint32_t)) == 0) {
		l->free_entries[l->nfree++] = at;
	} /* else: the slot is leaked, not reused: harmless */
	return enc;
}

static int fifo_push(ledger *l, uint32_t at, uint64_t seq) {
	if (l->fifo_head + l->fifo_len == l->fifo_cap) {
		/* Compact: drop the items before head and every stale one. */
		uint32_t n = 0;
		for (uint32_t k = l->fifo_head; k < l->fifo_head + l->fifo_len; k++) {
			const fifo_item *item = &l->fifo[k];
			const entry *e = &l->entries[item->entry];
			if (e->state == E_PENDING && e->seq == item->seq) {
				l->fifo[n++] = *item;
			}
		}
		l->fifo_head = 0;
		l->fifo_len = n;
		if (n * 2 >= l->fifo_cap &&
		        reserve((void **) &l->fifo, &l->fifo_cap, l->fifo_cap ? l->fifo_cap * 2 : 1024, sizeof(fifo_item)) != 0) {
			return -1;
		}
	}
	l->fifo[l->fifo_head + l->fifo_len].entry = at;
	l->fifo[l->fifo_head + l->fifo_len].seq = seq;
	l->fifo_len++;
	return 0;
}

/* Mempool.add's second half: the entry joins its sender's pending queue and the FIFO. */
static int make_pending(ledger *l, uint32_t at) {
	entry *e = &l->entries[at];
	sender_q *q = sender_or_new(l, e->rec.sender);
	if (!q || reserve((void **) &q->pending, &q->cap_pending, q->npending + 1, sizeof(uint32_t)) != 0) {
		return -1;
	}
	e = &l->entries[at];
	e->state = E_PENDING;
	e->seq = l->next_seq++;
	q->pending[q->npending++] = at;
	q->pending_cost += (u128) e->rec.amount + e->rec.fee;
	l->npending++;
	l->pending_bytes += e->rec.record_length;
	return fifo_push(l, at, e->seq);
}

/* FutureQueue.hold's second half: the entry joins its sender's held list, by nonce. */
static int make_held(ledger *l, uint32_t at, double now, int relay) {
	entry *e = &l->entries[at];
	sender_q *q = sender_or_new(l, e->rec.sender);
	if (!q || reserve((void **) &q->held, &q->cap_held, q->nheld + 1, sizeof(uint32_t)) != 0) {
		return -1;
	}
	e = &l->entries[at];
	e->state = E_HELD;
	e->held_at = now;
	e->relay = (uint8_t) (relay != 0);
	uint32_t k = q->nheld;
	while (k && l->entries[q->held[k - 1]].rec.nonce > e->rec.nonce) {
		q->held[k] = q->held[k - 1];
		k--;
	}
	q->held[k] = at;
	q->nheld++;
	q->held_cost += (u128) e->rec.amount + e->rec.fee;
	l->nheld++;
	return 0;
}

/* Take held entry k out of its sender's list (FutureQueue._forget). */
static void unhold(ledger *l, sender_q *q, uint32_t k) {
	const entry *e = &l->entries[q->held[k]];
	q->held_cost -= (u128) e->rec.amount + e->rec.fee;
	memmove(&q->held[k], &q->held[k + 1], (q->nheld - k - 1) * sizeof(uint32_t));
	q->nheld--;
	l->nheld--;
}

/* --- the verified set (VerifyCache) ---------------------------------------------------------- */

int ledger_verified(ledger *l, const uint8_t *id) {
	pthread_mutex_lock(&l->verified_lock);
	int found = idring_get(&l->verified, id, NULL);
	pthread_mutex_unlock(&l->verified_lock);
	return found;
}

int ledger_remember_verified(ledger *l, const uint8_t *ids, size_t count, size_t stride) {
	int rc = 0;
	pthread_mutex_lock(&l->verified_lock);
	for (size_t i = 0; i < count && rc == 0; i++) {
		rc = idring_add(&l->verified, ids + i * stride, 0);
	}
	pthread_mutex_unlock(&l->verified_lock);
	return rc;
}

/* A verify slice's look-ups and additions take the lock once for the slice, not once per
 * transaction: two verify threads taking it twice per signature each met on it often
 * enough to cost more than the second thread gave. */
void ledger_verified_lock(ledger *l) {
	pthread_mutex_lock(&l->verified_lock);
}

void ledger_verified_unlock(ledger *l) {
	pthread_mutex_unlock(&l->verified_lock);
}

int ledger_verified_held(const ledger *l, const uint8_t *id) {
	return idring_get(&l->verified, id, NULL);
}

int ledger_remember_verified_held(ledger *l, const uint8_t *id) {
	return idring_add(&l->verified, id, 0);
}

void ledger_forget_verified(ledger *l, const uint8_t *id) {
	pthread_mutex_lock(&l->verified_lock);
	idring_remove(&l->verified, id);
	pthread_mutex_unlock(&l->verified_lock);
}

/* --- the rules ---------------------------------------------------------------------------------- */

static int refuse(refusal *why, uint8_t code, i128 a, i128 b) {
	why->code = code;
	why->a = a;
	why->b = b;
	return 1;
}

/* check_transaction_form: 0, or 1 with the first rule broken. */
int check_form(const ledger *l, const qmemo_admit_record *rec, refusal *why) {
	const scheme_rule *rule = &l->schemes[rec->scheme_id];
	if (rec->chain_id != l->chain_id) {
		return refuse(why, C_WRONG_CHAIN_ID, rec->chain_id, 0);
	}
	if (!rule->known) {
		return refuse(why, C_UNKNOWN_SCHEME, rec->scheme_id, 0);
	}
	if (!rule->allowed) {
		return refuse(why, C_SCHEME_NOT_ALLOWED, rec->scheme_id, 0);
	}
	if (rec->public_key_length != rule->public_key_bytes) {
		return refuse(why, C_BAD_PUBLIC_KEY_LENGTH, rec->scheme_id, rec->public_key_length);
	}
	if (rec->signature_length > rule->max_signature_bytes) {
		return refuse(why, C_SIGNATURE_TOO_LONG, rec->scheme_id, rec->signature_length);
	}
	if (rec->signature_length < rule->min_signature_bytes) {
		return refuse(why, C_BAD_SIGNATURE_LENGTH, rec->scheme_id, rec->signature_length);
	}
	if (rec->fee < l->min_fee) {
		return refuse(why, C_FEE_TOO_LOW, rec->fee, 0);
	}
	return 0;
}

/* charge: 0 with the cost, or 1 with the rule broken. */
int charge(i128 available, u128 next_nonce, const qmemo_admit_record *rec, u128 *cost, refusal *why) {
	if (rec->nonce < next_nonce) {
		return refuse(why, C_REPLAYED_NONCE, rec->nonce, (i128) next_nonce);
	}
	if (rec->nonce > next_nonce) {
		return refuse(why, C_NONCE_GAP, rec->nonce, (i128) next_nonce);
	}
	u128 total = (u128) rec->amount + rec->fee;
	if (total > U64_MAX_128) {
		return refuse(why, C_AMOUNT_OVERFLOW, (i128) total, 0);
	}
	if ((i128) total > available) {
		return refuse(why, C_INSUFFICIENT_BALANCE, (i128) total, available);
	}
	*cost = total;
	return 0;
}

/* Mempool.check: 0 would be added, 1 already pending, 2 refused (why). `relayed`: a peer's
 * relay or what is in memory already, judged against the relay caps. */
static int pool_check(const ledger *l, const qmemo_admit_record *rec, const account *a, int relayed, refusal *why) {
	uint32_t at = dmap_find(&l->entry_index, rec->id);
	if (at != DMAP_NONE && l->entries[at].state == E_PENDING) {
		return 1;
	}
	const sender_q *q = ledger_sender(l, rec->sender);
	uint64_t pending = q ? q->npending : 0;
	u128 pending_cost = q ? q->pending_cost : 0;
	uint64_t nonce = a ? a->nonce : 0;
	u128 next = (u128) nonce + pending;
	u128 cost;
	if (nonce <= rec->nonce && rec->nonce < next) {
		return 2 * refuse(why, C_NONCE_CONFLICT, rec->nonce, 0);
	}
	if (charge((i128) (a ? a->balance : 0) - (i128) pending_cost, next, rec, &cost, why)) {
		return 2;
	}
	if (pending >= l->max_per_sender) {
		return 2 * refuse(why, C_SENDER_LIMIT, pending, 0);
	}
	uint64_t max_txs = relayed ? l->relay_max_txs : l->max_txs, max_bytes = relayed ? l->relay_max_bytes : l->max_bytes;
	if (l->npending >= max_txs || l->pending_bytes + rec->record_length > max_bytes) {
		return 2 * refuse(why, C_MEMPOOL_FULL, l->npending, l->pending_bytes);
	}
	return 0;
}

/* FutureQueue.check_room: 0, or 1 (why). */
static int held_room(const ledger *l, const sender_q *q, refusal *why) {
	if ((q ? q->nheld : 0) >= l->held_per_sender) {
		return refuse(why, C_HELD_SENDER_LIMIT, l->held_per_sender, 0);
	}
	if (l->nheld >= l->held_max) {
		return refuse(why, C_HELD_FULL, l->nheld, 0);
	}
	return 0;
}

/* FutureQueue.hold's checks: 0, or 1 (why). `available`: balance minus the pending cost. */
static int hold_check(const ledger *l, const qmemo_admit_record *rec, i128 available, refusal *why) {
	const sender_q *q = ledger_sender(l, rec->sender);
	if (q) {
		for (uint32_t k = 0; k < q->nheld; k++) {
			if (l->entries[q->held[k]].rec.nonce == rec->nonce) {
				return refuse(why, C_HELD_NONCE_CONFLICT, rec->nonce, 0);
			}
		}
	}
	if (held_room(l, q, why)) {
		return 1;
	}
	u128 cost;
	return charge(available - (i128) (q ? q->held_cost : 0), rec->nonce, rec, &cost, why);
}

int evictions_push(evictions *e, const uint8_t *id, uint8_t reason) {
	if (e->n == e->cap) {
		size_t cap = e->cap ? e->cap * 2 : 16;
		eviction *grown = realloc(e->items, cap * sizeof *grown);
		if (!grown) {
			return -1;
		}
		e->items = grown;
		e->cap = cap;
	}
	memcpy(e->items[e->n].id, id, ID_BYTES);
	e->items[e->n].reason = reason;
	e->n++;
	return 0;
}

/* Admission._evict: remembered for /tx/{id}, reported to the caller (for the metrics). */
int ledger_evict(ledger *l, evictions *out, const uint8_t *id, uint8_t reason) {
	if (idring_add(&l->evicted, id, reason) != 0) {
		return -1;
	}
	return out ? evictions_push(out, id, reason) : 0;
}

static int push_u32(uint32_t **items, size_t *n, size_t *cap, uint32_t value) {
	if (*n == *cap) {
		size_t grown_cap = *cap ? *cap * 2 : 64;
		uint32_t *grown = realloc(*items, grown_cap * sizeof *grown);
		if (!grown) {
			return -1;
		}
		*items = grown;
		*cap = grown_cap;
	}
	(*items)[(*n)++] = value;
	return 0;
}

/* Admission._promote: the sender's held transactions that are now next join the pool. */
int ledger_promote(ledger *l, const uint8_t *sender_addr, evictions *out, uint32_t **relay_entries, size_t *nrelay,
                   size_t *relay_cap) {
	sender_q *q = ledger_sender(l, sender_addr);
	if (!q || !q->nheld) {
		return 0;
	}
	uint8_t addr[ADDR_BYTES];
	memcpy(addr, sender_addr, ADDR_BYTES);
	const account *a = ledger_account(l, addr);
	account snapshot = a ? *a : (account) {{0}, 0, 0};   /* chain.account(sender), taken once */
	uint64_t next = (a ? a->nonce : 0) + q->npending;
	/* take_ready: the run of consecutive nonces from `next`, out of the held list first */
	uint32_t start = 0;
	while (start < q->nheld && l->entries[q->held[start]].rec.nonce != next) {
		start++;
	}
	uint32_t run = 0;
	while (start + run < q->nheld && l->entries[q->held[start + run]].rec.nonce == next + run) {
		run++;
	}
	if (!run) {
		return 0;
	}
	uint32_t ready[run];
	memcpy(ready, &q->held[start], run * sizeof(uint32_t));
	for (uint32_t k = 0; k < run; k++) {
		unhold(l, q, start);
	}
	for (uint32_t k = 0; k < run; k++) {
		uint32_t at = ready[k];
		refusal why;
		int r = pool_check(l, &l->entries[at].rec, a ? &snapshot : NULL, 1, &why);
		if (r != 0) {   /* 1 cannot happen: the id is this entry's own, not pending */
			uint8_t id[ID_BYTES];
			memcpy(id, l->entries[at].rec.id, ID_BYTES);
			entry_release(l, at, 0);
			if (ledger_evict(l, out, id, r == 2 ? why.code : C_NONCE_CONFLICT) != 0) {
				return -1;
			}
			continue;
		}
		if (make_pending(l, at) != 0) {
			return -1;
		}
		if (l->entries[at].relay && relay_entries && push_u32(relay_entries, nrelay, relay_cap, at) != 0) {
			return -1;
		}
	}
	sender_drop_if_empty(l, addr);
	return 0;
}

/* --- admission of one batch -------------------------------------------------------------------- */

/* A sender's next nonce and cost among a batch's earlier candidates (batch_next, batch_cost). */
typedef struct {
	uint8_t addr[ADDR_BYTES];
	uint64_t next;
	u128 cost;
} batch_sender;

typedef struct {
	batch_sender *items;
	uint32_t n, cap;
	dmap index;
} batch_senders;

static const uint8_t *batch_sender_key(const void *owner, uint32_t value) {
	return ((const batch_senders *) owner)->items[value].addr;
}

static uint8_t decode_code(uint8_t status) {
	switch (status) {
	case QMEMO_ADMIT_TRUNCATED: return C_TRUNCATED;
	case QMEMO_ADMIT_UNSUPPORTED_VERSION: return C_UNSUPPORTED_VERSION;
	case QMEMO_ADMIT_OVERSIZED: return C_OVERSIZED;
	default: return C_TRAILING_BYTES;
	}
}

/* Admission._precheck over the kernel's records: duplicates, form, nonce and balance
 * feasibility; what survives becomes a candidate (in flight). */
int ledger_precheck(ledger *l, admit_batch *b) {
	batch_senders seen = {0};
	if (dmap_init(&seen.index, ADDR_BYTES, batch_sender_key, &seen) != 0) {
		return -1;
	}
	int rc = 0;
	b->ncand = 0;
	for (size_t i = 0; i < b->n && rc == 0; i++) {
		qmemo_admit_record *rec = &b->recs[i];
		refusal *why = &b->why[i];
		if (rec->status != QMEMO_ADMIT_DECODED) {
			b->status[i] = S_REJECTED;
			refuse(why, decode_code(rec->status), 0, 0);
			continue;
		}
		if (idring_get(&l->inflight, rec->id, NULL) || dmap_find(&l->entry_index, rec->id) != DMAP_NONE ||
		        idring_get(&l->committed, rec->id, NULL)) {
			b->status[i] = S_DUPLICATE;
			continue;
		}
		if (check_form(l, rec, why)) {
			b->status[i] = S_REJECTED;
			continue;
		}
		const account *a = ledger_account(l, rec->sender);
		const sender_q *q = ledger_sender(l, rec->sender);
		uint64_t next_pending = (a ? a->nonce : 0) + (q ? q->npending : 0);
		uint32_t at = dmap_find(&seen.index, rec->sender);
		batch_sender *earlier = at == DMAP_NONE ? NULL : &seen.items[at];
		int refused;
		if (rec->nonce == next_pending) {
			refused = pool_check(l, rec, a, b->relayed, why) == 2;
		} else if ((earlier && rec->nonce == earlier->next) ||
		           (next_pending < rec->nonce && (u128) rec->nonce <= (u128) next_pending + l->held_window)) {
			/* held, or after a candidate: payable with everything before it, and room to hold it */
			u128 spent = (q ? q->pending_cost + q->held_cost : 0) + (earlier ? earlier->cost : 0), cost;
			refused = charge((i128) (a ? a->balance : 0) - (i128) spent, rec->nonce, rec, &cost, why) ||
			          ((!earlier || rec->nonce != earlier->next) && held_room(l, q, why));
		} else {
			refused = pool_check(l, rec, a, b->relayed, why) == 2;   /* replay, conflict or gap */
		}
		if (refused) {
			b->status[i] = S_REJECTED;
			continue;
		}
		if (!earlier) {
			if (reserve((void **) &seen.items, &seen.cap, seen.n + 1, sizeof(batch_sender)) != 0) {
				rc = -1;
				break;
			}
			earlier = &seen.items[seen.n];
			memcpy(earlier->addr, rec->sender, ADDR_BYTES);
			earlier->cost = 0;
			if (dmap_insert(&seen.index, rec->sender, seen.n) != 0) {
				rc = -1;
				break;
			}
			seen.n++;
		}
		earlier->next = rec->nonce + 1;
		earlier->cost += (u128) rec->amount + rec->fee;
		if (idring_add(&l->inflight, rec->id, 0) != 0) {
			rc = -1;
			break;
		}
		b->candidates[b->ncand++] = (uint32_t) i;
	}
	b->inflight = 1;
	dmap_free(&seen.index);
	free(seen.items);
	return rc;
}

void ledger_abandon(ledger *l, admit_batch *b) {
	if (!b->inflight) {
		return;
	}
	for (size_t k = 0; k < b->ncand; k++) {
		idring_remove(&l->inflight, b->recs[b->candidates[k]].id);
	}
	b->inflight = 0;
}

/* Admission._add: signatures known, each candidate in input order joins the pool, is held,
 * or is refused. `journal` (room for n) gets the accepted positions in order; relayed pool
 * entries go to `relay_entries` (the client's accepted ones if `relay`, and held ones
 * released meanwhile that came from a client). */
int ledger_commit(ledger *l, admit_batch *b, double now, int relay, uint32_t *journal, size_t *njournal,
                  uint32_t **relay_entries, size_t *nrelay, size_t *relay_cap, evictions *out) {
	int rc = 0;
	*njournal = 0;
	for (size_t k = 0; k < b->ncand && rc == 0; k++) {
		uint32_t i = b->candidates[k];
		qmemo_admit_record *rec = &b->recs[i];
		refusal *why = &b->why[i];
		if (rec->verdict != QMEMO_ADMIT_VALID) {
			b->status[i] = S_REJECTED;
			refuse(why, C_BAD_SIGNATURE, 0, 0);
			continue;
		}
		if (idring_get(&l->committed, rec->id, NULL)) {   /* a block took it while it was verified */
			b->status[i] = S_DUPLICATE;
			continue;
		}
		const account *a = ledger_account(l, rec->sender);
		int r = pool_check(l, rec, a, b->relayed, why);
		if (r == 1 || (r == 0 && dmap_find(&l->entry_index, rec->id) != DMAP_NONE)) {
			b->status[i] = S_DUPLICATE;   /* pending already (or held: a relay's copy won the race) */
			continue;
		}
		if (r == 2) {
			if (why->code == C_NONCE_GAP &&
			        (i128) rec->nonce - (i128) ledger_pending_nonce(l, rec->sender) <= (i128) l->held_window) {
				const sender_q *q = ledger_sender(l, rec->sender);
				refusal held_why;
				i128 available = (i128) (a ? a->balance : 0) - (i128) (q ? q->pending_cost : 0);
				if (!hold_check(l, rec, available, &held_why)) {
					uint32_t at = entry_new(l, rec, b->body, NULL);
					if (at == UINT32_MAX || make_held(l, at, now, relay) != 0) {
						rc = -1;
						break;
					}
					b->status[i] = S_ACCEPTED;
					journal[(*njournal)++] = i;
					continue;
				}
				*why = held_why;
			}
			b->status[i] = S_REJECTED;
			continue;
		}
		uint32_t at = entry_new(l, rec, b->body, NULL);
		if (at == UINT32_MAX || make_pending(l, at) != 0) {
			rc = -1;
			break;
		}
		b->status[i] = S_ACCEPTED;
		journal[(*njournal)++] = i;
		if (relay && push_u32(relay_entries, nrelay, relay_cap, at) != 0) {
			rc = -1;
			break;
		}
		if (l->nheld) {
			rc = ledger_promote(l, rec->sender, out, relay_entries, nrelay, relay_cap);
		}
	}
	ledger_abandon(l, b);
	return rc;
}

/* --- blocks ---------------------------------------------------------------------------------- */

/* Admission.block_applied with Mempool.remove_block: drop what the block committed, evict
 * what it made stale (per sender in block order: nonce_stale, nonce_gap, then
 * insufficient_balance), release held transactions whose gap it filled. The accounts are
 * already the new tip's. */
int ledger_block_applied(ledger *l, const block_view *v, double now, evictions *out, uint32_t **relay_entries,
                         size_t *nrelay, size_t *relay_cap) {
	(void) now;
	for (size_t i = 0; i < v->n; i++) {
		const uint8_t *id = v->recs[i].id;
		if (idring_add(&l->committed, id, 0) != 0) {
			return -1;
		}
		uint32_t at = dmap_find(&l->entry_index, id);
		if (at != DMAP_NONE) {
			l->entries[at].in_block = 1;
		}
	}
	uint64_t stamp = ++l->stamp;
	for (size_t i = 0; i < v->n; i++) {
		const uint8_t *addr = v->recs[i].sender;
		sender_q *q = ledger_sender(l, addr);
		if (!q || q->stamp == stamp) {
			continue;   /* no queue, or seen already (senders in block order, each once) */
		}
		q->stamp = stamp;
		const account *a = ledger_account(l, addr);
		uint64_t nonce = a ? a->nonce : 0, balance = a ? a->balance : 0;
		uint32_t kept = 0;
		u128 kept_cost = 0;
		uint32_t n = q->npending;
		for (uint32_t k = 0; k < n; k++) {
			uint32_t at = q->pending[k];
			entry *e = &l->entries[at];
			uint8_t reason;
			u128 cost = (u128) e->rec.amount + e->rec.fee;
			if (e->in_block) {
				reason = C_NONE;
			} else if (e->rec.nonce < nonce) {
				reason = C_NONCE_STALE;
			} else if (e->rec.nonce != (u128) nonce + kept) {
				reason = C_NONCE_GAP;
			} else if (kept_cost + cost > balance) {
				reason = C_INSUFFICIENT_BALANCE;
			} else {
				q->pending[kept++] = at;
				kept_cost += cost;
				continue;
			}
			uint8_t id[ID_BYTES];
			memcpy(id, e->rec.id, ID_BYTES);
			l->npending--;
			l->pending_bytes -= e->rec.record_length;
			entry_release(l, at, 0);
			if (reason != C_NONE && ledger_evict(l, out, id, reason) != 0) {
				return -1;
			}
		}
		q->npending = kept;
		q->pending_cost = kept_cost;
		/* an empty sender is dropped below, after its held ones are seen to */
	}
	/* held: those below the sender's new nonce go (nonce_stale unless the block had them),
	 * then the run now next joins the pool */
	stamp = ++l->stamp;
	for (size_t i = 0; i < v->n; i++) {
		const uint8_t *addr = v->recs[i].sender;
		sender_q *q = ledger_sender(l, addr);
		if (!q || q->stamp == stamp) {
			continue;
		}
		q->stamp = stamp;
		if (l->nheld && q->nheld) {
			const account *a = ledger_account(l, addr);
			uint64_t nonce = a ? a->nonce : 0;
			while (q->nheld && l->entries[q->held[0]].rec.nonce < nonce) {
				uint32_t at = q->held[0];
				int in_block = l->entries[at].in_block;
				uint8_t id[ID_BYTES];
				memcpy(id, l->entries[at].rec.id, ID_BYTES);
				unhold(l, q, 0);
				entry_release(l, at, 0);
				if (!in_block && ledger_evict(l, out, id, C_NONCE_STALE) != 0) {
					return -1;
				}
			}
			uint8_t copy[ADDR_BYTES];
			memcpy(copy, addr, ADDR_BYTES);
			if (ledger_promote(l, copy, out, relay_entries, nrelay, relay_cap) != 0) {
				return -1;
			}
			sender_drop_if_empty(l, copy);
		} else {
			uint8_t copy[ADDR_BYTES];
			memcpy(copy, addr, ADDR_BYTES);
			sender_drop_if_empty(l, copy);
		}
	}
	for (size_t i = 0; i < v->n; i++) {   /* never checked again: their signatures are spent */
		ledger_forget_verified(l, v->recs[i].id);
	}
	return 0;
}

/* A record to add again after a branch switch, with its bytes. */
typedef struct {
	qmemo_admit_record rec;   /* offsets into enc */
	uint8_t *enc;             /* owned */
} readd_item;

static int readd_order(const void *x, const void *y) {
	const readd_item *a = x, *b = y;
	int c = memcmp(a->rec.sender, b->rec.sender, ADDR_BYTES);
	if (c) {
		return c;
	}
	return (a->rec.nonce > b->rec.nonce) - (a->rec.nonce < b->rec.nonce);
}

/* Admission.blocks_undone: the undone blocks' transactions are pending again, before the
 * pending ones of the same senders (all re-added in (sender, nonce) order); what no longer
 * fits is evicted as reorg_<code>. The accounts are already the rolled-back ones. */
int ledger_blocks_undone(ledger *l, const block_view *views, size_t nviews, evictions *out) {
	size_t total = 0;
	for (size_t k = 0; k < nviews; k++) {
		total += views[k].n;
	}
	if (!total) {
		return 0;
	}
	readd_item *items = NULL;
	uint32_t nitems = 0, cap = 0;
	int rc = 0;
	/* the undone transactions; and the senders whose pending ones go with them */
	batch_senders seen = {0};
	if (dmap_init(&seen.index, ADDR_BYTES, batch_sender_key, &seen) != 0) {
		return -1;
	}
	for (size_t k = 0; k < nviews && rc == 0; k++) {
		const block_view *v = &views[k];
		for (size_t i = 0; i < v->n; i++) {
			const qmemo_admit_record *rec = &v->recs[i];
			idring_remove(&l->committed, rec->id);
			if (reserve((void **) &items, &cap, nitems + 1, sizeof *items) != 0) {
				rc = -1;
				break;
			}
			uint8_t *enc = malloc(rec->record_length ? rec->record_length : 1);
			if (!enc) {
				rc = -1;
				break;
			}
			memcpy(enc, v->body + rec->record_offset, rec->record_length);
			items[nitems].rec = *rec;
			items[nitems].rec.public_key_offset -= rec->record_offset;
			items[nitems].rec.signature_offset -= rec->record_offset;
			items[nitems].rec.record_offset = 0;
			items[nitems].enc = enc;
			nitems++;
			if (dmap_find(&seen.index, rec->sender) == DMAP_NONE) {
				if (reserve((void **) &seen.items, &seen.cap, seen.n + 1, sizeof(batch_sender)) != 0 ||
				        (memcpy(seen.items[seen.n].addr, rec->sender, ADDR_BYTES),
				         dmap_insert(&seen.index, rec->sender, seen.n)) != 0) {
					rc = -1;
					break;
				}
				seen.n++;
			}
		}
	}
	/* the pending transactions of those senders leave the pool, to be added again */
	for (uint32_t s = 0; s < seen.n && rc == 0; s++) {
		sender_q *q = ledger_sender(l, seen.items[s].addr);
		if (!q) {
			continue;
		}
		for (uint32_t k = 0; k < q->npending; k++) {
			uint32_t at = q->pending[k];
			entry *e = &l->entries[at];
			if (reserve((void **) &items, &cap, nitems + 1, sizeof *items) != 0) {
				rc = -1;
				break;
			}
			items[nitems].rec = e->rec;
			l->npending--;
			l->pending_bytes -= e->rec.record_length;
			items[nitems].enc = entry_release(l, at, 1);
			nitems++;
		}
		q->npending = 0;
		q->pending_cost = 0;
		sender_drop_if_empty(l, seen.items[s].addr);
	}
	if (rc == 0) {
		qsort(items, nitems, sizeof *items, readd_order);
	}
	for (uint32_t k = 0; k < nitems && rc == 0; k++) {
		readd_item *item = &items[k];
		refusal why;
		int r = pool_check(l, &item->rec, ledger_account(l, item->rec.sender), 1, &why);
		if (r == 0 && dmap_find(&l->entry_index, item->rec.id) == DMAP_NONE) {
			uint32_t at = entry_new(l, &item->rec, NULL, item->enc);
			if (at == UINT32_MAX) {
				rc = -1;
				break;
			}
			item->enc = NULL;   /* the entry owns it now */
			rc = make_pending(l, at);
			continue;
		}
		if (r == 2) {
			rc = ledger_evict(l, out, item->rec.id, (uint8_t) (C_REORG | why.code));
		}
		free(item->enc);
		item->enc = NULL;
	}
	for (uint32_t j = 0; j < nitems; j++) {
		free(items[j].enc);
	}
	free(items);
	dmap_free(&seen.index);
	free(seen.items);
	return rc;
}

/* Admission.expire_held: held longer than the window allows, evicted nonce_gap_timeout. */
int ledger_expire_held(ledger *l, double older_than, evictions *out) {
	for (uint32_t s = 0; s < l->nsenders;) {
		sender_q *q = &l->senders[s];
		for (uint32_t k = 0; k < q->nheld;) {
			uint32_t at = q->held[k];
			if (l->entries[at].held_at < older_than) {
				uint8_t id[ID_BYTES];
				memcpy(id, l->entries[at].rec.id, ID_BYTES);
				unhold(l, q, k);
				entry_release(l, at, 0);
				if (ledger_evict(l, out, id, C_NONCE_GAP_TIMEOUT) != 0) {
					return -1;
				}
			} else {
				k++;
			}
		}
		if (!q->npending && !q->nheld) {
			uint8_t addr[ADDR_BYTES];
			memcpy(addr, q->addr, ADDR_BYTES);
			sender_drop_if_empty(l, addr);   /* the last sender moved into slot s: look at it next */
		} else {
			s++;
		}
	}
	return 0;
}

/* Mempool.select: the first `max_count` pending, in arrival order. */
size_t ledger_select(const ledger *l, size_t max_count, uint32_t *out) {
	size_t n = 0;
	for (uint32_t k = l->fifo_head; k < l->fifo_head + l->fifo_len && n < max_count; k++) {
		const fifo_item *item = &l->fifo[k];
		const entry *e = &l->entries[item->entry];
		if (e->state == E_PENDING && e->seq == item->seq) {
			out[n++] = item->entry;
		}
	}
	return n;
}

int ledger_find_pending(const ledger *l, const uint8_t *id, uint32_t *entry_index) {
	uint32_t at = dmap_find(&l->entry_index, id);
	if (at == DMAP_NONE || l->entries[at].state != E_PENDING) {
		return 0;
	}
	*entry_index = at;
	return 1;
}
