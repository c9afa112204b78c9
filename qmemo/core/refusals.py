"""The sentence and the error of every rule a transaction or a block body can break.

One place for the text, reached by rule name and the two numbers the sentence needs:
the Python rules (`check_transaction_form` and `charge` in qmemo.core.state, `Mempool`,
`HeldQueue`, `apply_block`) raise what `refusal` builds, and the node's native ledger
(qmemo/node/native) reports each refusal as its rule and the same two numbers, which
qmemo.node.ledger turns into the same error through this module. So a client reads the
same `code` and `detail` whichever implementation judged its transaction, and the
differential tests compare both.

Pure: no I/O; the genesis is handed in (scheme names and sizes, the chain id, the fee).
"""

from __future__ import annotations

from qmemo.core.genesis import Genesis
from qmemo.errors import InvalidBlock, InvalidReceipt, InvalidTransaction, MempoolFull, QmemoError

# A rule whose error code is another's: the held queue's own nonce conflict.
HELD_NONCE_CONFLICT = "held_nonce_conflict"
# The receipt rules' sentences that share a code with another: headers that do not link
# fail finality as much as too few producers do; a transaction of another chain fails its proof.
RECEIPT_UNLINKED = "receipt_unlinked"
RECEIPT_OTHER_CHAIN = "receipt_other_chain"


def _scheme_name(genesis: Genesis | None, scheme_id: int) -> str:
    rules = genesis.schemes.get(scheme_id) if genesis is not None else None
    return rules.name if rules is not None else f"scheme {scheme_id}"


def refusal(rule: str, a: int = 0, b: int = 0, genesis: Genesis | None = None) -> QmemoError:
    """The error for a broken transaction rule, its sentence built from `a` and `b`
    (what each means is in the table below). Unknown rules are our bug: ValueError."""
    rules = genesis.schemes.get(a) if genesis is not None else None
    if rule == "wrong_chain_id":        # a: the transaction's chain id
        chain = genesis.chain_id if genesis is not None else "?"
        return InvalidTransaction(f"chain id {a}, this chain is {chain}", code=rule)
    if rule == "unknown_scheme":        # a: its scheme id
        return InvalidTransaction(f"unknown signature scheme id {a}", code=rule)
    if rule == "scheme_not_allowed":    # a: its scheme id
        return InvalidTransaction(f"{_scheme_name(genesis, a)} is not allowed for transactions", code=rule)
    if rule == "bad_public_key_length":  # a: scheme id, b: the key's length
        size = rules.public_key_bytes if rules is not None else "?"
        return InvalidTransaction(f"{_scheme_name(genesis, a)} public keys are {size} bytes, got {b}", code=rule)
    if rule == "signature_too_long":    # a: scheme id, b: the signature's length
        size = rules.max_signature_bytes if rules is not None else "?"
        return InvalidTransaction(f"{_scheme_name(genesis, a)} signatures are at most {size} bytes, got {b}",
                                  code=rule)
    if rule == "bad_signature_length":  # a: scheme id, b: the signature's length
        return InvalidTransaction(f"a {_scheme_name(genesis, a)} signature cannot be {b} bytes", code=rule)
    if rule == "fee_too_low":           # a: its fee
        minimum = genesis.min_fee if genesis is not None else "?"
        return InvalidTransaction(f"fee {a}, this chain's minimum is {minimum}", code=rule)
    if rule == "replayed_nonce":        # a: its nonce, b: the next one
        return InvalidTransaction(f"nonce {a} already used (next is {b})", code=rule)
    if rule == "nonce_gap":             # a: its nonce, b: the next one
        return InvalidTransaction(f"nonce {a} skips ahead (next is {b})", code=rule)
    if rule == "amount_overflow":       # a: amount + fee
        return InvalidTransaction(f"amount + fee = {a} overflows a u64", code=rule)
    if rule == "insufficient_balance":  # a: amount + fee, b: what the sender has left
        return InvalidTransaction(f"amount + fee = {a}, balance {b}", code=rule)
    if rule == "nonce_conflict":        # a: its nonce
        return InvalidTransaction(f"another transaction with nonce {a} is pending", code=rule)
    if rule == HELD_NONCE_CONFLICT:     # a: its nonce
        return InvalidTransaction(f"another transaction with nonce {a} is held", code="nonce_conflict")
    if rule == "sender_limit":          # a: the sender's pending transactions
        return MempoolFull(f"this sender already has {a} pending transactions", code=rule)
    if rule == "mempool_full":          # a: pending transactions, b: their bytes
        return MempoolFull(f"the mempool is full ({a} transactions, {b} bytes)", code=rule)
    if rule == "held_sender_limit":     # a: the per-sender cap
        return MempoolFull(f"this sender already has {a} transactions held for a nonce gap", code=rule)
    if rule == "held_full":             # a: held transactions
        return MempoolFull(f"the held queue is full ({a} transactions waiting for a nonce gap)", code=rule)
    if rule == "bad_signature":
        return InvalidTransaction("the signature does not verify under the sender's public key", code=rule)
    raise ValueError(f"no such transaction rule: {rule!r}")


