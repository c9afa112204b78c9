/*
 * qmemo_admit.c - the admission kernel: framing, decoding, BLAKE3-512 digests, verification.
 *
 * See qmemo_admit.h for the contract. This file needs only BLAKE3's C code (built by
 * scripts/setup.sh from the crates.io `blake3` crate); liboqs comes in through the
 * adapter in qmemo_admit_oqs.c, so the fuzzer can build this file without it.
 *
 * Hostile input: the body comes straight from a client. All arithmetic on lengths is in
 * size_t on values bounded by the body's own length (< 4 GiB, checked on entry) plus
 * u16 fields, so no sum can wrap, and every read is preceded by a check that it ends
 * inside the body (or the record, which lies inside the body).
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c11 */
#include "qmemo_admit.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blake3.h"

/* The layout the Python binding reads ("<IIBBBBIQQQQIHHIHH64s64s32s"). */
_Static_assert(sizeof(qmemo_admit_record) == 224, "qmemo_admit_record must stay 224 bytes");
_Static_assert(offsetof(qmemo_admit_record, nonce) == 16, "nonce at 16");
_Static_assert(offsetof(qmemo_admit_record, public_key_offset) == 48, "public_key_offset at 48");
_Static_assert(offsetof(qmemo_admit_record, id) == 64, "id at 64");
_Static_assert(offsetof(qmemo_admit_record, sender) == 192, "sender at 192");

/* The derive_key contexts of qmemo/core/hashing.py's Domain: part of the protocol. */
static const char CONTEXT_TX_SIGNING[] = "qMEMO v1 transaction signing digest";
static const char CONTEXT_TX_ID[] = "qMEMO v1 transaction id";
static const char CONTEXT_ADDRESS[] = "qMEMO v1 account address";

/*
 * One hasher per domain, initialised once: blake3_hasher_init_derive_key hashes the
 * context string to a key every time, which costs as much as a short digest. Copying
 * the initialised prototype skips that. Only the bytes before cv_stack are copied: a
 * fresh hasher has cv_stack_len == 0 and BLAKE3 never reads the stack past
 * cv_stack_len, so the 1.7 KB stack need not be copied per digest.
 */
static blake3_hasher proto_signing, proto_id, proto_address;
static pthread_once_t protos_once = PTHREAD_ONCE_INIT;

static void init_protos(void) {
	blake3_hasher_init_derive_key(&proto_signing, CONTEXT_TX_SIGNING);
	blake3_hasher_init_derive_key(&proto_id, CONTEXT_TX_ID);
	blake3_hasher_init_derive_key(&proto_address, CONTEXT_ADDRESS);
}

static void hasher_from(blake3_hasher *hasher, const blake3_hasher *proto) {
	memcpy(hasher, proto, offsetof(blake3_hasher, cv_stack));
}

static uint64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static uint16_t le16(const uint8_t *p) { return (uint16_t) (p[0] | (p[1] << 8)); }
static uint32_t le32(const uint8_t *p) {
	return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16 | (uint32_t) p[3] << 24;
}
static uint64_t le64(const uint8_t *p) { return (uint64_t) le32(p) | (uint64_t) le32(p + 4) << 32; }

/* --- the verifier table ---------------------------------------------------------------- */

typedef struct {
	qmemo_admit_verify_fn verify;
	void *ctx;
	void (*free_ctx)(void *);
	int has_rule;
	qmemo_admit_length_rule rule;
	qmemo_admit_verify_many_fn many; /* NULL: one record per call */
} verifier_slot;

/*
 * Sender addresses, memoized like derive_address's lru_cache in Python: a sender signs
 * many transactions, and hashing its key (897 bytes for Falcon-512) was a third of the
 * kernel's cost besides the signature check. Direct-mapped on a hash of the key; an
 * entry is used only if the scheme id and the WHOLE key are equal, so a collision (even
 * a chosen one) costs a miss, never a wrong address. Guarded by one mutex, held only to
 * compare and copy, never while hashing.
 */
