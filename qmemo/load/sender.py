"""Open-loop sending: every batch leaves at its scheduled time, whatever earlier replies do.

Sends never wait for earlier replies. The only thing that can delay a send is the
explicit in-flight cap (`max_in_flight` requests outstanding) and the connection pool
size; both are options, and any delay they cause is recorded, because latency is
measured from the *intended* time (see latency.py).

A batch of transactions is sent when its last member is due: a transaction never
leaves before its intended time, and the wait for the rest of its batch counts in its
latency. Request bodies are encoded before the run starts, so the sending path does no
signing and no encoding.

Failover, as a wallet does it: when a node does not answer - a connection error, a
timeout (`attempt_timeout_s`, far below the request timeout, so a stopped node costs
seconds, not the whole run), 503 "not ready" or any other 5xx - the *same signed batch*
goes to the next node that is not known to be down. Resending is safe because admission is idempotent by
transaction id: a copy the first node (or its relay) already admitted is answered
"duplicate", which counts as accepted.

Unknown outcomes: a try whose request may have reached the node but whose answer was
lost - the connection reset or closed under it, a timeout, a 5xx other than 503 (the
node failed while handling it) - may or may not have been admitted. Its transactions
are sent again like any other failover, and flagged (`SendProgress.outcome_unknown`):
the summary counts them (`outcome_unknown_resent`) and how each was resolved - taken on
the resend, answered `duplicate` (the lost answer had been an accept), refused, or no
answer before the window closed. A connection refused is not one: the request never
left. A node that failed is skipped for
`down_for_s`, so later batches for it go straight to the others. When no node answers,
the batch goes round the nodes again, each round waiting twice as long (3, 6, 12 s),
until `request_timeout_s` (or `resend_for_s`, if longer) after its first try, as
docs/api.md asks of a client whose nodes all died or are past saturation:
without it, every later nonce of a sender whose batch failed waits on a gap that never
fills, held until its hold expires. Per sender the nonce
order is kept as it always was: a sender's batches still leave in nonce order, and a
node holds a nonce that overtook its predecessor until the gap fills.

Refused for now, sent again: a node that answers a transaction with a full queue
(`mempool_full`, `held_full`, ...) or `nonce_gap` (its earlier nonce has not reached that
node yet) may take it a moment later, and a wallet tries again; the generator resends just
those transactions, same bytes, waiting 0.5, 1, 2, 4, 4 ... s, within the batch's window
(`request_timeout_s`). Their answer is the last one: accepted, or the refusal once the
window closes. A `nonce_gap` is resent only while the sender's previous nonce may still
land: once that one is refused for good, the gap never fills, and resending every later
nonce of the sender for the whole window would only add load, and with the in-flight
slots held through the waits the generator falls behind its schedule (docs/soak.md, "The
same soak with a generator that resends"). A batch waiting to
resend gives its in-flight slot back meanwhile, so the schedule goes on.
The counters (failures per node, batches and transactions failed over, resends) go to
the live status and the run's manifest and summary.
"""

from __future__ import annotations

import asyncio
import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import orjson

from qmemo.errors import NodeUnreachable
from qmemo.frames import decode_frames, encode_frames
from qmemo.load.answers import (AGAIN_LATER, BUSY, CALM_S, NOT_TAKEN, REJECTED, REQUEUED, RESEND_CODES, DoorQueues,
                                Taken, door_retry_s, mark_all, mark_backlog, record_answer, reoffer)
from qmemo.load.latency import FAILED, Timings
from qmemo.net.lean_post import LeanNode, LeanPosts



@dataclass(frozen=True, slots=True)
class Batch:
    """Transactions first..last-1 of the plan, framed into one request body for one node."""

    first: int
    last: int
    target: str          # node base URL
    body: bytes          # application/octet-stream: see docs/api.md, POST /txs


@dataclass(frozen=True, slots=True)
class SendConfig:
    max_in_flight: int = 64        # outstanding requests at most (explicit, reported)
    connections: int = 32          # connection pool size across all nodes
    # How long a batch is tried in all: past it, if no node answered, it is counted failed.
    request_timeout_s: float = 30.0
    # One node's first try at a batch: past it, the batch goes to the next node. 3 s tells a
    # stopped node from a busy one at moderate load; past saturation a node may take longer,
    # so each further round over the nodes waits twice as long (3, 6, 12 s), within
    # `request_timeout_s`.
    attempt_timeout_s: float = 3.0
    down_for_s: float = 2.0        # how long a node that failed is skipped
    resend_for_s: float = 0.0      # tries a batch no node answered for this long, if above request_timeout_s
    # A node behind its schedule catches up once its door refused nothing this long, and at
    # least a block interval (`for_blocks`): a node past saturation refuses about once a block.
    catch_up_after_s: float = CALM_S

    def for_blocks(self, block_interval_s: float) -> SendConfig:
        return replace(self, catch_up_after_s=max(self.catch_up_after_s, block_interval_s))