def block_refusal(rule: str, position: int, a: int = 0, b: int = 0, tx_id: bytes | None = None,
                  genesis: Genesis | None = None) -> InvalidBlock:
    """The InvalidBlock for a broken body rule (`position` -1: the block as a whole), or for
    a transaction rule broken by the transaction at `position` (whose id is `tx_id`)."""
    if rule == "wrong_tx_count":            # a: the header's count, b: the body's
        return InvalidBlock(f"header says {a} transactions, the block has {b}", code=rule)
    if rule == "too_many_transactions":     # a: the body's count, b: the limit
        return InvalidBlock(f"{a} transactions, at most {b}", code=rule)
    if rule == "wrong_merkle_root":
        return InvalidBlock("the Merkle root does not match the transactions", code=rule)
    if rule == "duplicate_transaction":
        return InvalidBlock("a transaction appears twice", code=rule)
    if rule == "bad_signature":
        return InvalidBlock(f"transaction {position}: the signature does not verify", code=rule)
    error = refusal(rule, a, b, genesis)
    label = f"{tx_id.hex()[:16]}.." if tx_id is not None else "?"
    return InvalidBlock(f"transaction {position} ({label}): {error.detail}", code=error.code)


def receipt_refusal(rule: str, a: int = 0, b: int = 0, tx_id: bytes | None = None) -> InvalidReceipt:
    """The error for a broken receipt rule (qmemo.core.receipts), its sentence built from
    `a` and `b` (what each means is in the table below); `tx_id`: the receipt's transaction."""
    label = f"transaction {tx_id.hex()[:16]}.." if tx_id is not None else "the transaction"
    if rule == "unknown_source":            # a: the receipt's source chain id
        return InvalidReceipt(f"source chain {a} is not another shard of this genesis", code=rule)
    if rule == "forged_header":             # a: the header's height, b: its producer index
        return InvalidReceipt(f"the source header at height {a} (producer {b}) is not signed by a validator of the "
                              "source shard", code=rule)
    if rule == RECEIPT_UNLINKED:            # a: the height whose header does not follow its parent
        return InvalidReceipt(f"the source header at height {a} does not build on the one before it",
                              code="receipt_not_final")
    if rule == "receipt_not_final":         # a: distinct producers shown, b: the source's quorum
        return InvalidReceipt(f"the source block is not shown final: {a} distinct producer(s) built on it, "
                              f"{b} needed", code=rule)
    if rule == "wrong_proof":
        return InvalidReceipt(f"{label} is not in the source block (its proof does not lead to the header's "
                              "Merkle root)", code=rule)
    if rule == RECEIPT_OTHER_CHAIN:         # a: the transaction's chain id, b: the source's
        return InvalidReceipt(f"{label} is signed for chain {a}, not the source chain {b}", code="wrong_proof")
    if rule == "wrong_destination":         # a: the recipient's shard, b: this shard
        return InvalidReceipt(f"{label} pays an account of shard {a}, not of this shard ({b})", code=rule)
    if rule == "receipt_replayed":
        return InvalidReceipt(f"{label} was credited already", code=rule)
    if rule == "receipt_bad_signature":
        return InvalidReceipt(f"{label}'s signature does not verify under its sender's key", code=rule)
    raise ValueError(f"no such receipt rule: {rule!r}")


def receipts_refusal(rule: str, a: int = 0, b: int = 0) -> InvalidBlock:
    """The InvalidBlock for a broken rule of a version 2 block's receipts section as a whole."""
    if rule == "wrong_receipts_root":
        return InvalidBlock("the receipts root does not match the receipts section", code=rule)
    if rule == "malformed_receipts":
        return InvalidBlock("the receipts section does not decode", code=rule)
    if rule == "wrong_receipt_count":      # a: the header's count, b: the section's
        return InvalidBlock(f"header says {a} receipts, the section has {b}", code=rule)
    if rule == "too_many_receipts":        # a: the section's count, b: the limit
        return InvalidBlock(f"{a} receipts, at most {b}", code=rule)
    raise ValueError(f"no such receipts rule: {rule!r}")
