/*
 * ledger.h - the node's ledger in C: the accounts at the tip, the pool of accepted
 * transactions (pending and held), and the per-transaction work of admission and of
 * blocks. Internal to the _qmemo_ledger extension (ledger_module.c is its Python face).
 *
 * Why: a node spent ~60 µs of CPU per transaction at saturation, 7 of them verifying;
 * most of the rest was Python per transaction (an object, dict look-ups, checks) in the
 * mempool, block building and block validation. Here the same rules run per transaction
 * in C and Python acts once per request, block or timer tick (numpy's rule).
 *
 * The rules are qmemo.core's, which stays the reference: check_transaction_form and
 * charge (qmemo/core/state.py), Mempool.check/add/remove_block (qmemo/core/mempool.py),
 * the held queue (qmemo/core/held.py), admission's order of checks (qmemo/core/pool.py)
 * and apply_block; the refusal codes are qmemo/core/refusals.py's RULES (ledger_codes.h
 * is generated from it). tests/unit/test_ledger_*.py feed the same inputs to both and
 * compare every outcome, code and state.
 *
 * Not thread-safe except where said: the event loop owns a ledger; only the verified set
 * (`verified`, under `verified_lock`) is touched from the verify threads.
 */
#ifndef QMEMO_LEDGER_H
#define QMEMO_LEDGER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "ledger_codes.h"
#include "qmemo_admit.h"

#define ID_BYTES QMEMO_DIGEST_BYTES      /* 64 */
#define ADDR_BYTES QMEMO_ADDRESS_BYTES   /* 32 */
#define RECIPIENT_AT (1 + 4 + 1 + 8)     /* version, chain_id, scheme_id, nonce: the recipient follows */
#define FRAME_PREFIX QMEMO_FRAME_PREFIX_BYTES

typedef unsigned __int128 u128;
typedef __int128 i128;

#define U64_MAX_128 ((u128) UINT64_MAX)

/* --- a map from 32- or 64-byte digests to u32 values ------------------------------------ */

/* Open addressing, linear probing, backward-shift deletion (no tombstones). The keys are
 * not stored: `key_of(owner, value)` finds a value's key in the owner's array, so an id
 * lives once. The probe start mixes the key with a random seed, so ids ground to share a
 * prefix do not pile up in one run of slots. */
typedef const uint8_t *(*dmap_key_fn)(const void *owner, uint32_t value);

typedef struct {
	uint32_t value_plus1; /* 0: empty */
	uint32_t tag;         /* 32 bits of the hash: most mismatches never read the key */
} dmap_slot;

typedef struct {
	dmap_slot *slots;
	uint32_t mask;
	uint32_t count;
	uint64_t seed;
	uint32_t key_bytes;
	dmap_key_fn key_of;
	const void *owner;
} dmap;

#define DMAP_NONE UINT32_MAX

int dmap_init(dmap *m, uint32_t key_bytes, dmap_key_fn key_of, const void *owner);
void dmap_free(dmap *m);
uint32_t dmap_find(const dmap *m, const uint8_t *key);
int dmap_insert(dmap *m, const uint8_t *key, uint32_t value); /* key absent; 0, or -1 out of memory */
int dmap_remove(dmap *m, const uint8_t *key);                 /* 1 removed, 0 absent */

/* --- an insertion-ordered set of ids, each with a byte of data ------------------------- */

/* OrderedDict's semantics: adding an id kept keeps its place; a bounded ring forgets its
 * oldest live id past `capacity` live ids (an unbounded one grows). Removed ids leave
 * dead slots, compacted away when the ring fills. */
typedef struct {
	uint8_t id[ID_BYTES];
	uint8_t live;
	uint8_t data;
} ring_item;

typedef struct {
	ring_item *items;
	uint32_t cap;      /* slots allocated */
	uint32_t head;     /* oldest slot */
	uint32_t len;      /* slots in use from head, live or dead */
	uint32_t limit;    /* live ids kept at most; 0: unbounded */
	dmap index;        /* id -> slot */
} idring;

int idring_init(idring *r, uint32_t limit);
void idring_free(idring *r);
int idring_add(idring *r, const uint8_t *id, uint8_t data); /* 0, or -1 out of memory */
int idring_get(const idring *r, const uint8_t *id, uint8_t *data); /* 1 found (data set if not NULL), 0 not */
int idring_remove(idring *r, const uint8_t *id);                  /* 1 removed, 0 absent */
static inline uint32_t idring_count(const idring *r) { return r->index.count; }

/* --- codes: refusals and evictions (ledger_codes.h, from qmemo/core/refusals.py's RULES) -- */

enum {
	C_NONE = 0,
#define X(id, name) id,
	QMEMO_LEDGER_CODES(X)
#undef X
	C_COUNT
};
#define C_REORG 0x80 /* an eviction's reason "reorg_<code>": the code with this bit */

/* A refusal: its code and the two numbers its sentence needs (qmemo/core/refusals.py). */
typedef struct {
	uint8_t code;
	i128 a, b;
} refusal;

enum { S_UNDECIDED = 0, S_ACCEPTED = 1, S_DUPLICATE = 2, S_REJECTED = 3 };

