/*
 * ledger_codes.h - GENERATED from qmemo/core/refusals.py's RULES by
 * `python -m qmemo.node.ledger_codes`: edit the table, not this file.
 *
 * X(C_<RULE>, "<error code>") for every refusal and eviction the ledger reports, in
 * the order of their numbers (0 is C_NONE). ledger.h makes the enum from it,
 * ledger_module.c the names Python reads the numbers by.
 */
#ifndef QMEMO_LEDGER_CODES_H
#define QMEMO_LEDGER_CODES_H

#define QMEMO_LEDGER_CODES(X) \
	/* Transaction.decode's errors */ \
	X(C_TRUNCATED, "truncated") \
	X(C_UNSUPPORTED_VERSION, "unsupported_version") \
	X(C_OVERSIZED, "oversized") \
	X(C_TRAILING_BYTES, "trailing_bytes") \
	/* a transaction's rules (check_transaction_form, charge, Mempool.check, the held queue) */ \
	X(C_WRONG_CHAIN_ID, "wrong_chain_id") \
	X(C_UNKNOWN_SCHEME, "unknown_scheme") \
	X(C_SCHEME_NOT_ALLOWED, "scheme_not_allowed") \
	X(C_BAD_PUBLIC_KEY_LENGTH, "bad_public_key_length") \
	X(C_SIGNATURE_TOO_LONG, "signature_too_long") \
	X(C_BAD_SIGNATURE_LENGTH, "bad_signature_length") \
	X(C_FEE_TOO_LOW, "fee_too_low") \
	X(C_REPLAYED_NONCE, "replayed_nonce") \
	X(C_NONCE_GAP, "nonce_gap") \
	X(C_AMOUNT_OVERFLOW, "amount_overflow") \
	X(C_INSUFFICIENT_BALANCE, "insufficient_balance") \
	X(C_NONCE_CONFLICT, "nonce_conflict") \
	X(C_SENDER_LIMIT, "sender_limit") \
	X(C_MEMPOOL_FULL, "mempool_full") \
	X(C_HELD_SENDER_LIMIT, "held_sender_limit") \
	X(C_HELD_FULL, "held_full") \
	X(C_HELD_NONCE_CONFLICT, "nonce_conflict") \
	X(C_BAD_SIGNATURE, "bad_signature") \
	/* the pool's evictions */ \
	X(C_NONCE_STALE, "nonce_stale") \
	X(C_NONCE_GAP_TIMEOUT, "nonce_gap_timeout") \
	/* a block's body */ \
	X(C_WRONG_TX_COUNT, "wrong_tx_count") \
	X(C_TOO_MANY_TRANSACTIONS, "too_many_transactions") \
	X(C_WRONG_MERKLE_ROOT, "wrong_merkle_root") \
	X(C_DUPLICATE_TRANSACTION, "duplicate_transaction") \

#endif
