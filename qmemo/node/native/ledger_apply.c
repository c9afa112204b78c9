/*
 * ledger_apply.c - a block's body against the accounts: qmemo.core.state.apply_block after
 * its header checks (which stay in Python: once per block), in the same order and with
 * the same codes, then the change and what undoes it.
 *
 * Order (apply_block's): the count the header commits to, the block limit, the Merkle
 * root, each id once; then per transaction in block order its form, nonce and balance on
 * a scratch copy of the accounts it touches (a recipient of another shard is not credited
 * here: its shard credits it from a receipt); then every signature (the verified set
 * answers for those verified at admission; the rest are verified here); then the
 * cross-shard receipts' credits and the fees to the producer. Nothing changes unless all pass.
 */
#include "ledger.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
	uint8_t addr[ADDR_BYTES];
	u128 balance;        /* may pass u64 only transiently: checked before commit */
	uint64_t nonce;
	uint8_t existed;
	uint64_t old_balance, old_nonce;
} touched;

typedef struct {
	touched *items;
	uint32_t n, cap;
	dmap index;
} scratch;

static const uint8_t *touched_key(const void *owner, uint32_t value) { return ((const scratch *) owner)->items[value].addr; }

static touched *touch(const ledger *l, scratch *s, const uint8_t *addr) {
	uint32_t at = dmap_find(&s->index, addr);
	if (at != DMAP_NONE) {
		return &s->items[at];
	}
	if (s->n == s->cap) {
		uint32_t cap = s->cap ? s->cap * 2 : 64;
		touched *grown = realloc(s->items, (size_t) cap * sizeof *grown);
		if (!grown) {
			return NULL;
		}
		s->items = grown;
		s->cap = cap;
	}
	touched *t = &s->items[s->n];
	const account *a = ledger_account(l, addr);
	memcpy(t->addr, addr, ADDR_BYTES);
	t->existed = a != NULL;
	t->old_balance = a ? a->balance : 0;
	t->old_nonce = a ? a->nonce : 0;
	t->balance = t->old_balance;
	t->nonce = t->old_nonce;
	if (dmap_insert(&s->index, addr, s->n) != 0) {
		return NULL;
	}
	s->n++;
	return t;
}

static const uint8_t *id_key(const void *owner, uint32_t value) {
	return ((const block_view *) owner)->recs[value].id;
}

static int refuse_block(apply_result *r, uint8_t code, size_t position, i128 a, i128 b) {
	r->code = code;
	r->position = position;
	r->why.code = code;
	r->why.a = a;
	r->why.b = b;
	return 1;
}

void apply_result_free(apply_result *r) {
	free(r->changed);
	free(r->undo);
	r->changed = r->undo = NULL;
}

static void put64(uint8_t *p, uint64_t v) {
	for (int i = 0; i < 8; i++) {
		p[i] = (uint8_t) (v >> (8 * i));
	}
}

static uint64_t get64(const uint8_t *p) {
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--) {
		v = v << 8 | p[i];
	}
	return v;
}

