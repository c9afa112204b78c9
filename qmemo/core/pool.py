"""Admission's rules in plain Python: the reference the node's native ledger is held to.

A node admits a batch in two steps with the signatures checked in between (on other
threads, while other batches arrive):

1. `precheck(items)`, cheap checks first, for each transaction in order: it decoded;
   not a duplicate (pending, held, in flight in another batch, or recently committed);
   the chain's form rules (`check_transaction_form`); nonce and balance feasibility
   against the tip and the pool. A transaction whose nonce is its sender's next pending
   one must fit the pool (`Mempool.check`); one ahead of it by at most
   `held.window` (or right after an earlier candidate of the batch) must be payable
   with all its sender has pending, held or earlier in the batch, and find room in the
   held queue. What survives is a candidate, in flight until step 2.
2. `commit(batch, verdicts, now, relay)`: in input order, a candidate with a bad signature
   is refused; one a block committed meanwhile is a duplicate; the rest join the pool
   (`Mempool.add`, which checks again: the pool may have changed) or, for a nonce gap
   within the window, the held queue; each that joins the pool releases its sender's
   held transactions that are now next.

After a block, `block_applied` drops what it committed and evicts what it made stale
(`Mempool.remove_block`), drops held transactions below their sender's new nonce
(`nonce_stale` unless the block had them) and releases the held ones now next. After a
branch switch, `blocks_undone` makes the undone transactions pending again. Every
eviction is reported with its reason: nothing admitted is dropped silently.

The node does all of this in C (qmemo/node/native, through qmemo.node.ledger), per
batch; this module is what its outcomes, codes and state are compared with
(tests/unit/test_ledger_admission.py), as `apply_block` is for blocks. Pure: time and
the signature verdicts come in as arguments.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from qmemo.core.defaults import POOL
from qmemo.core.genesis import Genesis
from qmemo.core.held import HeldQueue
from qmemo.core.mempool import Mempool
from qmemo.core.refusals import refusal
from qmemo.core.state import EMPTY_ACCOUNT, Account, charge, check_transaction_form
from qmemo.core.transaction import Transaction
from qmemo.errors import DecodeError, InvalidTransaction, MempoolFull, QmemoError

ACCEPTED, DUPLICATE, REJECTED = "accepted", "duplicate", "rejected"


@dataclass(frozen=True, slots=True)
class HeldLimits:
    window: int = POOL.held_window          # how far past its next pending nonce a sender may send
    max_txs: int = POOL.held_max_txs        # held transactions, all senders together
    per_sender: int = POOL.held_per_sender  # held transactions of one sender
    ttl_s: float = POOL.held_ttl_s          # how long a held transaction waits for its gap


@dataclass(slots=True)
class Outcome:
    """What became of one item: status, and the error of a rejection."""

    tx_id: bytes | None
    status: str
    error: QmemoError | None = None


@dataclass(slots=True)
class Prechecked:
    """A batch between its two steps."""

    items: list[Transaction | DecodeError]
    outcomes: list[Outcome | None]
    candidates: list[int] = field(default_factory=list)


class ReferencePool:
    """The pending pool, the held queue and the recent sets, over `accounts` (the tip's)."""

    def __init__(self, genesis: Genesis, accounts: dict[bytes, Account], mempool: Mempool,
                 held: HeldLimits = HeldLimits(), *, committed_memory: int = 100_000,
                 evicted_memory: int = 100_000) -> None:
        self.genesis = genesis
        self.accounts = accounts
        self.mempool = mempool
        self.limits = held
        self.held = HeldQueue(held.max_txs, held.per_sender)
        self.inflight: set[bytes] = set()
        self.committed: OrderedDict[bytes, None] = OrderedDict()
        self.evicted: OrderedDict[bytes, str] = OrderedDict()
        self._committed_memory = committed_memory
        self._evicted_memory = evicted_memory

    def account(self, address: bytes) -> Account:
        return self.accounts.get(address, EMPTY_ACCOUNT)

    def pending_nonce(self, address: bytes) -> int:
        return self.account(address).nonce + self.mempool.pending_count(address)

    def status(self, tx_id: bytes) -> str | None:
        """"pending", "held", "evicted:<reason>" or None."""
        if tx_id in self.mempool or tx_id in self.inflight:
            return "pending"
        if tx_id in self.held:
            return "held"
        reason = self.evicted.get(tx_id)
        return f"evicted:{reason}" if reason else None

    # --- admission ----------------------------------------------------------------------------

    def precheck(self, items: Sequence[Transaction | DecodeError]) -> Prechecked:
        batch = Prechecked(list(items), [None] * len(items))
        mempool, held, window = self.mempool, self.held, self.limits.window
        batch_next: dict[bytes, int] = {}
        batch_cost: dict[bytes, int] = {}
        for position, tx in enumerate(batch.items):
            if isinstance(tx, DecodeError):
                batch.outcomes[position] = Outcome(None, REJECTED, tx)
                continue
            tx_id = tx.id
            if tx_id in self.inflight or tx_id in mempool or tx_id in held or tx_id in self.committed:
                batch.outcomes[position] = Outcome(tx_id, DUPLICATE)
                continue
            try:
                check_transaction_form(self.genesis, tx)
                sender = tx.sender
                account = self.account(sender)
                next_pending = account.nonce + mempool.pending_count(sender)
                nonce = tx.nonce
                if nonce == next_pending:
                    mempool.check(tx, account)
                elif nonce == batch_next.get(sender) or next_pending < nonce <= next_pending + window:
                    spent = mempool.pending_cost(sender) + held.cost(sender) + batch_cost.get(sender, 0)
                    charge(account.balance - spent, nonce, tx)
                    if nonce != batch_next.get(sender):
                        held.check_room(sender)
                else:
                    mempool.check(tx, account)      # raises the rule: replay, conflict or gap
            except QmemoError as exc:
                batch.outcomes[position] = Outcome(tx_id, REJECTED, exc)
                continue
            batch_next[sender] = nonce + 1
            batch_cost[sender] = batch_cost.get(sender, 0) + tx.amount + tx.fee
            self.inflight.add(tx_id)
            batch.candidates.append(position)
        return batch

    def commit(self, batch: Prechecked, verdicts: Sequence[bool], now: float,
               relay: bool) -> tuple[list[Outcome], list[bytes], list[tuple[bytes, str]]]:
        """The outcomes, the encodings to relay, and the evictions (id, reason)."""
        relayed: list[bytes] = []
        evicted: list[tuple[bytes, str]] = []
        window = self.limits.window
        try:
            for position, ok in zip(batch.candidates, verdicts, strict=True):
                tx = batch.items[position]
                assert isinstance(tx, Transaction)
                tx_id = tx.id
                if not ok:
                    batch.outcomes[position] = Outcome(tx_id, REJECTED, refusal("bad_signature"))
                    continue
                if tx_id in self.committed:
                    batch.outcomes[position] = Outcome(tx_id, DUPLICATE)
                    continue
                account = self.account(tx.sender)
                try:
                    added = self.mempool.add(tx, account)
                except InvalidTransaction as exc:
                    error: QmemoError = exc
                    if exc.code == "nonce_gap" and tx.nonce - self.pending_nonce(tx.sender) <= window:
                        try:
                            self.held.hold(tx, now, relay, account.balance - self.mempool.pending_cost(tx.sender))
                        except (InvalidTransaction, MempoolFull) as held_exc:
                            error = held_exc
                        else:
                            batch.outcomes[position] = Outcome(tx_id, ACCEPTED)
                            continue
                    batch.outcomes[position] = Outcome(tx_id, REJECTED, error)
                    continue
                except MempoolFull as exc:
                    batch.outcomes[position] = Outcome(tx_id, REJECTED, exc)
                    continue
                if not added:
                    batch.outcomes[position] = Outcome(tx_id, DUPLICATE)
                    continue
                batch.outcomes[position] = Outcome(tx_id, ACCEPTED)
                if relay:
                    relayed.append(tx.encoded)
                if self.held:
                    relayed.extend(self._promote(tx.sender, evicted))
        finally:
            self.inflight.difference_update(batch.items[p].id for p in batch.candidates)   # type: ignore[union-attr]
        return batch.outcomes, relayed, evicted     # type: ignore[return-value]

    def _promote(self, sender: bytes, evicted: list[tuple[bytes, str]]) -> list[bytes]:
        relayed: list[bytes] = []
        account = self.account(sender)
        for held in self.held.take_ready(sender, self.pending_nonce(sender)):
            try:
                self.mempool.add(held.tx, account)
            except (InvalidTransaction, MempoolFull) as exc:
                self._evict(held.tx.id, exc.code, evicted)
                continue
            if held.relay:
                relayed.append(held.tx.encoded)
        return relayed

    # --- blocks -----------------------------------------------------------------------------------

    def block_applied(self, transactions: Sequence[Transaction]) -> tuple[list[tuple[bytes, str]], list[bytes]]:
        """After `accounts` took the block: the evictions (id, reason) and what to relay."""
        evicted: list[tuple[bytes, str]] = []
        for tx in transactions:
            self.committed[tx.id] = None
        while len(self.committed) > self._committed_memory:
            self.committed.popitem(last=False)
        for gone in self.mempool.remove_block(transactions, self.account):
            self._evict(gone.tx.id, gone.reason, evicted)
        relayed: list[bytes] = []
        if not self.held:
            return evicted, relayed
        in_block = {tx.id for tx in transactions}
        for sender in dict.fromkeys(tx.sender for tx in transactions):
            for held in self.held.remove_below(sender, self.account(sender).nonce):
                if held.tx.id not in in_block:
                    self._evict(held.tx.id, "nonce_stale", evicted)
            relayed.extend(self._promote(sender, evicted))
        return evicted, relayed

    def blocks_undone(self, transactions: Sequence[Transaction]) -> list[tuple[bytes, str]]:
        """After `accounts` were rolled back: the undone transactions are pending again,
        before the pending ones of the same senders. The evictions (id, reason)."""
        evicted: list[tuple[bytes, str]] = []
        undone = list(transactions)
        if not undone:
            return evicted
        for tx in undone:
            self.committed.pop(tx.id, None)
        senders = {tx.sender for tx in undone}
        pending = [tx for tx in self.mempool.select(len(self.mempool)) if tx.sender in senders]
        self.mempool.remove_block(pending, self.account)
        for tx in sorted(undone + pending, key=lambda t: (t.sender, t.nonce)):
            try:
                self.mempool.add(tx, self.account(tx.sender))
            except (InvalidTransaction, MempoolFull) as exc:
                self._evict(tx.id, f"reorg_{exc.code}", evicted)
        return evicted

    def expire_held(self, older_than: float) -> list[tuple[bytes, str]]:
        evicted: list[tuple[bytes, str]] = []
        for held in self.held.expire(older_than):
            self._evict(held.tx.id, "nonce_gap_timeout", evicted)
        return evicted

    def _evict(self, tx_id: bytes, reason: str, evicted: list[tuple[bytes, str]]) -> None:
        evicted.append((tx_id, reason))
        self.evicted[tx_id] = reason
        while len(self.evicted) > self._evicted_memory:
            self.evicted.popitem(last=False)
