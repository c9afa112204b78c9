/*
 * qmemo_admit.h - the native admission kernel: one call per POST /txs batch.
 *
 * Why: a node spent most of its admission CPU in Python (decoding each transaction,
 * three BLAKE3-512 digests through the blake3 package, object construction) besides the
 * signature check itself. This kernel takes exactly the bytes of a binary POST /txs
 * body, splits its `[u32 LE length][record]` frames, decodes every record with the
 * rules of `Transaction.decode`, computes the signing digest, the id and the sender
 * address with BLAKE3's official C code, and verifies the signature through a
 * per-scheme verifier table - returning one fixed-size result record per transaction.
 *
 * The rules live twice (here and in qmemo/core/transaction.py, qmemo/frames.py);
 * tests/vectors/admit_kernel.json holds one case table that both are checked against,
 * plus hypothesis and libFuzzer runs (docs/methodology.md, "The admission kernel").
 *
 * Never reads outside `body`, whatever its bytes say; every length is checked before use
 * with arithmetic that cannot overflow. Thread-safe: set a table's verifiers up before
 * sharing it; after that the only thing a call changes in it is its cache of sender
 * addresses, which a mutex guards.
 */
#ifndef QMEMO_ADMIT_H
#define QMEMO_ADMIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Sizes from docs/protocol.md, section 5. */
#define QMEMO_TX_VERSION 1
#define QMEMO_TX_FIXED_BYTES 66      /* version .. payload_length */
#define QMEMO_TX_MAX_PAYLOAD 1024    /* MAX_PAYLOAD_BYTES */
#define QMEMO_DIGEST_BYTES 64        /* BLAKE3-512 */
#define QMEMO_ADDRESS_BYTES 32
#define QMEMO_FRAME_PREFIX_BYTES 4   /* the u32 LE length of a frame */

/* Per record: did it decode (the codes Transaction.decode raises). */
enum qmemo_admit_status {
	QMEMO_ADMIT_DECODED = 0,
	QMEMO_ADMIT_TRUNCATED = 1,            /* "truncated" */
	QMEMO_ADMIT_UNSUPPORTED_VERSION = 2,  /* "unsupported_version" */
	QMEMO_ADMIT_OVERSIZED = 3,            /* "oversized" */
	QMEMO_ADMIT_TRAILING_BYTES = 4,       /* "trailing_bytes" */
};

/* Per decoded record: what became of its signature. */
enum qmemo_admit_verdict {
	QMEMO_ADMIT_NOT_CHECKED = 0,     /* not decoded, or verification not asked for */
	QMEMO_ADMIT_VALID = 1,
	QMEMO_ADMIT_INVALID = 2,         /* the verifier said no (including its length rules) */
	QMEMO_ADMIT_WRONG_CHAIN_ID = 3,  /* signed for another chain: never verified */
	QMEMO_ADMIT_NO_VERIFIER = 4,     /* no verifier set for its scheme id: never verified */
};

/* What a whole call returns (framing is all-or-nothing, like decode_frames). */
enum qmemo_admit_rc {
	QMEMO_ADMIT_OK = 0,
	QMEMO_ADMIT_FRAME_TRUNCATED_PREFIX = 1, /* fewer than 4 bytes left for a length */
	QMEMO_ADMIT_FRAME_PAST_BODY = 2,        /* a length runs past the body */
	QMEMO_ADMIT_FRAME_TOO_MANY = 3,         /* more than max_count records: batch_too_large */
	QMEMO_ADMIT_BAD_ARGUMENT = 4,           /* caller's misuse: NULL, output too small, body >= 4 GiB */
};

/*
 * One result, 224 bytes, little-endian on the platforms we build for (x86-64, aarch64).
 * qmemo/crypto/admit_kernel.py reads an array of these with one struct.iter_unpack;
 * its format string and this layout are checked against each other by
 * qmemo_admit_record_size() and the offsets test. Offsets are into the body, so the
 * caller can slice the record (and its recipient, at record_offset + 14, or its payload,
 * right after the public key) without copying anything here.
 * For a record that did not decode only record_offset, record_length and status are set.
 */
typedef struct {
	uint32_t record_offset;       /* first byte of the record, after its length prefix */
	uint32_t record_length;
	uint8_t status;               /* enum qmemo_admit_status */
	uint8_t verdict;              /* enum qmemo_admit_verdict */
	uint8_t scheme_id;
	uint8_t reserved0;
	uint32_t chain_id;
	uint64_t nonce;
	uint64_t amount;
	uint64_t fee;
	uint64_t verify_ns;           /* the verify call's duration, CLOCK_MONOTONIC; 0 if none */
	uint32_t public_key_offset;   /* into the body */
	uint16_t public_key_length;
	uint16_t payload_length;      /* the payload follows the public key */
	uint32_t signature_offset;    /* into the body */
	uint16_t signature_length;
	uint16_t reserved1;
	uint8_t id[QMEMO_DIGEST_BYTES];
	uint8_t signing_digest[QMEMO_DIGEST_BYTES];
	uint8_t sender[QMEMO_ADDRESS_BYTES];
} qmemo_admit_record;

