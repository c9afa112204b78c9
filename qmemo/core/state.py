"""Chain state and the state transition: `apply_block`, read top to bottom, is the spec.

The state is the set of accounts (balance, next nonce) plus the tip (height, hash,
timestamp). `apply_block(state, block, verifier, now_ms)` runs every check a block
must pass, each one line with a comment, each raising `InvalidBlock` with a code that
names the rule; only if all pass does it change the state, in one step, and return the
accounts it changed (what the store writes in the same SQL transaction as the block).

Order of the checks: the header first (cheap, and a forged header stops everything),
then the body's commitment, then each transaction's form, nonce and balance in block
order, and the signatures last - the costly part, mostly answered by the cache the
mempool filled - so an invalid block costs little to reject.

The transaction rules (`check_transaction_form`, `charge`) raise `InvalidTransaction`
and are shared with the mempool's admission, so a node admits exactly what a block
may carry.

Pure: time comes in as `now_ms`, signatures are checked by the verifier passed in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from qmemo.core.block import BLOCK_VERSION, SHARDED_BLOCK_VERSION, Block, BlockHeader
from qmemo.core.codec import U64_MAX
from qmemo.core.genesis import Genesis, Validator, scheduled_producer
from qmemo.core.transaction import FIXED_BYTES as TX_FIXED_BYTES
from qmemo.core.transaction import MAX_PAYLOAD_BYTES, Transaction
from qmemo.core.receipts import block_receipts, max_section_bytes
from qmemo.core.refusals import block_refusal, refusal
from qmemo.errors import InvalidBlock, InvalidTransaction


@dataclass(frozen=True, slots=True)
class Account:
    balance: int = 0
    nonce: int = 0      # the nonce the account's next transaction must carry


EMPTY_ACCOUNT = Account()


@dataclass(slots=True, repr=False)
class ChainState:
    """Accounts and the tip. Changed only by `apply_block` (or loaded by the store)."""

    genesis: Genesis
    accounts: dict[bytes, Account]
    height: int
    tip_hash: bytes
    tip_timestamp_ms: int
    # A shard's chain: the ids of every cross-shard receipt it credited (qmemo.core.receipts).
    credited: set[bytes] = field(default_factory=set)

    @classmethod
    def from_genesis(cls, genesis: Genesis) -> ChainState:
        return cls(genesis, {address: Account(balance, 0) for address, balance in genesis.balances},
                   0, genesis.hash, genesis.genesis_time_ms)

    def account(self, address: bytes) -> Account:
        return self.accounts.get(address, EMPTY_ACCOUNT)

    def __repr__(self) -> str:
        return f"ChainState(height={self.height}, tip={self.tip_hash.hex()[:16]}.., accounts={len(self.accounts)})"


@dataclass(frozen=True, slots=True, repr=False)
class AppliedBlock:
    """What a valid block did: the new value of every account it touched, and its fees."""

    block: Block
    accounts: Mapping[bytes, Account]
    fees: int
    credited: tuple[bytes, ...] = ()    # the ids of the cross-shard receipts it credited, in order


class HeaderVerifier(Protocol):
    """What the header rules need: one signature checked (a block's producer's)."""

    def verify(self, scheme_id: int, public_key: bytes, message: bytes, signature: bytes) -> bool: ...


class BlockVerifier(Protocol):
    """What `apply_block` needs to check signatures (`VerifyCache` is one)."""

    def verify(self, scheme_id: int, public_key: bytes, message: bytes, signature: bytes) -> bool: ...

    def verify_transactions(self, transactions: Sequence[Transaction]) -> list[bool]: ...


# --- transaction rules (shared with the mempool) ------------------------------------------

def check_transaction_form(genesis: Genesis, tx: Transaction) -> None:
    """The rules a transaction meets whatever the state; InvalidTransaction otherwise."""
    if tx.chain_id != genesis.chain_id:  # signed for this chain, not replayed from another
        raise refusal("wrong_chain_id", tx.chain_id, genesis=genesis)
    rules = genesis.schemes.get(tx.scheme_id)
    if rules is None:  # a scheme this chain has never heard of
        raise refusal("unknown_scheme", tx.scheme_id, genesis=genesis)
    if tx.scheme_id not in genesis.tx_scheme_ids:  # a scheme the genesis allows for transactions
        raise refusal("scheme_not_allowed", tx.scheme_id, genesis=genesis)
    if len(tx.public_key) != rules.public_key_bytes:  # a key of the scheme's size
        raise refusal("bad_public_key_length", tx.scheme_id, len(tx.public_key), genesis)
    if len(tx.signature) > rules.max_signature_bytes:  # never longer than the scheme's maximum
        raise refusal("signature_too_long", tx.scheme_id, len(tx.signature), genesis)
    if not rules.signature_length_ok(len(tx.signature)):  # non-empty; exact for fixed-length schemes
        raise refusal("bad_signature_length", tx.scheme_id, len(tx.signature), genesis)
    if tx.fee < genesis.min_fee:  # pays at least the chain's minimum fee: nothing is sent for free
        raise refusal("fee_too_low", tx.fee, genesis=genesis)


def charge(balance: int, next_nonce: int, tx: Transaction) -> int:
    """What `tx` costs its sender (amount + fee), if the sender can pay it now."""
    if tx.nonce < next_nonce:  # a nonce already used: a replay
        raise refusal("replayed_nonce", tx.nonce, next_nonce)
    if tx.nonce > next_nonce:  # nonces are consecutive
        raise refusal("nonce_gap", tx.nonce, next_nonce)
    cost = tx.amount + tx.fee
    if cost > U64_MAX:  # amount + fee must not wrap a u64
        raise refusal("amount_overflow", cost)
    if cost > balance:  # the sender can pay
        raise refusal("insufficient_balance", cost, balance)
    return cost


# --- header rules (also checked before a pushed block's body is decoded) ----------------------

def check_header_form(genesis: Genesis, header: BlockHeader) -> None:
    """The header rules that need nothing but the genesis; InvalidBlock otherwise."""
    expected = SHARDED_BLOCK_VERSION if genesis.sharding is not None else BLOCK_VERSION
    _require(header.version == expected, "unsupported_version",  # this chain's format: 2 for a shard's
             f"block version {header.version}, this chain's blocks are version {expected}")
    _require(header.chain_id == genesis.chain_id, "wrong_chain_id",  # a block of this chain
             f"chain id {header.chain_id}, this chain is {genesis.chain_id}")


def check_header_turn(genesis: Genesis, header: BlockHeader, parent_timestamp_ms: int, verifier: HeaderVerifier,
                      now_ms: int) -> Validator:
    """The header's time, producer and signature against its parent's timestamp; returns
    the producer. InvalidBlock otherwise."""
    _require(header.timestamp_ms >= parent_timestamp_ms + genesis.block_interval_ms,  # no earlier than its slot
             "timestamp_too_early", f"timestamp {header.timestamp_ms} is less than the parent's "
             f"{parent_timestamp_ms} + {genesis.block_interval_ms} ms")
    _require(header.timestamp_ms <= now_ms + genesis.max_clock_drift_ms,  # not from the future
             "timestamp_in_future", f"timestamp {header.timestamp_ms} is ahead of now ({now_ms}) by "
             f"more than {genesis.max_clock_drift_ms} ms")
    scheduled = scheduled_producer(genesis, header.height, parent_timestamp_ms, header.timestamp_ms)
    _require(header.producer_index == scheduled, "wrong_producer",  # the validator whose turn it is
             f"validator {header.producer_index} produced, validator {scheduled} was scheduled")
    producer = genesis.validators[header.producer_index]
    _require(verifier.verify(producer.scheme_id, producer.public_key, header.signing_digest, header.signature),
             "bad_header_signature", f"header not signed by {producer.name}")  # signed by that validator
    return producer


def check_declared_size(genesis: Genesis, header: BlockHeader, header_bytes: int, block_bytes: int) -> None:
    """A block's encoding is no longer than its header's `tx_count` allows, and that count
    within the limit: what can be known of a body before decoding it."""
    _require(header.tx_count <= genesis.max_block_transactions, "too_many_transactions",  # within the limit
             f"{header.tx_count} transactions, at most {genesis.max_block_transactions}")
    if header.version == SHARDED_BLOCK_VERSION:     # a shard's block: its receipts section too
        _require(header.receipt_count <= genesis.max_block_transactions, "too_many_receipts",
                 f"{header.receipt_count} receipts, at most {genesis.max_block_transactions}")
        section_most = max_section_bytes(genesis, header.receipt_count)
        _require(header.receipts_bytes <= section_most, "block_too_large",
                 f"a {header.receipts_bytes}-byte receipts section, at most {section_most} for "
                 f"{header.receipt_count} receipts")
    most = header_bytes + header.tx_count * max_transaction_frame_bytes(genesis) + header.receipts_bytes
    _require(block_bytes <= most, "block_too_large",  # no bytes beyond what its transactions can fill
             f"{block_bytes} bytes, at most {most} for {header.tx_count} transactions")


def max_transaction_frame_bytes(genesis: Genesis) -> int:
    """The longest a transaction of this chain can be inside a block: its u32 length, the
    fixed part, the largest key and signature its schemes allow, the largest payload and
    the signature's u16 length."""
    largest = 0
    for scheme_id in genesis.tx_scheme_ids:
        rules = genesis.schemes.get(scheme_id)
        if rules is not None:       # parse_genesis refused unknown schemes: always true
            largest = max(largest, rules.public_key_bytes + rules.max_signature_bytes)
    return 4 + TX_FIXED_BYTES + largest + MAX_PAYLOAD_BYTES + 2