#define ADDRESS_CACHE_SLOTS 8192 /* as derive_address's cache: ~8 MB of Falcon-512 keys at most */
/* Longer keys are hashed every time, never kept: a client sending 64 KiB keys must not
 * make the cache hold 512 MB. 2,600 bytes covers every registered key up to ML-DSA-87's
 * 2,592 (MAYO-2's 4,912-byte keys are hashed each time): at most ~21 MB. */
#define ADDRESS_CACHE_MAX_KEY 2600

typedef struct {
	uint8_t *key;      /* scheme_id || public key, malloc'd; NULL: empty */
	size_t key_length;
	size_t key_capacity;
	uint8_t address[QMEMO_ADDRESS_BYTES];
} address_entry;

struct qmemo_admit_table {
	verifier_slot slots[256]; /* one per possible scheme_id byte */
	pthread_mutex_t address_lock;
	address_entry addresses[ADDRESS_CACHE_SLOTS];
};

qmemo_admit_table *qmemo_admit_table_new(void) {
	pthread_once(&protos_once, init_protos);
	qmemo_admit_table *table = calloc(1, sizeof(qmemo_admit_table));
	if (table && pthread_mutex_init(&table->address_lock, NULL) != 0) {
		free(table);
		return NULL;
	}
	return table;
}

static void clear_slot(verifier_slot *slot) {
	if (slot->free_ctx && slot->ctx) {
		slot->free_ctx(slot->ctx);
	}
	memset(slot, 0, sizeof *slot);
}

void qmemo_admit_table_free(qmemo_admit_table *table) {
	if (!table) {
		return;
	}
	for (size_t i = 0; i < 256; i++) {
		clear_slot(&table->slots[i]);
	}
	for (size_t i = 0; i < ADDRESS_CACHE_SLOTS; i++) {
		free(table->addresses[i].key);
	}
	pthread_mutex_destroy(&table->address_lock);
	free(table);
}

int qmemo_admit_table_set_with_rule(qmemo_admit_table *table, uint8_t scheme_id, qmemo_admit_verify_fn verify,
                                    void *ctx, void (*free_ctx)(void *), const qmemo_admit_length_rule *rule) {
	if (!table || !verify ||
	        (rule && (rule->min_signature_bytes < 1 || rule->min_signature_bytes > rule->max_signature_bytes))) {
		return -1;
	}
	clear_slot(&table->slots[scheme_id]);
	table->slots[scheme_id] = (verifier_slot){verify, ctx, free_ctx, rule != NULL,
	                                          rule ? *rule : (qmemo_admit_length_rule){0, 0, 0}, NULL};
	return 0;
}

int qmemo_admit_table_set(qmemo_admit_table *table, uint8_t scheme_id, qmemo_admit_verify_fn verify, void *ctx,
                          void (*free_ctx)(void *)) {
	return qmemo_admit_table_set_with_rule(table, scheme_id, verify, ctx, free_ctx, NULL);
}

int qmemo_admit_table_set_many(qmemo_admit_table *table, uint8_t scheme_id, qmemo_admit_verify_many_fn many) {
	if (!table || !many || !table->slots[scheme_id].verify) {
		return -1;
	}
	table->slots[scheme_id].many = many;
	return 0;
}

/* --- the fast Falcon verifier's slot ------------------------------------------------------ */

typedef struct {
	qmemo_admit_qfv_fn verify;
	void *cache; /* the caller's qfv_cache: never freed here */
	int variant;
} qfv_slot;

static int qfv_verify(void *ctx, const uint8_t *public_key, size_t public_key_length, const uint8_t *message,
                      size_t message_length, const uint8_t *signature, size_t signature_length) {
	const qfv_slot *slot = ctx;
	return slot->verify(slot->cache, slot->variant, public_key, public_key_length, message, message_length,
	                    signature, signature_length) == 1;
}