/* --- the ledger ---------------------------------------------------------------------------- */

typedef struct {
	uint8_t known;     /* the chain knows this scheme id */
	uint8_t allowed;   /* and allows it for transactions */
	uint64_t public_key_bytes, min_signature_bytes, max_signature_bytes;
} scheme_rule;

typedef struct {
	uint8_t addr[ADDR_BYTES];
	uint64_t balance;
	uint64_t nonce;
} account;

enum { E_FREE = 0, E_PENDING = 1, E_HELD = 2 };

/* An accepted transaction: the kernel's record (offsets into `enc`), its bytes, its place. */
typedef struct {
	qmemo_admit_record rec;
	uint8_t *enc;       /* the canonical encoding (rec.record_length bytes), malloc'd */
	uint64_t seq;       /* FIFO sequence number while pending */
	double held_at;     /* when held (seconds, the caller's clock) */
	uint8_t state;      /* E_* */
	uint8_t relay;      /* held: relay it when it joins the pool */
	uint8_t in_block;   /* in the block being applied (ledger_block_applied) */
} entry;

/* One sender's pending transactions (consecutive nonces from its account's) and held ones. */
typedef struct {
	uint8_t addr[ADDR_BYTES];
	uint32_t *pending;
	uint32_t npending, cap_pending;
	u128 pending_cost;
	uint32_t *held;     /* by nonce, ascending */
	uint32_t nheld, cap_held;
	u128 held_cost;
	uint64_t stamp;     /* the pass that last looked at it (ledger_block_applied: each sender once) */
} sender_q;

typedef struct {
	uint32_t entry;
	uint64_t seq;
} fifo_item;

typedef struct ledger {
	/* the chain's rules (genesis) */
	uint32_t chain_id;
	uint64_t min_fee;
	/* a shard's chain (qmemo.core.shards): an account is this shard's if
	 * u32le(address[0:4]) % shard_count == shard_index; 0 shards: an unsharded chain */
	uint32_t shard_index, shard_count;
	scheme_rule schemes[256];
	/* limits: a client's batch fills the pending pool to max_*, a peer's relay (and what is
	 * in memory already: held ones joining, a reorganisation's re-adds) to relay_max_* */
	uint64_t max_txs, max_bytes;
	uint64_t relay_max_txs, relay_max_bytes;
	uint32_t max_per_sender;
	uint64_t held_window;
	uint32_t held_max, held_per_sender;
	/* accounts at the tip */
	account *accounts;
	uint32_t naccounts, cap_accounts;
	dmap account_index;
	/* the pool */
	entry *entries;
	uint32_t nentries, cap_entries;   /* slots used (free ones among them) */
	uint32_t *free_entries;
	uint32_t nfree, cap_free;
	dmap entry_index;                 /* id -> entry, pending and held */
	sender_q *senders;
	uint32_t nsenders, cap_senders;
	dmap sender_index;
	fifo_item *fifo;                  /* pending in arrival order, with stale items */
	uint32_t fifo_head, fifo_len, fifo_cap;
	uint64_t next_seq;
	uint32_t npending, nheld;
	uint64_t pending_bytes;
	uint64_t stamp;
	/* sets */
	idring inflight;   /* ids between a batch's checks and its commit */
	idring committed;  /* recently committed ids (a late copy is a duplicate) */
	idring evicted;    /* recently evicted ids -> reason */
	idring verified;   /* ids whose signature verified: under verified_lock */
	pthread_mutex_t verified_lock;
} ledger;

typedef struct {
	uint32_t chain_id;
	uint64_t min_fee;
	uint64_t max_txs, max_bytes;
	uint64_t relay_max_txs, relay_max_bytes;
	uint32_t max_per_sender;
	uint64_t held_window;
	uint32_t held_max, held_per_sender;
	uint32_t committed_memory, evicted_memory, verified_memory;
} ledger_config;

int ledger_init(ledger *l, const ledger_config *config);
void ledger_free(ledger *l);

/* accounts */
const account *ledger_account(const ledger *l, const uint8_t *addr);  /* NULL: absent (zero, nonce 0) */
int ledger_set_account(ledger *l, const uint8_t *addr, uint64_t balance, uint64_t nonce);
void ledger_remove_account(ledger *l, const uint8_t *addr);

/* the pool */
sender_q *ledger_sender(const ledger *l, const uint8_t *addr);
uint64_t ledger_pending_nonce(const ledger *l, const uint8_t *addr);
int ledger_verified(ledger *l, const uint8_t *id);                 /* locks */
int ledger_remember_verified(ledger *l, const uint8_t *ids, size_t count, size_t stride); /* locks */
void ledger_forget_verified(ledger *l, const uint8_t *id);        /* locks */
/* The same, for many at once: the caller holds the lock around them. */
void ledger_verified_lock(ledger *l);
void ledger_verified_unlock(ledger *l);
int ledger_verified_held(const ledger *l, const uint8_t *id);
int ledger_remember_verified_held(ledger *l, const uint8_t *id);  /* 0, or -1 out of memory */

/* What the pool evicted, and why (reported to the caller, for the metrics). */
typedef struct {
	uint8_t id[ID_BYTES];
	uint8_t reason;
} eviction;