def check_header(genesis: Genesis, header: BlockHeader, tip_height: int, tip_hash: bytes, tip_timestamp_ms: int,
                 verifier: HeaderVerifier, now_ms: int) -> Validator:
    """Every header rule of a block extending the tip (height, hash, timestamp): its form,
    its place, its turn and its signature; returns the producer. InvalidBlock otherwise.
    The node checks a block's body with its native ledger after this (qmemo.node.chain)."""
    check_header_form(genesis, header)
    _require(header.height == tip_height + 1, "wrong_height",  # extends the tip by one
             f"height {header.height}, the tip is {tip_height}")
    _require(header.previous_hash == tip_hash, "wrong_previous_hash",  # builds on the tip
             f"previous hash {header.previous_hash.hex()[:16]}.. is not the tip {tip_hash.hex()[:16]}..")
    return check_header_turn(genesis, header, tip_timestamp_ms, verifier, now_ms)


# --- the state transition ------------------------------------------------------------------

def apply_block(state: ChainState, block: Block, verifier: BlockVerifier, now_ms: int) -> AppliedBlock:
    """Check `block` against `state` and apply it; InvalidBlock(code=rule) and no change if any check fails."""
    genesis, header, transactions = state.genesis, block.header, block.transactions

    # The header.
    producer = check_header(genesis, header, state.height, state.tip_hash, state.tip_timestamp_ms, verifier, now_ms)

    # A shard's block: the cross-shard receipts it credits - the section its header commits
    # to, then every receipt rule (qmemo.core.receipts, `block_receipts`).
    sharding = genesis.sharding
    credits = block_receipts(genesis, header, block.receipts_section, state.credited, verifier) \
        if sharding is not None else []

    # The body's commitment.
    if header.tx_count != len(transactions):  # the count the header commits to
        raise block_refusal("wrong_tx_count", -1, header.tx_count, len(transactions))
    if len(transactions) > genesis.max_block_transactions:  # within the limit
        raise block_refusal("too_many_transactions", -1, len(transactions), genesis.max_block_transactions)
    tx_ids = [tx.id for tx in transactions]
    if header.merkle_root != block.body_root():  # the transactions it commits to
        raise block_refusal("wrong_merkle_root", -1)
    if len(set(tx_ids)) != len(tx_ids):  # each transaction once
        raise block_refusal("duplicate_transaction", -1)

    # Each transaction in order: form, nonce, balance; applied to a scratch copy of
    # the accounts it touches ([balance, nonce]), so a failure leaves `state` alone.
    touched: dict[bytes, list[int]] = {}
    fees = 0
    for position, tx in enumerate(transactions):
        sender = _touch(touched, state, tx.sender)
        try:
            check_transaction_form(genesis, tx)
            cost = charge(sender[0], sender[1], tx)
        except InvalidTransaction as exc:
            raise InvalidBlock(f"transaction {position} ({tx.id.hex()[:16]}..): {exc.detail}", code=exc.code) from None
        sender[0] -= cost
        sender[1] += 1
        # A recipient of another shard is paid there, once its receipt is credited: the
        # amount leaves this shard.
        if sharding is None or sharding.shard_of(tx.recipient) == sharding.index:
            _touch(touched, state, tx.recipient)[0] += tx.amount
        fees += tx.fee

    # Every signature valid (the cache answers for those verified at admission).
    for position, valid in enumerate(verifier.verify_transactions(transactions)):
        if not valid:  # signed by the key that names the sender, over this transaction
            raise block_refusal("bad_signature", position)

    # The receipts' recipients are credited.
    for credit in credits:
        _touch(touched, state, credit.recipient)[0] += credit.amount

    # The producer is paid the fees. (Balances cannot overflow: the genesis caps the supply
    # of every shard together.)
    if fees:
        _touch(touched, state, producer.address)[0] += fees

    # Commit.
    changed = {address: Account(balance, nonce) for address, (balance, nonce) in touched.items()}
    state.accounts.update(changed)
    state.height, state.tip_hash, state.tip_timestamp_ms = header.height, header.hash, header.timestamp_ms
    credited = tuple(credit.receipt_id for credit in credits)
    state.credited.update(credited)
    return AppliedBlock(block, changed, fees, credited)


def _require(condition: bool, code: str, detail: str) -> None:
    if not condition:
        raise InvalidBlock(detail, code=code)


def _touch(touched: dict[bytes, list[int]], state: ChainState, address: bytes) -> list[int]:
    """The scratch [balance, nonce] of `address`, copied from the state on first touch."""
    entry = touched.get(address)
    if entry is None:
        account = state.accounts.get(address, EMPTY_ACCOUNT)
        entry = touched[address] = [account.balance, account.nonce]
    return entry