int qmemo_admit_table_set_qfv(qmemo_admit_table *table, uint8_t scheme_id, qmemo_admit_qfv_fn verify, void *cache,
                              int variant, const qmemo_admit_length_rule *rule) {
	if (!table || !verify || !rule) {
		return -1;
	}
	qfv_slot *slot = malloc(sizeof *slot);
	if (!slot) {
		return -1;
	}
	*slot = (qfv_slot){verify, cache, variant};
	int rc = qmemo_admit_table_set_with_rule(table, scheme_id, qfv_verify, slot, free, rule);
	if (rc != 0) {
		free(slot);
	}
	return rc;
}

/* --- sender addresses ------------------------------------------------------------------ */

/* FNV-1a over the scheme id, the length and up to 32 key bytes from each end: cheap, and
 * a chosen collision only evicts (see address_entry). */
static size_t address_slot(uint8_t scheme_id, const uint8_t *key, size_t length) {
	uint64_t h = 14695981039346656037u;
	h = (h ^ scheme_id) * 1099511628211u;
	h = (h ^ length) * 1099511628211u;
	size_t head = length < 32 ? length : 32;
	for (size_t i = 0; i < head; i++) h = (h ^ key[i]) * 1099511628211u;
	for (size_t i = length - head; i < length; i++) h = (h ^ key[i]) * 1099511628211u;
	return (size_t) (h ^ (h >> 29)) % ADDRESS_CACHE_SLOTS;
}

static int entry_holds(const address_entry *entry, uint8_t scheme_id, const uint8_t *key, size_t length) {
	return entry->key && entry->key_length == length + 1 && entry->key[0] == scheme_id &&
	       memcmp(entry->key + 1, key, length) == 0;
}

/* sender = H(ADDRESS, scheme_id || public_key)[:32]; BLAKE3's output is a prefix-stable XOF. */
static void sender_address(qmemo_admit_table *table, uint8_t scheme_id, const uint8_t *key, size_t length,
                           uint8_t out[QMEMO_ADDRESS_BYTES]) {
	address_entry *entry = NULL;
	if (table && length <= ADDRESS_CACHE_MAX_KEY) {
		entry = &table->addresses[address_slot(scheme_id, key, length)];
		pthread_mutex_lock(&table->address_lock);
		int hit = entry_holds(entry, scheme_id, key, length);
		if (hit) {
			memcpy(out, entry->address, QMEMO_ADDRESS_BYTES);
		}
		pthread_mutex_unlock(&table->address_lock);
		if (hit) {
			return;
		}
	}
	blake3_hasher hasher;
	hasher_from(&hasher, &proto_address);
	blake3_hasher_update(&hasher, &scheme_id, 1);
	blake3_hasher_update(&hasher, key, length);
	blake3_hasher_finalize(&hasher, out, QMEMO_ADDRESS_BYTES);
	if (!entry) {
		return;
	}
	pthread_mutex_lock(&table->address_lock);
	if (entry->key_capacity < length + 1) {
		uint8_t *grown = realloc(entry->key, length + 1);
		if (!grown) { /* out of memory: keep the old entry, the address is right anyway */
			pthread_mutex_unlock(&table->address_lock);
			return;
		}
		entry->key = grown;
		entry->key_capacity = length + 1;
	}
	entry->key[0] = scheme_id;
	memcpy(entry->key + 1, key, length);
	entry->key_length = length + 1;
	memcpy(entry->address, out, QMEMO_ADDRESS_BYTES);
	pthread_mutex_unlock(&table->address_lock);
}

/* --- one record ------------------------------------------------------------------------ */

/*
 * Decode record [offset, offset + size) of `body` with Transaction.decode's checks, in
 * its order (the first failing check names the error), and compute its digests.
 */
