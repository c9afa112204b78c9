"""Twin ledgers for the differential tests: the node's native ledger (qmemo.node.ledger) and
the pure reference (qmemo.core.pool, qmemo.core.state.apply_block), fed the same batches,
verdicts and blocks, with helpers that compare everything a client or a node can see.

Ed25519 keys sign here (a signature is microseconds), through the admission kernel's
libsodium slot; the rules under test do not depend on the scheme.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import cache

from qmemo.core.block import Block, make_block
from qmemo.core.genesis import Genesis, next_turn_ms, parse_genesis
from qmemo.core.mempool import Mempool, MempoolLimits
from qmemo.core.pool import HeldLimits, Outcome, ReferencePool
from qmemo.core.state import Account, ChainState, apply_block
from qmemo.core.transaction import Transaction, derive_address
from qmemo.crypto.admit_kernel import AdmitKernel
from qmemo.crypto.schemes import KeyPair, get_scheme, scheme_id_of
from qmemo.crypto.verifier import scheme_table, signer
from qmemo.errors import DecodeError, InvalidBlock
from qmemo.frames import encode_frames
from qmemo.node.ledger import (PoolLimits, account_of, block_error, native, new_ledger, outcome_error,
                               reason_name)

CHAIN_ID = 11
GENESIS_TIME_MS = 1_700_000_000_000


@cache
def ed_keys(count: int = 10) -> tuple[KeyPair, ...]:
    """[0:3] validators, [3:count-1] funded accounts, [count-1] unfunded."""
    scheme = get_scheme("Ed25519")
    return tuple(scheme.keypair() for _ in range(count))


def address_of(key: KeyPair) -> bytes:
    return derive_address(scheme_id_of(key.scheme), key.public_key)


@cache
def genesis(balance: int = 1_000) -> Genesis:
    keys = ed_keys()
    document = {
        "format": "qmemo-genesis/1", "chain_id": CHAIN_ID, "genesis_time_ms": GENESIS_TIME_MS,
        "block_interval_ms": 2_000, "producer_timeout_ms": 2_000, "max_clock_drift_ms": 500,
        "max_block_transactions": 40, "min_fee": 1, "tx_schemes": ["Ed25519"],
        "validators": [{"name": f"v{i}", "scheme": "Ed25519", "public_key": keys[i].public_key.hex()}
                       for i in range(3)],
        "accounts": [{"address": address_of(key).hex(), "balance": balance} for key in keys[3:-1]],
    }
    return parse_genesis(document, scheme_table())


SMALL = PoolLimits(max_txs=30, max_bytes=1 << 20, max_per_sender=6, held_window=4, held_max=8, held_per_sender=3,
                   held_ttl_s=5.0)


def sign_tx(key: KeyPair, nonce: int, recipient: bytes, amount: int = 5, fee: int = 1, *,
            chain_id: int = CHAIN_ID, payload: bytes = b"") -> Transaction:
    tx = Transaction(chain_id, scheme_id_of(key.scheme), key.public_key, nonce, recipient, amount, fee, payload)
    return tx.signed(signer(key.scheme, key.secret_key))


@dataclass
class Twins:
    """A native ledger and the reference, over the same genesis and limits."""

    limits: PoolLimits = SMALL
    genesis: Genesis = field(default_factory=genesis)

    def __post_init__(self) -> None:
        self.kernel = AdmitKernel(CHAIN_ID, ["Ed25519"], verifier="liboqs")
        self.ledger = new_ledger(self.genesis, self.limits)
        self.state = ChainState.from_genesis(self.genesis)
        for address, account in self.state.accounts.items():
            self.ledger.set_account(address, account.balance, account.nonce)
        self.reference = ReferencePool(
            self.genesis, self.state.accounts,
            Mempool(MempoolLimits(self.limits.max_txs, self.limits.max_bytes, self.limits.max_per_sender)),
            HeldLimits(self.limits.held_window, self.limits.held_max, self.limits.held_per_sender,
                       self.limits.held_ttl_s))
        self.scheme = get_scheme("Ed25519")
        self.undo: list[tuple[bytes, tuple[dict[bytes, Account], int], Block]] = []

    # --- admission -------------------------------------------------------------------------

    def items_of(self, encodings: list[bytes]) -> list[Transaction | DecodeError]:
        items: list[Transaction | DecodeError] = []
        for encoding in encodings:
            try:
                items.append(Transaction.decode(encoding))
            except DecodeError as exc:
                items.append(exc)
        return items

    def precheck(self, encodings: list[bytes]):
        batch = self.ledger.admit(self.kernel.table, encode_frames(encodings), 10_000)
        self.ledger.precheck(batch)
        return batch, self.reference.precheck(self.items_of(encodings))

    def commit(self, pair, now: float, relay: bool):
        batch, checked = pair
        batch.verify(self.kernel.table, 0, 1)
        verdicts = [self.scheme.verify(t.public_key, t.signing_digest, t.signature)
                    for t in (checked.items[p] for p in checked.candidates)]
        native_out = self.ledger.commit(batch, now, relay)
        reference_out = self.reference.commit(checked, verdicts, now, relay)
        return batch, native_out, reference_out

    def admit(self, encodings: list[bytes], now: float = 0.0, relay: bool = True) -> list[Outcome]:
        batch, native_out, reference_out = self.commit(self.precheck(encodings), now, relay)
        self.compare_commit(batch, native_out, reference_out)
        return reference_out[0]

    def compare_commit(self, batch, native_out, reference_out) -> None:
        outcomes, relayed, evicted = reference_out
        frames, journal_count, relay_frames, relay_count, native_evicted = native_out
        statuses = batch.statuses()
        names = {1: "accepted", 2: "duplicate", 3: "rejected"}
        rejections = {position: (code, a, b) for position, code, a, b in batch.rejections()}
        for position, outcome in enumerate(outcomes):
            assert names[statuses[position]] == outcome.status, (position, outcome, rejections.get(position))
            if outcome.status == "rejected":
                error = outcome_error(batch, position, *rejections[position], self.genesis)
                assert (error.code, error.detail) == (outcome.error.code, outcome.error.detail), position
            else:
                assert batch.tx_id(position) == outcome.tx_id
        accepted = [batch.encoding(p) for p, o in enumerate(outcomes) if o.status == "accepted"]
        assert frames == encode_frames(accepted) and journal_count == len(accepted)
        assert relay_frames == encode_frames(relayed) and relay_count == len(relayed)
        assert [(i, reason_name(r)) for i, r in native_evicted] == evicted
        self.compare_state()

    # --- blocks ---------------------------------------------------------------------------

    def block_of(self, transactions: list[Transaction], producer: int | None = None) -> Block:
        height = self.state.height + 1
        producer = (height - 1) % 3 if producer is None else producer
        timestamp = next_turn_ms(self.genesis, producer, height, self.state.tip_timestamp_ms, 0)
        key = ed_keys()[producer]
        return make_block(chain_id=CHAIN_ID, height=height, previous_hash=self.state.tip_hash,
                          timestamp_ms=timestamp, producer_index=producer, transactions=transactions,
                          sign=signer(key.scheme, key.secret_key))

    def selected_block(self, count: int):
        """The next block from both pools' selections (compared): the core Block and the body."""
        body = self.ledger.select(count)
        chosen = self.reference.mempool.select(count)
        assert body.ids() == b"".join(tx.id for tx in chosen)
        return self.block_of(chosen), body

    def apply(self, block: Block, body=None) -> str | None:
        """Apply to both; the refusal code (both must agree) or None."""
        if body is None:
            body = native().decode_body(self.kernel.table, CHAIN_ID, block.encode()[len(block.header.encoded):],
                                        block.header.tx_count)
        producer = self.genesis.validators[block.header.producer_index].address
        limit = self.genesis.max_block_transactions
        before = dict(self.state.accounts), self.state.tip_timestamp_ms
        reference_error = native_error = None
        try:
            applied = apply_block(self.state, block, _Verifier(self.scheme), block.header.timestamp_ms)
        except InvalidBlock as exc:
            reference_error = exc
        try:
            changed, undo, fees = self.ledger.apply(body, block.header.tx_count, block.header.merkle_root, limit,
                                                    producer, self.kernel.table)
        except native().BlockRefused as exc:
            native_error = block_error(exc, body, self.genesis)
        if reference_error is not None or native_error is not None:
            assert reference_error is not None and native_error is not None, (reference_error, native_error)
            assert (native_error.code, native_error.detail) == (reference_error.code, reference_error.detail)
            self.compare_state()
            return reference_error.code
        assert fees == applied.fees
        self.undo.append((undo, before, block))
        evicted, relayed = self.reference.block_applied(block.transactions)
        native_evicted, relay_frames, relay_count = self.ledger.block_applied(body, 0.0)
        assert [(i, reason_name(r)) for i, r in native_evicted] == evicted
        assert relay_frames == encode_frames(relayed)
        self.compare_state()
        return None

    def undo_last(self) -> None:
        undo, (accounts, timestamp_ms), block = self.undo.pop()
        self.state.accounts.clear()
        self.state.accounts.update(accounts)
        self.state.height -= 1
        self.state.tip_hash = block.header.previous_hash
        self.state.tip_timestamp_ms = timestamp_ms
        self.ledger.undo(undo)
        body = native().decode_body(self.kernel.table, CHAIN_ID, block.encode()[len(block.header.encoded):],
                                    block.header.tx_count)
        evicted = self.reference.blocks_undone(block.transactions)
        native_evicted = self.ledger.blocks_undone([body])
        assert [(i, reason_name(r)) for i, r in native_evicted] == evicted
        self.compare_state()

    def expire(self, older_than: float) -> None:
        evicted = self.reference.expire_held(older_than)
        native_evicted = self.ledger.expire_held(older_than)
        assert sorted((i, reason_name(r)) for i, r in native_evicted) == sorted(evicted)
        self.compare_state()

    # --- state ------------------------------------------------------------------------------

    def compare_state(self) -> None:
        reference = self.reference
        native_accounts = self.ledger.accounts()
        packed = {native_accounts[i:i + 32]: (int.from_bytes(native_accounts[i + 32:i + 40], "little"),
                                              int.from_bytes(native_accounts[i + 40:i + 48], "little"))
                  for i in range(0, len(native_accounts), 48)}
        assert packed == {a: (acc.balance, acc.nonce) for a, acc in reference.accounts.items()}
        assert len(self.ledger) == len(reference.mempool)
        assert self.ledger.select(10_000).ids() == b"".join(tx.id for tx in reference.mempool.select(10_000))
        sizes = self.ledger.sizes()
        assert sizes[1] == len(reference.held) and sizes[2] == reference.mempool.size_bytes
        for key in ed_keys():
            address = address_of(key)
            pending, pending_cost, held, held_cost = self.ledger.sender(address)
            assert (pending, pending_cost, held, held_cost) == (
                reference.mempool.pending_count(address), reference.mempool.pending_cost(address),
                sum(1 for t in reference.held.transactions() if t.sender == address), reference.held.cost(address))
            assert self.ledger.pending_nonce(address) == reference.pending_nonce(address)
            assert account_of(self.ledger, address) == reference.account(address)


class _Verifier:
    """apply_block's verifier: the registry's Ed25519, uncached."""

    def __init__(self, scheme) -> None:
        self.scheme = scheme

    def verify(self, scheme_id: int, public_key: bytes, message: bytes, signature: bytes) -> bool:
        return self.scheme.verify(public_key, message, signature)

    def verify_transactions(self, transactions) -> list[bool]:
        return [self.scheme.verify(t.public_key, t.signing_digest, t.signature) for t in transactions]


def mutate(rng: random.Random, tx: Transaction) -> bytes:
    """A transaction's encoding, broken in one of the ways a client can break it."""
    encoded = bytearray(tx.encoded)
    kind = rng.randrange(5)
    if kind == 0:                       # a flipped signature byte
        encoded[-1 - rng.randrange(8)] ^= 1 << rng.randrange(8)
    elif kind == 1:                     # truncated
        del encoded[rng.randrange(1, len(encoded)):]
    elif kind == 2:                     # trailing bytes
        encoded += b"\x00" * rng.randrange(1, 4)
    elif kind == 3:                     # unknown scheme id
        encoded[5] = 99
    else:                               # another version
        encoded[0] = 2
    return bytes(encoded)