@dataclass
class SendProgress:
    """Live counters the status file and the summary read."""

    sent: int = 0
    answered: int = 0
    in_flight: int = 0
    max_in_flight_seen: int = 0
    node_failures: dict[str, int] = field(default_factory=dict)   # tries a node did not answer
    failovers: int = 0             # batches sent to a node not their own (resent, or routed around one down)
    failover_txs: int = 0          # transactions in them
    resends: int = 0               # requests that sent again what a node refused for now (RESEND_CODES)
    resend_txs: int = 0            # transactions in them
    unknown_resends: int = 0       # deliveries sent again after a try whose outcome is unknown
    door_refusals: int = 0         # batches a node's door refused (503 busy), each offered again later
    door_refused_txs: int = 0      # transactions in them, once per refusal
    door_waits: int = 0            # slots not sent: their node had asked to wait (its Retry-After)
    door_waited_txs: int = 0       # transactions those slots would have carried
    requeues: int = 0              # batches sent back to their node's queue: part refused for now
    gap_offers: int = 0            # batches offered after the last slot: below ones taken, or while taken
    catch_ups: int = 0             # batches a node behind its schedule took as a second one in a slot
    # Per planned transaction, 1 once a request carrying it was sent again after a try whose
    # answer was lost (sized by `send_batches`).
    outcome_unknown: bytearray = field(default_factory=bytearray)


CLOSE_GAPS_S = 10.0          # after the last slot, how long refused batches below taken ones are offered
RESEND_FIRST_WAIT_S = 0.5
RESEND_MAX_WAIT_S = 4.0

# A send due within this long is waited for with a plain sleep; an interrupt then waits at
# most this long (qmemo.load.run stops sending on Ctrl-C).
STOP_CHECK_S = 0.05

# NOT_TAKEN (503) says the node did not take the batch (not ready, behind its peers, busy):
# another node may. Every other 5xx leaves the outcome unknown: the node failed while
# handling the request, perhaps after admitting it.


class _NodeHealth:
    """When each node last failed; a node that failed recently is tried last."""

    def __init__(self, nodes: Sequence[str], down_for_s: float) -> None:
        self.nodes = list(dict.fromkeys(nodes))
        self.down_for_s = down_for_s
        self._failed_at: dict[str, float] = {}

    def failed(self, node: str) -> None:
        self._failed_at[node] = time.monotonic()

    def order(self, target: str) -> list[str]:
        """Every node once, the batch's own target first; nodes that failed within
        `down_for_s` after the rest (still tried: they may all be back)."""
        now = time.monotonic()
        rotated = [target] + [n for n in self.nodes if n != target]
        up = [n for n in rotated if now - self._failed_at.get(n, -1e18) >= self.down_for_s]
        return up + [n for n in rotated if n not in up]