static void decode_record(qmemo_admit_table *table, const uint8_t *body, size_t offset, size_t size,
                          qmemo_admit_record *out) {
	const uint8_t *data = body + offset;
	memset(out, 0, sizeof *out);
	out->record_offset = (uint32_t) offset;
	out->record_length = (uint32_t) size;
	if (size < QMEMO_TX_FIXED_BYTES) {
		out->status = QMEMO_ADMIT_TRUNCATED;
		return;
	}
	if (data[0] != QMEMO_TX_VERSION) {
		out->status = QMEMO_ADMIT_UNSUPPORTED_VERSION;
		return;
	}
	size_t pk_length = le16(data + 62), payload_length = le16(data + 64);
	if (payload_length > QMEMO_TX_MAX_PAYLOAD) {
		out->status = QMEMO_ADMIT_OVERSIZED;
		return;
	}
	/* At most 66 + 65535 + 1024 + 2: no overflow. */
	size_t unsigned_end = QMEMO_TX_FIXED_BYTES + pk_length + payload_length;
	if (size < unsigned_end + 2) {
		out->status = QMEMO_ADMIT_TRUNCATED;
		return;
	}
	size_t signature_length = le16(data + unsigned_end);
	size_t end = unsigned_end + 2 + signature_length;
	if (size != end) {
		out->status = size < end ? QMEMO_ADMIT_TRUNCATED : QMEMO_ADMIT_TRAILING_BYTES;
		return;
	}
	out->status = QMEMO_ADMIT_DECODED;
	out->chain_id = le32(data + 1);
	out->scheme_id = data[5];
	out->nonce = le64(data + 6);
	out->amount = le64(data + 46);
	out->fee = le64(data + 54);
	out->public_key_offset = (uint32_t) (offset + QMEMO_TX_FIXED_BYTES);
	out->public_key_length = (uint16_t) pk_length;
	out->payload_length = (uint16_t) payload_length;
	out->signature_offset = (uint32_t) (offset + unsigned_end + 2);
	out->signature_length = (uint16_t) signature_length;

	blake3_hasher hasher;
	hasher_from(&hasher, &proto_signing);
	blake3_hasher_update(&hasher, data, unsigned_end);
	blake3_hasher_finalize(&hasher, out->signing_digest, QMEMO_DIGEST_BYTES);
	/* id = H(TX_ID, signing digest || u16 signature_length || signature) */
	hasher_from(&hasher, &proto_id);
	blake3_hasher_update(&hasher, out->signing_digest, QMEMO_DIGEST_BYTES);
	blake3_hasher_update(&hasher, data + unsigned_end, 2 + signature_length);
	blake3_hasher_finalize(&hasher, out->id, QMEMO_DIGEST_BYTES);
	sender_address(table, out->scheme_id, data + QMEMO_TX_FIXED_BYTES, pk_length, out->sender);
}

/* The scheme's length rule (as qmemo_batch.c): a verifier is never called on lengths it refuses. */
static int lengths_fit(const verifier_slot *slot, const qmemo_admit_record *record) {
	const qmemo_admit_length_rule *rule = &slot->rule;
	return !(slot->has_rule && (record->public_key_length != rule->public_key_bytes ||
	                            record->signature_length < rule->min_signature_bytes ||
	                            record->signature_length > rule->max_signature_bytes));
}

/* Verify a decoded record whose fields are known to lie inside the body. */
static int verify_record(const qmemo_admit_table *table, const uint8_t *body, qmemo_admit_record *record) {
	const verifier_slot *slot = &table->slots[record->scheme_id];
	if (!slot->verify) {
		record->verdict = QMEMO_ADMIT_NO_VERIFIER;
		return 0;
	}
	uint64_t started = now_ns();
	int good = lengths_fit(slot, record) &&
	           slot->verify(slot->ctx, body + record->public_key_offset, record->public_key_length,
	                        record->signing_digest, QMEMO_DIGEST_BYTES, body + record->signature_offset,
	                        record->signature_length) == 1;
	record->verify_ns = now_ns() - started;
	record->verdict = good ? QMEMO_ADMIT_VALID : QMEMO_ADMIT_INVALID;
	return good;
}

/* --- the batch ------------------------------------------------------------------------- */