/*
 * A verifier: 1 for a valid signature of `message` by `public_key`, 0 for anything else
 * (it applies its scheme's length rules itself and never crashes on bad lengths).
 * `ctx` is what was registered with it. Called concurrently when the table is shared.
 */
typedef int (*qmemo_admit_verify_fn)(void *ctx, const uint8_t *public_key, size_t public_key_length,
                                     const uint8_t *message, size_t message_length,
                                     const uint8_t *signature, size_t signature_length);

typedef struct qmemo_admit_table qmemo_admit_table;

/*
 * A scheme's length rule, as data: a key of exactly public_key_bytes, a signature of
 * min_signature_bytes..max_signature_bytes (min == max for a fixed-length scheme). It is
 * decided in one place, qmemo.core.scheme_rules.SchemeRules, and handed down by the
 * binding (as qmemo_batch.c's qmemo_length_rule is), never written again in C. A slot
 * with a rule answers INVALID without calling its verifier for lengths the rule refuses.
 */
typedef struct {
	uint64_t public_key_bytes;
	uint64_t min_signature_bytes;
	uint64_t max_signature_bytes;
} qmemo_admit_length_rule;

qmemo_admit_table *qmemo_admit_table_new(void);   /* every scheme id without a verifier; NULL if out of memory */
void qmemo_admit_table_free(qmemo_admit_table *table); /* frees each ctx with its free_ctx; NULL is fine */

/*
 * Set the verifier of one scheme id (replacing, and freeing, an earlier one). The table
 * owns `ctx` from here on: free_ctx(ctx) runs when it is replaced or the table freed
 * (free_ctx may be NULL). `rule` (copied; NULL: none, the verifier applies its own) is
 * checked before every call. Returns 0, or -1 for a NULL table or verify function or a
 * rule that allows an empty signature or has min > max.
 */
int qmemo_admit_table_set_with_rule(qmemo_admit_table *table, uint8_t scheme_id, qmemo_admit_verify_fn verify,
                                    void *ctx, void (*free_ctx)(void *), const qmemo_admit_length_rule *rule);

/* qmemo_admit_table_set_with_rule without a rule. */
int qmemo_admit_table_set(qmemo_admit_table *table, uint8_t scheme_id, qmemo_admit_verify_fn verify, void *ctx,
                          void (*free_ctx)(void *));

/*
 * The liboqs adapter (qmemo_admit_oqs.c): verify `scheme_id` with the liboqs method
 * `method_name` ("Falcon-512", ...) under `rule` (required: liboqs trusts the caller for
 * the public key's length). 0; -1 if liboqs lacks the method (or NULL arguments); -2 if
 * the rule does not fit liboqs's sizes (a key length other than liboqs's, a signature
 * longer than its maximum, an empty one allowed).
 */
int qmemo_admit_table_set_oqs(qmemo_admit_table *table, uint8_t scheme_id, const char *method_name,
                              const qmemo_admit_length_rule *rule);

/*
 * The fast Falcon verifier's slot: `verify` is the address of libqmemo_falcon.so's
 * qfv_verify_cached (falcon_vt.h; taken as a pointer so this library never links the
 * verifier), called as verify(cache, variant, pk, pk_len, msg, msg_len, sig, sig_len)
 * under `rule` (required; qMEMO's exact length for padded Falcon is in it). `cache`
 * (a qfv_cache *, may be NULL) stays the caller's: it must outlive the slot, and the
 * node shares it with its registry verifier, so one key cache serves both.
 */
typedef int (*qmemo_admit_qfv_fn)(void *cache, int variant, const uint8_t *pk, size_t pk_len, const uint8_t *msg,
                                  size_t msg_len, const uint8_t *sig, size_t sig_len);

int qmemo_admit_table_set_qfv(qmemo_admit_table *table, uint8_t scheme_id, qmemo_admit_qfv_fn verify, void *cache,
                              int variant, const qmemo_admit_length_rule *rule);

/*
 * A verifier that takes many signatures at once (the fast Falcon verifier hashes four
 * together: falcon_vt.h's qfv_admit_verify_many). Items have falcon_vt.h's qfv_item layout,
 * field for field. `ok[i]` gets 1 for a valid signature, 0 otherwise.
 */