async def send_batches(batches: list[Batch], timings: Timings, config: SendConfig, *,
                       start: float, progress: SendProgress, stop: asyncio.Event,
                       nodes: Sequence[str] = (), previous: Sequence[int] | None = None) -> None:
    """Send every batch at its scheduled time (perf_counter `start` + intended offset),
    failing over among `nodes` (default: the batches' targets). `previous`: for each
    planned transaction the index of its sender's previous nonce (-1 for none;
    `Workload.previous`); without it, every `nonce_gap` is sent again."""
    health = _NodeHealth(list(nodes) or [batch.target for batch in batches], config.down_for_s)
    if len(progress.outcome_unknown) < len(timings):
        progress.outcome_unknown = bytearray(len(timings))
    slots = asyncio.Semaphore(config.max_in_flight)
    tasks: set[asyncio.Task] = set()
    posts = LeanPosts(config.connections)
    doors = DoorQueues(batches, config.catch_up_after_s)
    planned = array("d", timings.intended)     # the schedule as planned: a slot's times
    try:
        clients = {node: posts.node(node) for node in {*health.nodes, *(batch.target for batch in batches)}}
        sending = _Sending(clients, timings, start, progress, health, config.attempt_timeout_s,
                           max(config.request_timeout_s, config.resend_for_s), stop, slots, previous, doors)
        def launch(position: int, batch: Batch, taken: list[Taken], due: float) -> None:
            sent_at = time.perf_counter() - start
            timings.mark_sent_range(batch.first, batch.last, sent_at, due - start)
            progress.sent += batch.last - batch.first
            progress.in_flight += 1
            progress.max_in_flight_seen = max(progress.max_in_flight_seen, progress.in_flight)
            task = asyncio.create_task(_post(batch, sending, position, taken))
            tasks.add(task)
            task.add_done_callback(lambda t: (tasks.discard(t), slots.release()))

        for slot_position, slot in enumerate(batches):
            due = start + planned[slot.last - 1]
            # Waited again until it is due: uvloop's timers count whole milliseconds of a
            # clock read at the loop's turn, so one may fire up to ~1 ms early. A plain sleep
            # when the batch is due within STOP_CHECK_S (the usual case: batches are 20 ms
            # apart): waiting on `stop` costs a task and its cancellation per batch.
            while (delay := due - time.perf_counter()) > 0 and not stop.is_set():
                if delay <= STOP_CHECK_S:
                    await asyncio.sleep(delay)
                    continue
                try:
                    await asyncio.wait_for(stop.wait(), timeout=delay)
                except asyncio.TimeoutError:
                    pass
            if stop.is_set():
                break
            if doors.waiting(slot.target):
                progress.door_waits += 1
                progress.door_waited_txs += slot.last - slot.first
                continue
            position = doors.take(slot.target)
            if position is None:
                continue
            batch = batches[position]
            # Offered again (or later than planned, behind a refused one): the latency of what
            # it carries untaken counts from this slot, the attempt that carries it.
            taken = reoffer(timings, batch, planned, slot) if batch is not slot else []
            if slots.locked():
                # The in-flight cap is reached: wait for a slot, or for an interrupt.
                acquire = asyncio.ensure_future(slots.acquire())
                stopped = asyncio.ensure_future(stop.wait())
                await asyncio.wait({acquire, stopped}, return_when=asyncio.FIRST_COMPLETED)
                stopped.cancel()
                if not acquire.done():
                    acquire.cancel()
                    doors.give_back(batch.target, position)
                    break
            else:
                await slots.acquire()
            if stop.is_set():
                slots.release()
                doors.give_back(batch.target, position)
                break
            launch(position, batch, taken, due)
            # A node whose door made it skip slots is behind its schedule: once its door has
            # been calm a while, each of its slots carries one batch more, so a passing refusal
            # (a restart, a burst) is made up within the run. A node past saturation is never
            # calm, and is offered no more than its schedule.
            if position < slot_position and not slots.locked() and doors.calm(slot.target):
                extra = doors.take(slot.target)
                if extra is not None:
                    await slots.acquire()
                    launch(extra, batches[extra], reoffer(timings, batches[extra], planned, slot), due)
                    progress.catch_ups += 1
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        await _close_gaps(batches, doors, sending, stop)
        mark_backlog(batches, doors, timings, time.perf_counter() - start, interrupted=stop.is_set())
    finally:
        for task in tasks:          # left only when sending itself failed or was cancelled
            task.cancel()
        posts.close()


@dataclass(slots=True)
class _Sending:
    """What every batch's task shares during one run."""

    clients: dict[str, LeanNode]     # by node URL: one set of connections for all
    timings: Timings
    start: float                   # perf_counter at the plan's time 0
    progress: SendProgress
    health: _NodeHealth
    attempt_timeout_s: float
    window_s: float                # how long a batch is tried and resent in all
    stop: asyncio.Event | None = None
    slots: asyncio.Semaphore | None = None     # the in-flight cap; None: uncapped
    previous: Sequence[int] | None = None      # `Workload.previous`
    doors: DoorQueues | None = None                # batches each node's door refused, to offer again


