"""Every refusal code, in one table: the rule, the code a client sees, and its sentence.

`RULES` is the one place a refusal is written. The Python rules (`check_transaction_form`
and `charge` in qmemo.core.state, `Mempool`, `HeldQueue`, `apply_block`, the receipt rules)
raise what `refusal`, `block_refusal`, `receipt_refusal` and `receipts_refusal` build from
it; the node's C ledger (qmemo/node/native) reports a refusal as its rule's number and the
two numbers its sentence needs, and its numbers and names are generated from the rows
marked `native` (qmemo/node/native/ledger_codes.h, written by `python -m
qmemo.node.ledger_codes`; a unit test regenerates it and compares). So a client reads
the same `code` and `detail` whichever implementation judged its transaction, and the
differential tests compare both. Adding a refusal code is adding one row here.

A sentence is a `str.format` template over `a` and `b` (what each means is in its row's
comment) and what the genesis says: `scheme` (the name of scheme id `a`),
`public_key_bytes` and `max_signature_bytes` (that scheme's sizes), `chain` (this chain's
id), `min_fee`; a receipt rule's also over `label` (its transaction).

Pure: no I/O; the genesis is handed in (scheme names and sizes, the chain id, the fee).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from qmemo.core.genesis import Genesis
from qmemo.errors import InvalidBlock, InvalidReceipt, InvalidTransaction, MempoolFull, QmemoError

# What a rule judges: a transaction's encoding (its sentence is Transaction.decode's), a
# transaction, a pool eviction's reason (no sentence), a block body, a cross-shard receipt,
# a block's receipts section as a whole.
DECODE, TRANSACTION, EVICTION, BLOCK, RECEIPT, RECEIPTS = "decode", "transaction", "eviction", "block", "receipt", \
    "receipts"


@dataclass(frozen=True, slots=True)
class Rule:
    """One refusal: its rule name, what it judges, its error and sentence, and its code."""

    name: str
    kind: str
    error: type[QmemoError] | None = None
    sentence: str = ""
    code: str = ""              # the code a client sees, where it is another rule's (default: `name`)
    native: bool = True         # the C ledger reports it (a number in ledger_codes.h)
    block_sentence: str = ""    # a transaction rule's own sentence as a block's refusal (default: its sentence)

    @property
    def error_code(self) -> str:
        return self.code or self.name


# In the C ledger's order: a native rule's number is its place among the native rows, from 1.
RULES: tuple[Rule, ...] = (
    Rule("truncated", DECODE),
    Rule("unsupported_version", DECODE),
    Rule("oversized", DECODE),
    Rule("trailing_bytes", DECODE),
    # check_transaction_form
    Rule("wrong_chain_id", TRANSACTION, InvalidTransaction,             # a: the transaction's chain id
         "chain id {a}, this chain is {chain}"),
    Rule("unknown_scheme", TRANSACTION, InvalidTransaction,             # a: its scheme id
         "unknown signature scheme id {a}"),
    Rule("scheme_not_allowed", TRANSACTION, InvalidTransaction,         # a: its scheme id
         "{scheme} is not allowed for transactions"),
    Rule("bad_public_key_length", TRANSACTION, InvalidTransaction,      # a: scheme id, b: the key's length
         "{scheme} public keys are {public_key_bytes} bytes, got {b}"),
    Rule("signature_too_long", TRANSACTION, InvalidTransaction,         # a: scheme id, b: the signature's length
         "{scheme} signatures are at most {max_signature_bytes} bytes, got {b}"),
    Rule("bad_signature_length", TRANSACTION, InvalidTransaction,       # a: scheme id, b: the signature's length
         "a {scheme} signature cannot be {b} bytes"),
    Rule("fee_too_low", TRANSACTION, InvalidTransaction,                # a: its fee
         "fee {a}, this chain's minimum is {min_fee}"),
    # charge, Mempool.check, the held queue
    Rule("replayed_nonce", TRANSACTION, InvalidTransaction,             # a: its nonce, b: the next one
         "nonce {a} already used (next is {b})"),
    Rule("nonce_gap", TRANSACTION, InvalidTransaction,                  # a: its nonce, b: the next one
         "nonce {a} skips ahead (next is {b})"),
    Rule("amount_overflow", TRANSACTION, InvalidTransaction,            # a: amount + fee
         "amount + fee = {a} overflows a u64"),
    Rule("insufficient_balance", TRANSACTION, InvalidTransaction,       # a: amount + fee, b: what the sender has left
         "amount + fee = {a}, balance {b}"),
    Rule("nonce_conflict", TRANSACTION, InvalidTransaction,             # a: its nonce
         "another transaction with nonce {a} is pending"),
    Rule("sender_limit", TRANSACTION, MempoolFull,                      # a: the sender's pending transactions
         "this sender already has {a} pending transactions"),
    Rule("mempool_full", TRANSACTION, MempoolFull,                      # a: pending transactions, b: their bytes
         "the mempool is full ({a} transactions, {b} bytes)"),
    Rule("held_sender_limit", TRANSACTION, MempoolFull,                 # a: the per-sender cap
         "this sender already has {a} transactions held for a nonce gap"),
    Rule("held_full", TRANSACTION, MempoolFull,                         # a: held transactions
         "the held queue is full ({a} transactions waiting for a nonce gap)"),
    Rule("held_nonce_conflict", TRANSACTION, InvalidTransaction,        # a: its nonce (the held queue's own conflict)
         "another transaction with nonce {a} is held", code="nonce_conflict"),
    Rule("bad_signature", TRANSACTION, InvalidTransaction,
         "the signature does not verify under the sender's public key",
         block_sentence="transaction {position}: the signature does not verify"),
    # the pool's evictions
    Rule("nonce_stale", EVICTION),
    Rule("nonce_gap_timeout", EVICTION),
    # a block's body (position -1: the block as a whole)
    Rule("wrong_tx_count", BLOCK, InvalidBlock,                         # a: the header's count, b: the body's
         "header says {a} transactions, the block has {b}"),
    Rule("too_many_transactions", BLOCK, InvalidBlock,                  # a: the body's count, b: the limit
         "{a} transactions, at most {b}"),
    Rule("wrong_merkle_root", BLOCK, InvalidBlock, "the Merkle root does not match the transactions"),
    Rule("duplicate_transaction", BLOCK, InvalidBlock, "a transaction appears twice"),
    # cross-shard receipts (qmemo.core.receipts)
    Rule("unknown_source", RECEIPT, InvalidReceipt,                     # a: the receipt's source chain id
         "source chain {a} is not another shard of this genesis", native=False),
    Rule("forged_header", RECEIPT, InvalidReceipt,                      # a: the header's height, b: its producer index
         "the source header at height {a} (producer {b}) is not signed by a validator of the source shard",
         native=False),
    Rule("receipt_unlinked", RECEIPT, InvalidReceipt,                   # a: the height that does not follow its parent
         "the source header at height {a} does not build on the one before it", code="receipt_not_final",
         native=False),
    Rule("receipt_not_final", RECEIPT, InvalidReceipt,                  # a: distinct producers shown, b: the quorum
         "the source block is not shown final: {a} distinct producer(s) built on it, {b} needed", native=False),
    Rule("wrong_proof", RECEIPT, InvalidReceipt,
         "{label} is not in the source block (its proof does not lead to the header's Merkle root)", native=False),
    Rule("receipt_other_chain", RECEIPT, InvalidReceipt,                # a: the transaction's chain id, b: the source's
         "{label} is signed for chain {a}, not the source chain {b}", code="wrong_proof", native=False),
    Rule("wrong_destination", RECEIPT, InvalidReceipt,                  # a: the recipient's shard, b: this shard
         "{label} pays an account of shard {a}, not of this shard ({b})", native=False),
    Rule("receipt_replayed", RECEIPT, InvalidReceipt, "{label} was credited already", native=False),
    Rule("receipt_bad_signature", RECEIPT, InvalidReceipt, "{label}'s signature does not verify under its sender's key",
         native=False),
    # a version 2 block's receipts section as a whole
    Rule("wrong_receipts_root", RECEIPTS, InvalidBlock, "the receipts root does not match the receipts section",
         native=False),
    Rule("malformed_receipts", RECEIPTS, InvalidBlock, "the receipts section does not decode", native=False),
    Rule("wrong_receipt_count", RECEIPTS, InvalidBlock,                 # a: the header's count, b: the section's
         "header says {a} receipts, the section has {b}", native=False),
    Rule("too_many_receipts", RECEIPTS, InvalidBlock,                   # a: the section's count, b: the limit
         "{a} receipts, at most {b}", native=False),
)
_BY_NAME = {rule.name: rule for rule in RULES}
NATIVE_RULES: tuple[Rule, ...] = tuple(rule for rule in RULES if rule.native)

# Rules whose error code is another's (the names the rules raise them by).
HELD_NONCE_CONFLICT = "held_nonce_conflict"
RECEIPT_UNLINKED = "receipt_unlinked"
RECEIPT_OTHER_CHAIN = "receipt_other_chain"


def _rule(name: str, *kinds: str) -> Rule:
    rule = _BY_NAME.get(name)
    if rule is None or rule.kind not in kinds:      # our bug, not the client's
        raise ValueError(f"no such {' or '.join(kinds)} rule: {name!r}")
    return rule


def _error(rule: Rule, sentence: str, **values: Any) -> Any:
    return rule.error(sentence.format(**values), code=rule.error_code)   # type: ignore[misc]


def refusal(rule: str, a: int = 0, b: int = 0, genesis: Genesis | None = None) -> QmemoError:
    """The error for a broken transaction rule, its sentence built from `a` and `b`
    (what each means is in RULES). Unknown rules are our bug: ValueError."""
    found = _rule(rule, TRANSACTION)
    scheme = genesis.schemes.get(a) if genesis is not None else None
    return _error(found, found.sentence, a=a, b=b,
                  scheme=scheme.name if scheme is not None else f"scheme {a}",
                  public_key_bytes=scheme.public_key_bytes if scheme is not None else "?",
                  max_signature_bytes=scheme.max_signature_bytes if scheme is not None else "?",
                  chain=genesis.chain_id if genesis is not None else "?",
                  min_fee=genesis.min_fee if genesis is not None else "?")


def block_refusal(rule: str, position: int, a: int = 0, b: int = 0, tx_id: bytes | None = None,
                  genesis: Genesis | None = None) -> InvalidBlock:
    """The InvalidBlock for a broken body rule (`position` -1: the block as a whole), or for
    a transaction rule broken by the transaction at `position` (whose id is `tx_id`)."""
    found = _rule(rule, BLOCK, TRANSACTION)
    if found.kind == BLOCK:
        return _error(found, found.sentence, a=a, b=b)
    if found.block_sentence:
        return InvalidBlock(found.block_sentence.format(position=position), code=found.error_code)
    error = refusal(rule, a, b, genesis)
    label = f"{tx_id.hex()[:16]}.." if tx_id is not None else "?"
    return InvalidBlock(f"transaction {position} ({label}): {error.detail}", code=error.code)


def receipt_refusal(rule: str, a: int = 0, b: int = 0, tx_id: bytes | None = None) -> InvalidReceipt:
    """The error for a broken receipt rule (qmemo.core.receipts), its sentence built from
    `a` and `b` (what each means is in RULES); `tx_id`: the receipt's transaction."""
    label = f"transaction {tx_id.hex()[:16]}.." if tx_id is not None else "the transaction"
    found = _rule(rule, RECEIPT)
    return _error(found, found.sentence, a=a, b=b, label=label)


def receipts_refusal(rule: str, a: int = 0, b: int = 0) -> InvalidBlock:
    """The InvalidBlock for a broken rule of a version 2 block's receipts section as a whole."""
    found = _rule(rule, RECEIPTS)
    return _error(found, found.sentence, a=a, b=b)
