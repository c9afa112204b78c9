"""What a node's answer to a batch means for its transactions, and the queues of batches a
node's door refused (qmemo.load.sender sends; this module reads answers and keeps queues).

- `record_answer`: per-transaction outcomes from a `POST /txs` answer into the run's
  `Timings`, leaving the ones refused "for now" (`RESEND_CODES`) to send again;
- `door_retry_s`: whether an answer refused a whole batch before looking at it (503
  `busy`, a 429 of a full pool), and how long its node asked to wait;
- `DoorQueues`: each node's batches not yet taken, a refused one first;
- `Taken`, `reoffer`, `mark_backlog`: a batch offered again keeps what a node took before;
  what is still queued when the slots run out is `busy_backlog`.

Pure bookkeeping: no I/O. Never imports aiohttp.
"""

from __future__ import annotations

import heapq
import operator
import time
from array import array
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import orjson

from qmemo.load.latency import ACCEPTED, DUPLICATE, FAILED, PLANNED, REJECTED, Timings

if TYPE_CHECKING:
    from qmemo.load.sender import Batch

_STATUS = {"accepted": ACCEPTED, "duplicate": DUPLICATE, "rejected": REJECTED}
NOT_TAKEN = 503      # a whole-batch "did not take it" status (not ready, behind, busy)

# Rejections that are "not now", not "never": the node's queues are full (they drain with
# every block), or the sender's earlier nonce has not reached this node yet (it is being
# resent, or relayed from the node it went to). A wallet sends such a transaction again,
# and so does the generator (`_post`): a refused nonce left unsent is a gap that every
# later nonce of its sender falls into (docs/soak.md, "Ten minutes at 80% of a quiet
# sweep's saturation"). The wait doubles from the first to the last.
RESEND_CODES = frozenset(("busy", "mempool_full", "sender_limit", "held_full", "held_sender_limit", "nonce_gap"))
# A batch's transactions marked with these are in its node's queue, to be offered again.
BUSY, REQUEUED = "busy", "requeued"
AGAIN_LATER = frozenset((BUSY, REQUEUED))
# A node behind its schedule catches up (two batches a slot) once its door has refused
# nothing for this long, and at least a block interval (SendConfig.for_blocks): a node past
# saturation refuses again within a block, and catching up there would only double what it
# is offered.
CALM_S = 2.0
BUSY_BACKLOG = "busy_backlog"    # still queued when the run's slots were used: refused at the door, or behind

class DoorQueues:
    """Each node's batches not yet taken, in plan order, and how long a node asked to wait.

    A batch a node's door refused (503 `busy`: nothing of it was read) goes back to its
    node's queue and is offered again in that node's next slot, before any later batch of
    the node: its senders' later nonces follow it, as they would have. Meanwhile the
    node's slots pass unsent until its `retry_after_ms` is over (counted: `door_waits`);
    once it has refused nothing for `calm_s`, each of its slots carries a second batch
    until it is back on its schedule (`catch_ups`, qmemo.load.sender).
    So the open-loop schedule keeps its slots, the door decides what is taken, and a
    refusal never leaves a gap that strands its senders' later nonces."""

    def __init__(self, batches: Sequence[Batch], calm_s: float = CALM_S) -> None:
        self.calm_s = calm_s
        self._queued: dict[str, deque[int]] = {}
        for position, batch in enumerate(batches):
            self._queued.setdefault(batch.target, deque()).append(position)
        self._returned: dict[str, list[int]] = {target: [] for target in self._queued}
        self._positions = {target: list(queued) for target, queued in self._queued.items()}
        self._until: dict[str, float] = {}
        self._refused_at: dict[str, float] = {}

    def pushed_back(self, target: str) -> bool:
        """Has `target`'s door refused a batch in this run?"""
        return target in self._until

    def waiting(self, target: str) -> bool:
        return time.monotonic() < self._until.get(target, 0.0)

    def calm(self, target: str) -> bool:
        """Has `target`'s door refused nothing for `calm_s`?"""
        return time.monotonic() - self._refused_at.get(target, -1e18) >= self.calm_s

    def take(self, target: str) -> int | None:
        """The lowest batch of `target`'s not taken (a refused one first), or None."""
        returned = self._returned[target]
        if returned:
            return heapq.heappop(returned)
        queued = self._queued[target]
        return queued.popleft() if queued else None

    def give_back(self, target: str, position: int) -> None:
        heapq.heappush(self._returned[target], position)

    def refused(self, target: str, position: int, retry_after_s: float) -> None:
        self.give_back(target, position)
        self._refused_at[target] = time.monotonic()
        self._until[target] = max(self._until.get(target, 0.0), time.monotonic() + retry_after_s)

    def below_taken(self) -> list[tuple[str, int]]:
        """Returned batches of each node below the highest of its batches sent and not
        returned, lowest first."""
        gaps = []
        for target, returned in self._returned.items():
            head = self._queued[target][0] if self._queued[target] else None
            out = set(returned)
            sent = [p for p in self._positions[target] if (head is None or p < head) and p not in out]
            if sent:
                gaps += [(target, p) for p in sorted(returned) if p < sent[-1]]
        return gaps

    def take_back(self, target: str, position: int) -> None:
        """Take `position` out of `target`'s returned batches (to offer it now)."""
        returned = self._returned[target]
        returned.remove(position)
        heapq.heapify(returned)

    def targets(self) -> list[str]:
        return list(self._queued)

    def left(self) -> list[int]:
        """Every batch not taken when the schedule ended."""
        return sorted([*(p for q in self._queued.values() for p in q),
                       *(p for r in self._returned.values() for p in r)])