async def _close_gaps(batches: Sequence[Batch], doors: DoorQueues, run: _Sending, stop: asyncio.Event) -> None:
    """After the last slot: a refused batch below one its node took may hold the earlier
    nonces of senders whose later ones that node holds (sent while the refusal was on its
    way). Such batches are offered again, in order, each after its node's wait, until taken
    or `CLOSE_GAPS_S` pass: else what the node holds waits on a gap that never fills.
    Then each node's batches still queued are offered in order while it takes them: a node
    that refused in a passing burst near the end takes them; one past saturation refuses
    the first again, and the rest is `busy_backlog`. Each such offer is intended when it is
    made, as a re-offer in a slot is intended at its slot: past the schedule's end, so
    outside the measured window (its latency percentiles and committed TPS), and still in
    the counts."""
    deadline = time.monotonic() + CLOSE_GAPS_S
    while not stop.is_set() and time.monotonic() < deadline:
        gaps = doors.below_taken()
        if not gaps:
            break
        for target, position in gaps:
            while doors.waiting(target) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            doors.take_back(target, position)
            await _offer_after_schedule(batches, run, position)
    for target in doors.targets():
        while not stop.is_set() and time.monotonic() < deadline:
            while doors.waiting(target) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            position = doors.take(target)
            if position is None:
                break
            pushed_back = run.progress.door_refusals + run.progress.requeues
            await _offer_after_schedule(batches, run, position)
            if run.progress.door_refusals + run.progress.requeues > pushed_back:
                break


async def _offer_after_schedule(batches: Sequence[Batch], run: _Sending, position: int) -> None:
    """Offer batch `position` once the schedule ended: intended now (`reoffer`'s `at`)."""
    batch = batches[position]
    t = time.perf_counter() - run.start
    taken = reoffer(run.timings, batch, at=t)
    run.timings.mark_sent_range(batch.first, batch.last, t, t)
    run.progress.gap_offers += 1
    run.progress.in_flight += 1
    await _post(batch, run, position, taken)


async def _post(batch: Batch, run: _Sending, position: int = -1, taken: Sequence[Taken] = ()) -> None:
    """Deliver the batch (`_deliver`: its target first, failing over), then resend what a
    node refused only for now (`_resendable`), waiting longer each time, until
    `window_s` after the first try or an interrupt; the last answer is final. The task
    holds an in-flight slot while a request is out, not while it waits to resend: the
    schedule goes on meanwhile."""
    deadline = time.monotonic() + run.window_s
    indices: Sequence[int] = range(batch.first, batch.last)     # plan indices of `body`'s transactions
    body = batch.body
    wait_s = RESEND_FIRST_WAIT_S
    timings, progress = run.timings, run.progress
    try:
        while True:
            answer, resent_unknown = await _deliver(run, batch.target, body, len(indices), deadline)
            if resent_unknown:
                _flag_unknown(progress, indices)
            t = time.perf_counter() - run.start
            if isinstance(answer, str):
                mark_all(timings, indices, t, FAILED, answer)
                Taken.restore(timings, taken)
                return
            door_wait_s = door_retry_s(*answer)
            if door_wait_s is not None and run.doors is not None and body is batch.body:
                # Refused at the door, undecoded: offered again in its node's next slot.
                mark_all(timings, indices, t, REJECTED, BUSY)
                Taken.restore(timings, taken)
                progress.door_refusals += 1
                progress.door_refused_txs += len(indices) - len(taken)
                run.doors.refused(batch.target, position, door_wait_s)
                return
            last_try = time.monotonic() + wait_s >= deadline or (run.stop is not None and run.stop.is_set())
            again = record_answer(indices, timings, t, *answer,
                                   resend=None if last_try else lambda i, code: _resendable(run, i, code))
            if taken:
                Taken.restore(timings, taken)
                kept = {t.index for t in taken}
                again = [p for p in again if indices[p] not in kept]
                taken = ()
            if not again:
                return
            if run.doors is not None and body is batch.body and run.doors.pushed_back(batch.target):
                # Refused for now at a node whose door has refused batches: an earlier nonce of
                # a sender may be in one. The whole batch goes back to its node's queue, behind
                # those, so its senders' nonces arrive in order; what was taken is "duplicate"
                # next time.
                for p in again:
                    timings.mark_answer(indices[p], t, REJECTED, REQUEUED)
                progress.requeues += 1
                run.doors.give_back(batch.target, position)
                return
            progress.resends += 1
            progress.resend_txs += len(again)
            frames = decode_frames(body, len(indices), "transaction")
            body = encode_frames([frames[p] for p in again])
            indices = [indices[p] for p in again]
            await _wait(run, wait_s)
            wait_s = min(2 * wait_s, RESEND_MAX_WAIT_S)
    finally:
        progress.in_flight -= 1
        progress.answered += batch.last - batch.first