/* Body checks, then the change: 0 applied, 1 refused, -1 out of memory. */
static int apply_checked(ledger *l, const block_view *v, uint32_t header_tx_count, const uint8_t *header_root,
                         uint32_t max_block_txs, const uint8_t *producer, const qmemo_admit_table *table,
                         const uint8_t *credits, size_t ncredits, apply_result *r, scratch *s) {
	size_t n = v->n;
	if (header_tx_count != n) {   /* the count the header commits to */
		return refuse_block(r, C_WRONG_TX_COUNT, SIZE_MAX, header_tx_count, (i128) n);
	}
	if (n > max_block_txs) {      /* within the limit */
		return refuse_block(r, C_TOO_MANY_TRANSACTIONS, SIZE_MAX, (i128) n, max_block_txs);
	}
	/* the transactions it commits to */
	uint8_t *ids = malloc(n ? n * ID_BYTES : 1), root[ID_BYTES];
	if (!ids) {
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		memcpy(ids + i * ID_BYTES, v->recs[i].id, ID_BYTES);
	}
	int merkle = qmemo_admit_merkle_root(ids, n, root);
	free(ids);
	if (merkle != 0) {
		return -1;
	}
	if (memcmp(root, header_root, ID_BYTES) != 0) {
		return refuse_block(r, C_WRONG_MERKLE_ROOT, SIZE_MAX, 0, 0);
	}
	/* each transaction once */
	dmap seen;
	if (dmap_init(&seen, ID_BYTES, id_key, v) != 0) {
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		if (dmap_find(&seen, v->recs[i].id) != DMAP_NONE) {
			dmap_free(&seen);
			return refuse_block(r, C_DUPLICATE_TRANSACTION, SIZE_MAX, 0, 0);
		}
		if (dmap_insert(&seen, v->recs[i].id, (uint32_t) i) != 0) {
			dmap_free(&seen);
			return -1;
		}
	}
	dmap_free(&seen);
	/* each transaction in order: form, nonce, balance, on the scratch accounts */
	u128 fees = 0;
	for (size_t i = 0; i < n; i++) {
		const qmemo_admit_record *rec = &v->recs[i];
		touched *sender = touch(l, s, rec->sender);
		if (!sender) {
			return -1;
		}
		u128 cost;
		if (check_form(l, rec, &r->why) ||
		        charge((i128) sender->balance, sender->nonce, rec, &cost, &r->why)) {
			r->code = r->why.code;
			r->position = i;
			return 1;
		}
		sender->balance -= cost;
		sender->nonce += 1;
		const uint8_t *to = view_recipient(v, i);
		if (ledger_home(l, to)) {   /* another shard's recipient is paid there, from a receipt */
			touched *recipient = touch(l, s, to);
			if (!recipient) {
				return -1;
			}
			recipient->balance += rec->amount;
		}
		fees += rec->fee;
	}
	/* every signature valid: the verified set, else verified now */
	for (size_t i = 0; i < n; i++) {
		qmemo_admit_record *rec = &v->recs[i];
		if (rec->verdict == QMEMO_ADMIT_VALID || ledger_verified(l, rec->id)) {
			continue;
		}
		int good = 0;
		if (table && rec->verdict == QMEMO_ADMIT_NOT_CHECKED) {
			uint8_t one = 1;
			good = qmemo_admit_verify(table, v->body, v->body_length, rec, 1, &one) == 1;
		}
		if (!good) {
			return refuse_block(r, C_BAD_SIGNATURE, i, 0, 0);
		}
	}
	/* the cross-shard receipts' recipients are credited */
	for (size_t k = 0; k < ncredits; k++) {
		touched *paid = touch(l, s, credits + k * CREDIT_BYTES);
		if (!paid) {
			return -1;
		}
		paid->balance += get64(credits + k * CREDIT_BYTES + ADDR_BYTES);
	}
	/* the producer is paid the fees */
	if (fees) {
		touched *paid = producer ? touch(l, s, producer) : NULL;
		if (!paid) {
			return -1;
		}
		paid->balance += fees;
	}
	for (uint32_t k = 0; k < s->n; k++) {
		if (s->items[k].balance > U64_MAX_128) {
			return -2;   /* the genesis caps the supply below 2^64: a bug, not a block */
		}
	}
	/* commit */
	r->changed = malloc(s->n ? (size_t) s->n * CHANGED_BYTES : 1);
	r->undo = malloc(s->n ? (size_t) s->n * UNDO_BYTES : 1);
	if (!r->changed || !r->undo) {
		return -1;
	}
	for (uint32_t k = 0; k < s->n; k++) {
		const touched *t = &s->items[k];
		if (ledger_set_account(l, t->addr, (uint64_t) t->balance, t->nonce) != 0) {
			return -1;   /* (a partial change on out-of-memory: the node stops on it) */
		}
		uint8_t *c = r->changed + (size_t) k * CHANGED_BYTES;
		memcpy(c, t->addr, ADDR_BYTES);
		put64(c + ADDR_BYTES, (uint64_t) t->balance);
		put64(c + ADDR_BYTES + 8, t->nonce);
		uint8_t *u = r->undo + (size_t) k * UNDO_BYTES;
		memcpy(u, t->addr, ADDR_BYTES);
		u[ADDR_BYTES] = t->existed;
		put64(u + ADDR_BYTES + 1, t->old_balance);
		put64(u + ADDR_BYTES + 9, t->old_nonce);
	}
	r->nchanged = r->nundo = s->n;
	r->fees = fees;
	return 0;
}

int ledger_apply(ledger *l, const block_view *v, uint32_t header_tx_count, const uint8_t *header_merkle_root,
                 uint32_t max_block_txs, const uint8_t *producer, const qmemo_admit_table *table,
                 const uint8_t *credits, size_t ncredits, apply_result *result) {
	memset(result, 0, sizeof *result);
	result->position = SIZE_MAX;
	scratch s = {0};
	if (dmap_init(&s.index, ADDR_BYTES, touched_key, &s) != 0) {
		return -1;
	}
	int rc = apply_checked(l, v, header_tx_count, header_merkle_root, max_block_txs, producer, table, credits,
	                       ncredits, result, &s);
	dmap_free(&s.index);
	free(s.items);
	if (rc != 0) {
		apply_result_free(result);
	}
	return rc;
}

int ledger_undo(ledger *l, const uint8_t *undo, size_t nundo) {
	for (size_t k = 0; k < nundo; k++) {
		const uint8_t *u = undo + k * UNDO_BYTES;
		if (u[ADDR_BYTES]) {
			if (ledger_set_account(l, u, get64(u + ADDR_BYTES + 1), get64(u + ADDR_BYTES + 9)) != 0) {
				return -1;
			}
		} else {
			ledger_remove_account(l, u);
		}
	}
	return 0;
}