/*
 * decode_frames's loop, counting only. Checks in its order: the count limit (only while
 * bytes remain), then the prefix, then the length.
 */
static int split_frames(const uint8_t *body, size_t body_length, size_t max_count, size_t *count, uint64_t *detail) {
	size_t offset = 0, n = 0;
	while (offset < body_length) {
		if (n >= max_count) {
			*count = n;
			return QMEMO_ADMIT_FRAME_TOO_MANY;
		}
		if (body_length - offset < QMEMO_FRAME_PREFIX_BYTES) {
			*count = n;
			return QMEMO_ADMIT_FRAME_TRUNCATED_PREFIX;
		}
		size_t start = offset + QMEMO_FRAME_PREFIX_BYTES;
		size_t length = le32(body + offset);
		if (length > body_length - start) {
			*count = n;
			*detail = (uint64_t) start + length - body_length; /* start + length < 2^33: no wrap */
			return QMEMO_ADMIT_FRAME_PAST_BODY;
		}
		offset = start + length;
		n++;
	}
	*count = n;
	return QMEMO_ADMIT_OK;
}

/* Argument checks and the framing pass; also qmemo_admit_batch's first step. */
int qmemo_admit_count(const uint8_t *body, size_t body_length, size_t max_count, size_t *count, uint64_t *detail) {
	uint64_t ignored_detail = 0;
	size_t n = 0;
	if (!count) {
		return QMEMO_ADMIT_BAD_ARGUMENT;
	}
	*count = 0;
	if (!detail) {
		detail = &ignored_detail;
	}
	*detail = 0;
	/* Offsets are u32 in the records: a body of 4 GiB or more is refused (the node's limit is 16 MiB). */
	if ((!body && body_length) || body_length > UINT32_MAX) {
		return QMEMO_ADMIT_BAD_ARGUMENT;
	}
	int rc = split_frames(body, body_length, max_count, &n, detail);
	*count = n;
	return rc;
}

int qmemo_admit_batch(qmemo_admit_table *table, const uint8_t *body, size_t body_length, uint32_t chain_id,
                      size_t max_count, unsigned flags, qmemo_admit_record *out, size_t out_capacity,
                      size_t *count, uint64_t *detail) {
	size_t n = 0;
	int rc = qmemo_admit_count(body, body_length, max_count, &n, detail);
	if (rc != QMEMO_ADMIT_OK) {
		if (count) {
			*count = n; /* the failing frame's index */
		}
		return rc;
	}
	if (!count || n > out_capacity || (n && !out)) {
		return QMEMO_ADMIT_BAD_ARGUMENT;
	}
	pthread_once(&protos_once, init_protos);
	/* The frames are valid: walk them again, now decoding into `out`. */
	size_t offset = 0;
	int verify = table && (flags & QMEMO_ADMIT_VERIFY);
	for (size_t i = 0; i < n; i++) {
		size_t length = le32(body + offset);
		qmemo_admit_record *record = &out[i];
		decode_record(table, body, offset + QMEMO_FRAME_PREFIX_BYTES, length, record);
		offset += QMEMO_FRAME_PREFIX_BYTES + length;
		if (record->status != QMEMO_ADMIT_DECODED) {
			continue;
		}
		if (record->chain_id != chain_id) {
			record->verdict = QMEMO_ADMIT_WRONG_CHAIN_ID;
		}
	}
	if (verify) { /* all decoded first: a many-at-once verifier gets the whole batch */
		qmemo_admit_verify(table, body, body_length, out, n, NULL);
	}
	*count = n;
	return QMEMO_ADMIT_OK;
}

/* Does [offset, offset + length) lie inside a body of body_length bytes? */
static int inside(uint64_t offset, uint64_t length, size_t body_length) {
	return offset <= body_length && length <= body_length - offset;
}

/* Chunk of a many-at-once verifier's call: a multiple of four, and the stack's worth. */
#define MANY_CHUNK 64

