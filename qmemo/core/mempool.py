"""The mempool's rules: which pending transactions a node keeps, and which it offers a block.

A node admits a transaction in this order (cheap first, the signature last):
decode -> `check_transaction_form(genesis, tx)` -> `mempool.check(tx, account)` ->
signature (`VerifyCache.verify_transaction`) -> `mempool.add(tx, account)`, where
`account` is the sender's account at the tip. `add` checks again, since the pool may
have changed while the signature was being verified.

Rules, each rejection an error with a code (docs/protocol.md, "Mempool"):
- de-duplication by id: `check`/`add` return False for a transaction already pending;
- per-sender nonce order: a sender's pending transactions carry consecutive nonces
  from its account's next nonce; anything else is `replayed_nonce`, `nonce_conflict`
  (another transaction with that nonce is pending) or `nonce_gap` (InvalidTransaction);
- feasibility: a sender's pending amount + fee never exceeds its balance
  (`insufficient_balance`, `amount_overflow`);
- bounds: at most `max_per_sender` per sender (`sender_limit`) and `max_transactions`
  and `max_bytes` in all (`mempool_full`) - MempoolFull, HTTP 429: retry later.

Because a sender's transactions are admitted only in nonce order, arrival order is a
valid block order: `select(n)` is the first n pending transactions, O(n).

After each block, `remove_block(block_txs, account_of)` drops what it committed and
evicts what it made stale: a pending transaction whose nonce the block used with
another transaction (`nonce_stale`), one its sender can no longer pay
(`insufficient_balance`), and that sender's later ones (`nonce_gap`). Every eviction is
returned with its reason, so the node can report it: nothing admitted is lost silently.

Pure: no clock, no I/O; not thread-safe (the node calls it from its event loop).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import islice

from qmemo.core.defaults import POOL
from qmemo.core.state import Account, charge
from qmemo.core.transaction import Transaction
from qmemo.core.refusals import refusal


@dataclass(frozen=True, slots=True)
class MempoolLimits:
    max_transactions: int = POOL.max_txs
    max_bytes: int = POOL.max_bytes
    max_per_sender: int = POOL.max_per_sender


@dataclass(frozen=True, slots=True)
class Evicted:
    """A pending transaction a block made invalid, and why."""

    tx: Transaction
    reason: str     # "nonce_stale", "insufficient_balance" or "nonce_gap"


class _SenderQueue:
    """One sender's pending transactions, in nonce order, and what they cost together."""

    __slots__ = ("txs", "cost")

    def __init__(self) -> None:
        self.txs: list[Transaction] = []
        self.cost = 0


class Mempool:
    def __init__(self, limits: MempoolLimits = MempoolLimits()) -> None:
        self.limits = limits
        self._by_id: dict[bytes, Transaction] = {}      # arrival order
        self._by_sender: dict[bytes, _SenderQueue] = {}
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._by_id)

    def __contains__(self, tx_id: bytes) -> bool:
        return tx_id in self._by_id

    def get(self, tx_id: bytes) -> Transaction | None:
        return self._by_id.get(tx_id)

    @property
    def size_bytes(self) -> int:
        return self._bytes

    def pending_count(self, sender: bytes) -> int:
        queue = self._by_sender.get(sender)
        return len(queue.txs) if queue else 0

    def pending_cost(self, sender: bytes) -> int:
        """What the sender's pending transactions cost together (amount + fee each): the part
        of its balance they have already spoken for."""
        queue = self._by_sender.get(sender)
        return queue.cost if queue else 0

    def check(self, tx: Transaction, account: Account) -> bool:
        """Would `tx` be admitted? False if already pending; raises the rule it breaks."""
        if tx.id in self._by_id:
            return False
        queue = self._by_sender.get(tx.sender)
        pending, pending_cost = (len(queue.txs), queue.cost) if queue else (0, 0)
        next_nonce = account.nonce + pending
        if account.nonce <= tx.nonce < next_nonce:
            raise refusal("nonce_conflict", tx.nonce)
        charge(account.balance - pending_cost, next_nonce, tx)
        if pending >= self.limits.max_per_sender:
            raise refusal("sender_limit", pending)
        if len(self._by_id) >= self.limits.max_transactions or self._bytes + tx.size > self.limits.max_bytes:
            raise refusal("mempool_full", len(self._by_id), self._bytes)
        return True

    def add(self, tx: Transaction, account: Account) -> bool:
        """Admit `tx`: True if added, False if already pending; raises the rule it breaks."""
        if not self.check(tx, account):
            return False
        queue = self._by_sender.get(tx.sender)
        if queue is None:
            queue = self._by_sender[tx.sender] = _SenderQueue()
        queue.txs.append(tx)
        queue.cost += tx.amount + tx.fee
        self._by_id[tx.id] = tx
        self._bytes += tx.size
        return True

    def select(self, max_count: int) -> list[Transaction]:
        """The transactions for the next block: the first `max_count` pending, in arrival
        order (which keeps every sender's nonces in order)."""
        return list(islice(self._by_id.values(), max_count))

    def remove_block(self, transactions: Iterable[Transaction],
                     account_of: Callable[[bytes], Account]) -> list[Evicted]:
        """Drop what a block committed and evict what it made stale; `account_of` gives
        an account as of the new tip."""
        committed = {tx.id: tx.sender for tx in transactions}
        evicted: list[Evicted] = []
        for sender in dict.fromkeys(committed.values()):   # block order: a deterministic report
            queue = self._by_sender.get(sender)
            if queue is None:
                continue
            account = account_of(sender)
            kept = _SenderQueue()
            for tx in queue.txs:
                if tx.id in committed:
                    self._drop(tx)
                    continue
                if tx.nonce < account.nonce:
                    reason = "nonce_stale"
                elif tx.nonce != account.nonce + len(kept.txs):   # after an eviction, all that follow
                    reason = "nonce_gap"
                elif kept.cost + tx.amount + tx.fee > account.balance:
                    reason = "insufficient_balance"
                else:
                    kept.txs.append(tx)
                    kept.cost += tx.amount + tx.fee
                    continue
                self._drop(tx)
                evicted.append(Evicted(tx, reason))
            if kept.txs:
                self._by_sender[sender] = kept
            else:
                del self._by_sender[sender]
        return evicted

    def _drop(self, tx: Transaction) -> None:
        del self._by_id[tx.id]
        self._bytes -= tx.size
