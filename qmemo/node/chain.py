"""The node's chain: the state at its tip, the recent blocks it can still undo, and the store.

Why recent blocks live in memory: two valid blocks can exist for one height (a late
primary producer and its fallback both produced), and the node must be able to switch
to the branch the fork-choice rule prefers. The store (qmemo/node/store.py) only ever
appends, so a block is written to it once it is *final*: once blocks from a strict
majority of the validators sit at its height or above (qmemo.core.finality; a node
without peers needs only its own, since nobody can fork its chain). Above the
store's tip, each block keeps an undo record - the accounts it touched, as they were
before it - so `rollback_to(height)` restores the state exactly, without a database.
Those undoable blocks are also written, as one encoding each, to the store's
`block_encodings` table before the node serves or relays them (`durable_height` says how
far that has gone on the current branch); a restarted node applies them again, so a
SIGKILL loses no block the node had served.

Fork choice (docs/api.md, "Forks"): between two branches from a common block, the one
with a final block higher up wins (a majority of validators built on it: an isolated
minority's longer branch must not beat it); then the one with more blocks; at equal length, the one whose first block has the earlier
timestamp (the earlier window of the producer schedule: the primary beats its
fallbacks), then the lower block hash. Every node applies the same rule to the same
blocks, so nodes that saw the two branches in different orders end on the same tip.

Producer locks (qmemo.core.fork_lock): when a switch undoes a block this node's
validator produced, the chain remembers it; `producer_locks(now_ms)` tells the producer
whether it may build on the current branch (not until it is final above the fork), so
no validator's blocks count toward a majority on two conflicting branches.

Single-threaded: called from the event loop only (the store's writes are handed to an
executor by the service, in order).
"""

from __future__ import annotations

from collections.abc import Container, Sequence
from dataclasses import dataclass

from typing import Any

from qmemo.core.block import Block
from qmemo.core.finality import final_height
from qmemo.core.fork_lock import ProducerLock, binding_locks, lock_for
from qmemo.core.genesis import Genesis
from qmemo.core.receipts import Credit, ReceiptVerifier, block_receipts
from qmemo.core.state import Account, HeaderVerifier, check_header
from qmemo.errors import StoreError
from qmemo.node.ledger import NodeBlock, account_of, block_error, native
from qmemo.node.store import ChainStore

@dataclass(slots=True)
class RecentBlock:
    """A block above the store's tip, with what it changed and how to undo that."""

    block: NodeBlock
    changed: bytes       # (address, balance, nonce) per account it touched, after it (what the store writes)
    undo: bytes          # the same accounts before it (the ledger restores them)
    parent_timestamp_ms: int
    credited: tuple[bytes, ...] = ()     # the cross-shard receipts it credited (a shard's block)


def apply_to_ledger(genesis: Genesis, ledger: Any, block: NodeBlock, tip_height: int, tip_hash: bytes,
                    tip_timestamp_ms: int, verifier: HeaderVerifier, table: int, now_ms: int, *,
                    credited: Container[bytes] = frozenset(),
                    receipts: ReceiptVerifier | None = None) -> tuple[bytes, bytes, list[Credit]]:
    """apply_block, the node's way: the header rules in Python (qmemo.core.state.check_header),
    a shard's receipts by the core's rules (qmemo.core.receipts, against `credited` and
    through `receipts`, default `verifier`), the body's rules and every credit in the
    ledger, in apply_block's order and with its codes and sentences. Returns what the
    block changed, what undoes it and its credits; InvalidBlock (nothing changed) if a
    rule is broken. tests/unit/test_apply_block.py runs every mutation through both."""
    header = block.header
    producer = check_header(genesis, header, tip_height, tip_hash, tip_timestamp_ms, verifier, now_ms)
    credits: list[Credit] = []
    if genesis.sharding is not None:
        credits = block_receipts(genesis, header, block.receipts, credited, receipts or verifier)  # type: ignore[arg-type]
    packed = b"".join(credit.recipient + credit.amount.to_bytes(8, "little") for credit in credits)
    try:
        changed, undo, _ = ledger.apply(block.body, header.tx_count, header.merkle_root,
                                        genesis.max_block_transactions, producer.address, table, packed)
    except native().BlockRefused as refused:
        raise block_error(refused, block.body, genesis) from None
    return changed, undo, credits