/* The records of one many-at-once slot, `picked` (in the body, lengths fitting), in chunks. */
static size_t verify_many(const verifier_slot *slot, const uint8_t *body, qmemo_admit_record *records,
                          const size_t *picked, size_t count) {
	qmemo_admit_item items[MANY_CHUNK];
	uint8_t ok[MANY_CHUNK];
	size_t valid = 0;
	for (size_t first = 0; first < count; first += MANY_CHUNK) {
		size_t n = count - first < MANY_CHUNK ? count - first : MANY_CHUNK;
		for (size_t k = 0; k < n; k++) {
			const qmemo_admit_record *r = &records[picked[first + k]];
			items[k] = (qmemo_admit_item){body + r->public_key_offset, r->public_key_length, r->signing_digest,
			                              QMEMO_DIGEST_BYTES, body + r->signature_offset, r->signature_length};
		}
		uint64_t started = now_ns();
		slot->many(slot->ctx, items, n, ok);
		uint64_t share = (now_ns() - started) / n; /* four share each hash: no verify has a time of its own */
		for (size_t k = 0; k < n; k++) {
			qmemo_admit_record *r = &records[picked[first + k]];
			r->verify_ns = share;
			r->verdict = ok[k] == 1 ? QMEMO_ADMIT_VALID : QMEMO_ADMIT_INVALID;
			valid += ok[k] == 1;
		}
	}
	return valid;
}

/* Records of schemes with a many-at-once verifier, scheme by scheme; the rest are left to
 * the one-by-one loop. A record the length rule refuses is INVALID here without a call. */
static size_t verify_grouped(const qmemo_admit_table *table, const uint8_t *body, size_t body_length,
                             qmemo_admit_record *records, size_t count, const uint8_t *select) {
	size_t valid = 0, *picked = NULL, scheme = 0;
	for (; scheme < 256 && !table->slots[scheme].many; scheme++) {
	}
	if (scheme == 256 || !(picked = malloc(count * sizeof *picked))) {
		return 0; /* none (or no memory: then every record goes one by one) */
	}
	for (; scheme < 256; scheme++) {
		const verifier_slot *slot = &table->slots[scheme];
		size_t n = 0;
		for (size_t i = 0; slot->many && i < count; i++) {
			qmemo_admit_record *record = &records[i];
			if ((select && !select[i]) || record->status != QMEMO_ADMIT_DECODED ||
			        record->verdict != QMEMO_ADMIT_NOT_CHECKED || record->scheme_id != scheme) {
				continue;
			}
			if (!inside(record->public_key_offset, record->public_key_length, body_length) ||
			        !inside(record->signature_offset, record->signature_length, body_length) ||
			        !lengths_fit(slot, record)) {
				record->verdict = QMEMO_ADMIT_INVALID;
				continue;
			}
			picked[n++] = i;
		}
		valid += verify_many(slot, body, records, picked, n);
	}
	free(picked);
	return valid;
}

size_t qmemo_admit_verify(const qmemo_admit_table *table, const uint8_t *body, size_t body_length,
                          qmemo_admit_record *records, size_t count, const uint8_t *select) {
	size_t valid = 0;
	if (!table || !records || !body) {
		return 0;
	}
	valid += verify_grouped(table, body, body_length, records, count, select);
	for (size_t i = 0; i < count; i++) {
		qmemo_admit_record *record = &records[i];
		if ((select && !select[i]) || record->status != QMEMO_ADMIT_DECODED ||
		        record->verdict != QMEMO_ADMIT_NOT_CHECKED) {
			continue;
		}
		if (!inside(record->public_key_offset, record->public_key_length, body_length) ||
		        !inside(record->signature_offset, record->signature_length, body_length)) {
			record->verdict = QMEMO_ADMIT_INVALID;
			continue;
		}
		valid += (size_t) verify_record(table, body, record);
	}
	return valid;
}

size_t qmemo_admit_record_size(void) { return sizeof(qmemo_admit_record); }

const char *qmemo_admit_blake3_version(void) { return blake3_version(); }