def _flag_unknown(progress: SendProgress, indices: Sequence[int]) -> None:
    """Transactions `indices` were sent again after a try whose answer was lost."""
    progress.unknown_resends += 1
    flags = progress.outcome_unknown
    if isinstance(indices, range):
        flags[indices.start:indices.stop] = b"\x01" * len(indices)
    else:
        for i in indices:
            flags[i] = 1


def _behind_door(run: _Sending, index: int) -> bool:
    """Is planned transaction `index`'s sender's previous nonce in a batch its node's door
    refused (queued to be offered again)?"""
    before = -1 if run.previous is None else run.previous[index]
    return before >= 0 and run.timings.status[before] == REJECTED and run.timings.reasons.get(before) in AGAIN_LATER


def _resendable(run: _Sending, index: int, code: str) -> bool:
    """Is a refusal with `code` of planned transaction `index` worth sending again? A
    full queue is; a `nonce_gap` is while its sender's previous nonce may still land, and
    is final once that one was refused or failed for good (the gap can never fill: every
    later nonce of the sender is then refused at once, not resent for the whole window).
    One refused at a busy door is not refused for good: its batch is offered again."""
    if code not in RESEND_CODES:
        return False
    if code != "nonce_gap" or run.previous is None:
        return True
    before = run.previous[index]
    return before < 0 or run.timings.status[before] not in (REJECTED, FAILED) or _behind_door(run, index)


async def _wait(run: _Sending, wait_s: float) -> None:
    """Sleep `wait_s` (less on an interrupt) with the in-flight slot given back, then take one again."""
    if run.slots is not None:
        run.slots.release()
    try:
        if run.stop is None:
            await asyncio.sleep(wait_s)
        else:
            try:
                await asyncio.wait_for(run.stop.wait(), timeout=wait_s)
            except asyncio.TimeoutError:
                pass
    finally:
        if run.slots is not None:
            await run.slots.acquire()


async def _deliver(run: _Sending, target: str, body: bytes, count: int,
                   deadline: float) -> tuple[tuple[int, bytes] | str, bool]:
    """POST `body` (`count` of a batch's transactions) to the batch's `target`, then to each
    other node in turn while none answers; then round again over the nodes, each try
    waiting twice as long, until `deadline`. The answer (status, payload), or why none
    came; and whether it was sent again after a try whose outcome is unknown. A batch
    dropped after one round would leave a nonce gap for every sender in it, and each gap
    costs all that sender's later transactions (held, then evicted as
    `nonce_gap_timeout`): a wallet does not give up on a nonce that soon."""
    failure = "no node"
    moved = False
    unknown = resent_unknown = False        # a try's answer lost; a try made after that
    progress, health = run.progress, run.health
    attempt_s = run.attempt_timeout_s
    while time.monotonic() < deadline:
        for node in health.order(target):
            left_s = deadline - time.monotonic()
            if left_s <= 0:
                break
            if node != target and not moved:     # once per delivery, resent or routed around
                moved = True
                progress.failovers += 1
                progress.failover_txs += count
            resent_unknown = resent_unknown or unknown
            try:
                answer = await run.clients[node].post_txs(body, timeout_s=min(attempt_s, left_s))
                if answer.status >= 500 and door_retry_s(answer.status, answer.body) is None:
                    raise _NoAnswer(answer.status, answer.body)     # a busy door answered: no failover
                return (answer.status, answer.body), resent_unknown
            except NodeUnreachable as exc:
                failure = f"transport:{exc.transport}"
                # Never connected (refused, unreachable): the request did not leave. Anything
                # else (a reset, a closed connection, no answer in time) may have been admitted.
                unknown = unknown or exc.request_left
            except _NoAnswer as exc:
                failure = exc.reason
                unknown = unknown or exc.status != NOT_TAKEN
            progress.node_failures[node] = progress.node_failures.get(node, 0) + 1
            health.failed(node)
        attempt_s *= 2
        await asyncio.sleep(min(0.1 * run.attempt_timeout_s, max(0.0, deadline - time.monotonic())))
    return failure, resent_unknown


class _NoAnswer(Exception):
    """A node answered the batch with a 5xx: no per-transaction answer. 503 says it did not
    take it (not ready, behind); any other leaves the outcome unknown."""

    def __init__(self, status: int, payload: bytes) -> None:
        try:
            document = orjson.loads(payload)
        except orjson.JSONDecodeError:
            document = None
        code = document.get("error") if isinstance(document, dict) else None
        self.status = status
        self.reason = code if isinstance(code, str) and code else f"http_{status}"
        super().__init__(self.reason)