def reoffer(timings: Timings, batch: Batch, planned: array | None = None, slot: Batch | None = None,
            at: float | None = None) -> list[Taken]:
    """Ready `batch` to be offered again: what a node took before keeps its own times and
    answer (returned, to be restored after the new answer); the rest is in flight again, not
    refused, with the intended times of `slot` of the `planned` schedule if given, or
    intended `at` (an offer after the schedule's last slot: it counts from when it is made)."""
    taken: list[Taken] = []
    status = timings.status
    for k, i in enumerate(range(batch.first, batch.last)):
        if status[i] == ACCEPTED or status[i] == DUPLICATE:
            taken.append(Taken(i, status[i], timings.sent[i], timings.due[i], timings.accepted[i]))
            continue
        if planned is not None and slot is not None:
            timings.intended[i] = planned[slot.first + k] if slot.first + k < slot.last else planned[slot.last - 1]
        elif at is not None:
            timings.intended[i] = at
        status[i] = PLANNED
        timings.reasons.pop(i, None)
    return taken


def mark_backlog(batches: Sequence[Batch], doors: DoorQueues, timings: Timings, t: float, *,
                  interrupted: bool = False) -> None:
    """The batches still queued when every slot was used - refused at the door (or sent
    back behind such a batch), or never offered because their node's slots went to those:
    what of them was not taken is `busy_backlog` (after an interrupt, what was never sent
    stays unsent)."""
    for position in doors.left():
        batch = batches[position]
        for i in range(batch.first, batch.last):
            status = timings.status[i]
            refused = status == REJECTED and timings.reasons.get(i) in AGAIN_LATER
            if refused or (status == PLANNED and not interrupted):
                timings.mark_answer(i, t, REJECTED, BUSY_BACKLOG)


def door_retry_s(status: int, payload: bytes) -> float | None:
    """The wait of an answer that refused a whole batch before looking at it - 503 `busy` (its
    `retry_after_ms`) or a 429 of a full pool (1 s) - or None if the answer is not one."""
    if status != NOT_TAKEN and status != 429:
        return None
    try:
        document = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(document, dict) or "results" in document:
        return None
    code = document.get("error")
    if status == 429:
        return 1.0 if code in RESEND_CODES else None
    if code != BUSY:
        return None
    wait_ms = document.get("retry_after_ms")
    return wait_ms / 1000 if isinstance(wait_ms, int) and 0 < wait_ms <= 60_000 else 1.0


@dataclass(frozen=True, slots=True)
class Taken:
    """A transaction a node took before its batch was offered again: its first answer stands."""

    index: int
    status: int
    sent: float
    due: float
    accepted: float

    @staticmethod
    def restore(timings: Timings, taken: Sequence[Taken]) -> None:
        for t in taken:
            timings.status[t.index] = t.status
            timings.sent[t.index], timings.due[t.index], timings.accepted[t.index] = t.sent, t.due, t.accepted
            timings.reasons.pop(t.index, None)


def record_answer(indices: Sequence[int], timings: Timings, t: float, status: int, payload: bytes,
                   resend: Callable[[int, str], bool] | None = None) -> list[int]:
    """Per-transaction outcome from a /txs answer for the plan's transactions `indices`
    (the request's order); a whole-request error applies to all. Rejections that
    `resend(plan index, code)` says to send again are left unmarked: their positions in
    `indices` are returned."""
    try:
        document = orjson.loads(payload)
    except orjson.JSONDecodeError:
        document = None
    results = document.get("results") if isinstance(document, dict) else None
    count = len(indices)
    if status == 200 and isinstance(results, list) and len(results) == count:
        if document.get("accepted") == count and all_accepted(results):
            # The usual answer below saturation: one slice write per array instead of a
            # call per transaction (the results are still each checked, in C).
            mark_all(timings, indices, t, ACCEPTED)
            return []
        again: list[int] = []
        for position, (i, result) in enumerate(zip(indices, results)):
            outcome = _STATUS.get(result.get("status") if isinstance(result, dict) else None)
            if outcome is None:
                timings.mark_answer(i, t, FAILED, "unreadable_result")
            elif outcome == REJECTED and resend is not None and resend(i, result.get("code")):
                again.append(position)
            else:
                timings.mark_answer(i, t, outcome, result.get("code") if outcome == REJECTED else None)
        return again
    code = document.get("error") if isinstance(document, dict) else None
    if (status == 429 or door_retry_s(status, payload) is not None) and resend is not None:
        # Refused whole for now (the mempool was full, or the door busy, before the batch was looked at).
        again = [position for position, i in enumerate(indices) if resend(i, code)]
        if len(again) == count:
            return again
        for position, i in enumerate(indices):
            if position not in again:
                timings.mark_answer(i, t, REJECTED, code or "http_429")
        return again
    mark_all(timings, indices, t, REJECTED if 400 <= status < 500 else FAILED, code or f"http_{status}")
    return []


_status_of = operator.itemgetter("status")


def all_accepted(results: list) -> bool:
    """Whether every result says "accepted": map() and list.count() run the loop in C, where
    a generator expression would run it in Python per transaction; a result that is not
    an object with a status makes the answer be read result by result."""
    try:
        return list(map(_status_of, results)).count("accepted") == len(results)
    except (TypeError, KeyError, IndexError):
        return False


def mark_all(timings: Timings, indices: Sequence[int], t: float, status: int, reason: str | None = None) -> None:
    """The same answer for every one of `indices`: one slice write when they are a whole batch."""
    if isinstance(indices, range):
        timings.mark_answer_range(indices.start, indices.stop, t, status, reason)
    else:
        for i in indices:
            timings.mark_answer(i, t, status, reason)
