"""The held queue: verified transactions waiting for an earlier nonce of their sender.

Admission holds a transaction whose nonce is ahead of its sender's next pending nonce,
within a window, until the gap fills (Ethereum calls them "queued"; a client sees
"held"). This module keeps them per sender, with what each sender's held transactions
cost together and the caps on how many are held: holding is not free, or a flood of
unfunded keys could fill it (qmemo.core.pool, the reference admission; the node's
native ledger keeps the same rules). Pure bookkeeping: no clock (times come in), no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from qmemo.core.state import charge
from qmemo.core.transaction import Transaction
from qmemo.core.refusals import HELD_NONCE_CONFLICT, refusal


@dataclass(slots=True)
class Held:
    tx: Transaction
    held_at: float
    relay: bool


class HeldQueue:
    """Verified transactions waiting for an earlier nonce of their sender, and what each
    sender's held transactions cost together."""

    def __init__(self, max_txs: int, max_per_sender: int) -> None:
        self.max_txs = max_txs
        self.max_per_sender = max_per_sender
        self._by_sender: dict[bytes, dict[int, Held]] = {}
        self._ids: dict[bytes, Held] = {}
        self._cost: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, tx_id: bytes) -> bool:
        return tx_id in self._ids

    def cost(self, sender: bytes) -> int:
        """amount + fee summed over the sender's held transactions."""
        return self._cost.get(sender, 0)

    def transactions(self) -> list[Transaction]:
        """Every held transaction, each sender's in nonce order."""
        return [held.tx for slots in self._by_sender.values() for _, held in sorted(slots.items())]

    def check_room(self, sender: bytes, extra: int = 0) -> None:
        """MempoolFull unless one more of the sender's transactions (after `extra` already
        on their way) fits the per-sender and global caps."""
        slots = self._by_sender.get(sender)
        if (len(slots) if slots else 0) + extra >= self.max_per_sender:
            raise refusal("held_sender_limit", self.max_per_sender)
        if len(self._ids) >= self.max_txs:
            raise refusal("held_full", len(self._ids))

    def hold(self, tx: Transaction, now: float, relay: bool, available: int) -> None:
        """Hold `tx`, whose sender has `available` of its balance left after its pending
        transactions; raises the rule it breaks (caps, payability, a nonce already held)."""
        slots = self._by_sender.get(tx.sender)
        if slots and tx.nonce in slots:
            raise refusal(HELD_NONCE_CONFLICT, tx.nonce)
        self.check_room(tx.sender)
        cost = self.cost(tx.sender)
        charge(available - cost, tx.nonce, tx)    # payable together with everything before it
        if slots is None:
            slots = self._by_sender[tx.sender] = {}
        slots[tx.nonce] = self._ids[tx.id] = Held(tx, now, relay)
        self._cost[tx.sender] = cost + tx.amount + tx.fee

    def take_ready(self, sender: bytes, next_nonce: int) -> list[Held]:
        """Remove and return the sender's held transactions from `next_nonce` on, while consecutive."""
        slots = self._by_sender.get(sender)
        ready: list[Held] = []
        while slots and next_nonce in slots:
            held = slots.pop(next_nonce)
            self._forget(held)
            ready.append(held)
            next_nonce += 1
        if slots is not None and not slots:
            del self._by_sender[sender]
        return ready

    def remove_below(self, sender: bytes, nonce: int) -> list[Held]:
        """Remove the sender's held transactions with a nonce below `nonce` (now used)."""
        slots = self._by_sender.get(sender)
        if not slots:
            return []
        gone = [slots.pop(n) for n in [n for n in slots if n < nonce]]
        for held in gone:
            self._forget(held)
        if not slots:
            del self._by_sender[sender]
        return gone

    def expire(self, older_than: float) -> list[Held]:
        expired = [held for held in self._ids.values() if held.held_at < older_than]
        for held in expired:
            slots = self._by_sender[held.tx.sender]
            del slots[held.tx.nonce]
            if not slots:
                del self._by_sender[held.tx.sender]
            self._forget(held)
        return expired

    def _forget(self, held: Held) -> None:
        """Drop a held transaction (already out of its sender's slots) from the ids and costs."""
        tx = held.tx
        del self._ids[tx.id]
        left = self._cost[tx.sender] - tx.amount - tx.fee
        if left:
            self._cost[tx.sender] = left
        else:       # `cost` answers 0 for a sender not listed: keep no entry for one
            del self._cost[tx.sender]