typedef struct {
	eviction *items;
	size_t n, cap;
} evictions;

/* Admission of one batch (ledger_pool.c): the records of a body, decoded by the kernel. */
typedef struct {
	const uint8_t *body;
	size_t body_length;
	qmemo_admit_record *recs;
	size_t n;
	uint8_t *status;     /* S_* per record */
	refusal *why;        /* per record */
	uint32_t *candidates; /* positions sent to verification, in order */
	size_t ncand;
	int inflight;        /* the candidates' ids are in l->inflight */
	int relayed;         /* a peer's relay: judged against the relay caps */
} admit_batch;

int ledger_precheck(ledger *l, admit_batch *b);   /* 0, or -1 out of memory */
/* Commit after verification: outcomes set; `journal` gets the positions accepted (held
 * included, in input order), `relay_entries` the pool entries to relay. */
int ledger_commit(ledger *l, admit_batch *b, double now, int relay, uint32_t *journal, size_t *njournal,
                  uint32_t **relay_entries, size_t *nrelay, size_t *relay_cap, evictions *out);
void ledger_abandon(ledger *l, admit_batch *b);  /* drop the candidates from `inflight` */

/* The pool's answers to blocks */
int evictions_push(evictions *e, const uint8_t *id, uint8_t reason);
int ledger_evict(ledger *l, evictions *out, const uint8_t *id, uint8_t reason);

/* A block body as records over one buffer ([u32 length][transaction] each). */
typedef struct {
	const uint8_t *body;
	size_t body_length;
	qmemo_admit_record *recs; /* offsets into body */
	size_t n;
} block_view;

int ledger_block_applied(ledger *l, const block_view *v, double now, evictions *out, uint32_t **relay_entries,
                         size_t *nrelay, size_t *relay_cap);
int ledger_blocks_undone(ledger *l, const block_view *views, size_t nviews, evictions *out);
int ledger_expire_held(ledger *l, double older_than, evictions *out);
int ledger_promote(ledger *l, const uint8_t *sender, evictions *out, uint32_t **relay_entries, size_t *nrelay,
                   size_t *relay_cap);

/* Selecting and rebuilding blocks from the pool: the entries, in block order. */
size_t ledger_select(const ledger *l, size_t max_count, uint32_t *out);
int ledger_find_pending(const ledger *l, const uint8_t *id, uint32_t *entry_index); /* 1 found */

/* Applying a block body (ledger_apply.c). */
typedef struct {
	uint8_t *changed;     /* (address, u64 balance, u64 nonce) per touched account */
	size_t nchanged;
	uint8_t *undo;        /* (address, u8 existed, u64 balance, u64 nonce) per touched account, before */
	size_t nundo;
	u128 fees;
	/* on failure */
	uint8_t code;
	size_t position;      /* the transaction at fault, or SIZE_MAX for the block as a whole */
	refusal why;
} apply_result;

#define CHANGED_BYTES (ADDR_BYTES + 16)
#define CREDIT_BYTES (ADDR_BYTES + 8)   /* a cross-shard receipt's credit: (address, u64 amount) */
#define UNDO_BYTES (ADDR_BYTES + 1 + 16)

/* 0 applied; 1 refused (result->code, position, why); -1 out of memory; -2 a balance past
 * 2^64 (the genesis caps the supply below it: the ledger is inconsistent, nothing changed). `verify` checks a
 * signature the verified set does not hold (the kernel's table; NULL: such a signature is bad).
 * `credits` (ncredits x CREDIT_BYTES): the cross-shard receipts the block credits, checked
 * by the caller (qmemo.core.receipts), added after the transactions, before the fees. */
int ledger_apply(ledger *l, const block_view *v, uint32_t header_tx_count, const uint8_t *header_merkle_root,
                 uint32_t max_block_txs, const uint8_t *producer, const qmemo_admit_table *table,
                 const uint8_t *credits, size_t ncredits, apply_result *result);
/* Is this address one of this ledger's shard's (always, on an unsharded chain)? */
static inline int ledger_home(const ledger *l, const uint8_t *addr) {
	if (l->shard_count < 2) {
		return 1;
	}
	uint32_t prefix = (uint32_t) addr[0] | (uint32_t) addr[1] << 8 | (uint32_t) addr[2] << 16 |
	                  (uint32_t) addr[3] << 24;
	return prefix % l->shard_count == l->shard_index;
}
int ledger_undo(ledger *l, const uint8_t *undo, size_t nundo);
void apply_result_free(apply_result *result);

/* shared checks (ledger_pool.c) */
int check_form(const ledger *l, const qmemo_admit_record *rec, refusal *why);
int charge(i128 available, u128 next_nonce, const qmemo_admit_record *rec, u128 *cost, refusal *why);

static inline const uint8_t *entry_key_id(const ledger *l, uint32_t e) { return l->entries[e].rec.id; }
static inline const uint8_t *view_recipient(const block_view *v, size_t i) {
	return v->body + v->recs[i].record_offset + RECIPIENT_AT;
}

#endif /* QMEMO_LEDGER_H */