def branch_is_better(ours: Sequence[Block | NodeBlock], theirs: Sequence[Block | NodeBlock], quorum: int = 1) -> bool:
    """Fork choice between two branches growing from the same parent: should we switch?
    `quorum`: distinct producers that make a block final (qmemo.core.finality)."""
    our_final, their_final = (final_height(_producers(branch), quorum) or 0 for branch in (ours, theirs))
    if our_final != their_final:
        return their_final > our_final
    if len(theirs) != len(ours):
        return len(theirs) > len(ours)
    if not theirs:
        return False
    mine, other = ours[0].header, theirs[0].header
    return (other.timestamp_ms, other.hash) < (mine.timestamp_ms, mine.hash)


def _producers(blocks: Sequence[Block | NodeBlock]) -> list[tuple[int, int]]:
    return [(block.height, block.header.producer_index) for block in blocks]


class Chain:
    def __init__(self, store: ChainStore, ledger: Any, *, quorum: int, min_confirmations: int = 1,
                 validator_index: int | None = None, lock_expiry_ms: int = 0) -> None:
        """`ledger`: the node's ledger (qmemo.node.ledger), whose accounts this chain's tip
        owns - loaded here from the store; `quorum`: distinct producers at or above a block
        that make it final; `min_confirmations`: blocks at or above it (itself counted) it
        needs besides; `validator_index`: our validator (None: an observer, which never
        locks); `lock_expiry_ms`: how long a producer lock binds at most (qmemo.core.fork_lock)."""
        self.store = store
        self.genesis = store.genesis
        self.ledger = ledger
        for address, balance, nonce in store.accounts():
            ledger.set_account(address, balance, nonce)
        self.height = store.height
        self.tip_hash = store.tip_hash
        header = store.header(store.height)
        self.tip_timestamp_ms = header.timestamp_ms if header else self.genesis.genesis_time_ms
        self.quorum = quorum
        self.min_confirmations = min_confirmations
        self.recent: list[RecentBlock] = []
        self.written_height = store.height      # the store's tip, as far as writes completed
        self.final_height = store.height        # highest height handed to the store writer
        # Highest height of the current branch whose block is in the store (final, or in
        # `block_encodings`): what the node may serve and relay.
        self.durable_height = store.height
        self.validator_index = validator_index
        self.lock_expiry_ms = lock_expiry_ms
        # Our blocks a switch undid (qmemo.core.fork_lock); kept in the store with the branch
        # (`keep_branch`), so a restart does not forget them and build on the other side at once.
        self.locks: list[ProducerLock] = store.producer_locks() if validator_index is not None else []
        # A shard's chain: every cross-shard receipt it credited, final (the store's) and on
        # its undoable blocks - a receipt is credited once (qmemo.core.receipts). The node's
        # receipts room checks receipts through `receipts` (None: the header verifier).
        self.credited: set[bytes] = store.credited_receipts() if self.genesis.sharding is not None else set()
        self.receipts: ReceiptVerifier | None = None

    # --- the tip --------------------------------------------------------------------------

    def account(self, address: bytes) -> Account:
        return account_of(self.ledger, address)

    # --- changing it ------------------------------------------------------------------------

    def apply(self, block: NodeBlock, verifier: HeaderVerifier, table: int, now_ms: int) -> None:
        """The block's header rules (qmemo.core.state.check_header), then its body in the
        ledger: apply_block's rules in its order, the accounts changed, how to undo that
        remembered. InvalidBlock (and nothing changed) if a rule is broken."""
        header = block.header
        changed, undo, credits = apply_to_ledger(self.genesis, self.ledger, block, self.height, self.tip_hash,
                                                 self.tip_timestamp_ms, verifier, table, now_ms,
                                                 credited=self.credited, receipts=self.receipts)
        credited = tuple(credit.receipt_id for credit in credits)
        self.credited.update(credited)
        self.recent.append(RecentBlock(block, changed, undo, self.tip_timestamp_ms, credited))
        self.height, self.tip_hash, self.tip_timestamp_ms = header.height, header.hash, header.timestamp_ms

    def rollback_to(self, height: int, *, now_ms: int = 0) -> list[NodeBlock]:
        """Undo every block above `height` (newest first); returns them oldest first.
        Each block of our validator's among them locks our producer (`now_ms`: when)."""
        if height < self.final_height:
            raise StoreError(f"cannot undo below the final height {self.final_height} (asked for {height})",
                             code="below_finality")
        undone: list[NodeBlock] = []
        self.durable_height = min(self.durable_height, height)
        while self.recent and self.recent[-1].block.height > height:
            entry = self.recent.pop()
            self.ledger.undo(entry.undo)
            self.credited.difference_update(entry.credited)
            header = entry.block.header
            self.height = header.height - 1
            self.tip_hash = header.previous_hash
            self.tip_timestamp_ms = entry.parent_timestamp_ms
            undone.append(entry.block)
            if header.producer_index == self.validator_index:
                self.locks.append(lock_for(header.height, entry.block.hash, height, now_ms))
        undone.reverse()
        return undone

    def producer_locks(self, now_ms: int) -> list[ProducerLock]:
        """The locks that forbid our producer to build on the current branch now (empty:
        free); those that no longer bind are forgotten."""
        self.locks = binding_locks(self.locks, final_height=self.final_height, hash_at=self.hash_at,
                                   now_ms=now_ms, expiry_ms=self.lock_expiry_ms)
        return self.locks

    def not_durable(self) -> list[NodeBlock]:
        """The blocks of the current branch not yet in the store, ascending."""
        return [entry.block for entry in self.recent if entry.block.height > self.durable_height]

    def made_durable(self) -> None:
        """The whole current branch is in the store: serve it, and fix as final the blocks a
        quorum of producers built on. Called once a branch is applied and stored, never
        halfway through one, so a branch that turns out invalid can still be undone."""
        self.durable_height = self.height
        unfinal = [entry.block for entry in self.recent if entry.block.height > self.final_height]
        height = final_height(_producers(unfinal), self.quorum, min_confirmations=self.min_confirmations)
        if height is not None:
            self.final_height = max(self.final_height, height)

    def take_final(self) -> list[RecentBlock]:
        """Final blocks not yet written, in order (the caller writes them, then calls
        `written`). A block once final is never undone."""
        return [entry for entry in self.recent if self.written_height < entry.block.height <= self.final_height]

    def written(self, height: int) -> None:
        """The store now holds every block up to `height`: forget their undo records."""
        self.written_height = height
        self.recent = [entry for entry in self.recent if entry.block.height > height]

    # --- reading ------------------------------------------------------------------------------

    @property
    def served_height(self) -> int:
        """The highest block the node may serve: applied and in the store."""
        return min(self.height, self.durable_height)

    def depth(self, height: int) -> tuple[int, bool]:
        """(confirmations, final) of our block at `height`: confirmations counts it and the
        served blocks on top (1 at the tip); final once a quorum of producers built on it
        (and then never undone: `rollback_to` refuses)."""
        return self.served_height - height + 1, height <= self.final_height

    def recent_block(self, height: int) -> NodeBlock | None:
        """A block still held in memory (None if it is only in the store, or unknown)."""
        if not self.recent:
            return None
        index = height - self.recent[0].block.height
        return self.recent[index].block if 0 <= index < len(self.recent) else None

    def hash_at(self, height: int) -> bytes | None:
        """Our block hash at `height`, from memory, the store, or the genesis (height 0)."""
        if height == self.height:
            return self.tip_hash
        block = self.recent_block(height)
        if block is not None:
            return block.hash
        if height == 0:
            return self.genesis.hash
        header = self.store.header(height) if 0 < height <= self.written_height else None
        return header.hash if header else None

    def blocks_above(self, height: int) -> list[NodeBlock]:
        """Our blocks above `height` that are still in memory (a branch that could be undone)."""
        return [entry.block for entry in self.recent if entry.block.height > height]