typedef struct {
	const uint8_t *public_key;
	size_t public_key_length;
	const uint8_t *message;
	size_t message_length;
	const uint8_t *signature;
	size_t signature_length;
} qmemo_admit_item;

typedef void (*qmemo_admit_verify_many_fn)(void *ctx, const qmemo_admit_item *items, size_t count, uint8_t *ok);

/*
 * Give the verifier already set for `scheme_id` a many-at-once entry, called with its
 * ctx: then the records of that scheme a call verifies go to `many` in chunks (after the
 * slot's length rule, which refuses its misfits without calling either), each record
 * timed as its chunk's duration shared out. 0; -1 for a NULL table or function, or a
 * scheme id without a verifier. Replacing or clearing the slot drops it.
 */
int qmemo_admit_table_set_many(qmemo_admit_table *table, uint8_t scheme_id, qmemo_admit_verify_many_fn many);

/* Flags of qmemo_admit_batch. */
#define QMEMO_ADMIT_VERIFY 1u   /* verify every decoded record of the right chain */

/*
 * Admit one framed batch body.
 *
 * Framing first, over the whole body, with decode_frames's rules and order: while bytes
 * remain, more than `max_count` records is QMEMO_ADMIT_FRAME_TOO_MANY, fewer than 4
 * bytes a truncated prefix, a length past the end FRAME_PAST_BODY. On a framing error
 * nothing is decoded or hashed, *count is the failing frame's index and *detail (for
 * FRAME_PAST_BODY) how many bytes the frame runs past the body.
 *
 * Then each record: decoded, hashed and (with QMEMO_ADMIT_VERIFY and a table) verified;
 * `table` may be NULL (no verification, no address cache: every sender is hashed);
 * a record that does not decode is that record's status, never the batch's.
 * On QMEMO_ADMIT_OK, *count records are in out[0..*count). `out_capacity` records must be
 * room enough: qmemo_admit_count's answer is exactly enough; min(max_count,
 * body_length / 4) always is (every frame takes >= 4 bytes).
 */
int qmemo_admit_batch(qmemo_admit_table *table, const uint8_t *body, size_t body_length, uint32_t chain_id,
                      size_t max_count, unsigned flags, qmemo_admit_record *out, size_t out_capacity,
                      size_t *count, uint64_t *detail);

/*
 * Only the framing pass of qmemo_admit_batch: same return codes, *count and *detail.
 * On QMEMO_ADMIT_OK, *count is how many records qmemo_admit_batch will write, so a caller
 * can allocate exactly that (framing reads only the length prefixes; zeroing room for max_count
 * records cost more than decoding them when max_count was large).
 */
int qmemo_admit_count(const uint8_t *body, size_t body_length, size_t max_count, size_t *count, uint64_t *detail);

/*
 * Verify, later, records an earlier qmemo_admit_batch over the same body left
 * NOT_CHECKED (a caller that drops duplicates and cheap rule failures before paying for
 * a signature). Only records with select[i] != 0 (every one if select is NULL), status
 * DECODED and verdict NOT_CHECKED are verified; their offsets are checked against the
 * body again, so a tampered record is INVALID, never a read outside the body. Returns the
 * number found valid.
 */
size_t qmemo_admit_verify(const qmemo_admit_table *table, const uint8_t *body, size_t body_length,
                          qmemo_admit_record *records, size_t count, const uint8_t *select);

/*
 * The classical baselines' slot (qmemo_admit_classical.c): `which` is "ed" (Ed25519 on
 * libsodium) or "k1" (ECDSA secp256k1 on libsecp256k1, SHA-256 of the message, compact
 * low-S signatures), under `rule` (required). 0, or -1 for an unknown `which`, NULL
 * arguments or a libsodium that will not start.
 */
int qmemo_admit_table_set_classical(qmemo_admit_table *table, uint8_t scheme_id, const char *which,
                                    const qmemo_admit_length_rule *rule);

/*
 * The Merkle root of `count` 64-byte transaction ids laid end to end (qmemo/core/merkle.py's
 * merkle_root, which is the reference) into root[0..64). 0; -1 for bad arguments; -2 out of memory.
 */
int qmemo_admit_merkle_root(const uint8_t *ids, size_t count, uint8_t *root);

/* sizeof(qmemo_admit_record), for the binding to check its layout against. */
size_t qmemo_admit_record_size(void);

/* The BLAKE3 C code's version ("1.8.7"), for benchmark JSON. */
const char *qmemo_admit_blake3_version(void);

#ifdef __cplusplus
}
#endif

#endif /* QMEMO_ADMIT_H */
