"""The sender against a busy door (qmemo.load.sender, `DoorQueues`): a batch refused 503 `busy`
is offered again in its node's next slot, before that node's later batches; the node's
slots pass unsent while its wait runs, then carry a second batch until it is back on its
schedule; what is still queued at the end is `busy_backlog`."""

from __future__ import annotations

import asyncio
import time

from aiohttp import web

from qmemo.load.latency import ACCEPTED, REJECTED, Timings
from qmemo.load.answers import BUSY_BACKLOG, DoorQueues
from qmemo.load.sender import Batch, SendConfig, SendProgress, send_batches
from tests.unit.scripted_http import serve


def test_a_refused_batch_is_taken_again_before_its_nodes_later_ones():
    batches = [Batch(i, i + 1, "a" if i % 2 == 0 else "b", b"") for i in range(6)]
    doors = DoorQueues(batches)
    assert [doors.take("a"), doors.take("a")] == [0, 2]
    doors.refused("a", 0, retry_after_s=0.05)
    assert doors.waiting("a") and not doors.waiting("b")
    assert doors.take("a") == 0 and doors.take("a") == 4 and doors.take("a") is None
    assert doors.take("b") == 1
    doors.give_back("b", 1)
    assert doors.left() == [1, 3, 5]


async def door_node(busy_first: int, retry_after_ms: int,
                    busy_delay_s: float = 0.0) -> tuple[web.AppRunner, str, list[bytes]]:
    """A node whose door refuses its first `busy_first` batches (answering `busy_delay_s`
    late), then accepts every one; it records the bodies it accepted, in order."""
    accepted: list[bytes] = []
    seen = 0

    async def txs(request: web.Request) -> web.Response:
        nonlocal seen
        body = await request.read()
        seen += 1
        if seen <= busy_first:
            await asyncio.sleep(busy_delay_s)
            return web.json_response({"error": "busy", "detail": "busy", "retry_after_ms": retry_after_ms},
                                     status=503)
        accepted.append(body)
        return web.json_response({"accepted": 1, "results": [{"id": "00", "status": "accepted"}]})

    app = web.Application()
    app.router.add_post("/txs", txs)
    runner, url = await serve(app)
    return runner, url, accepted


async def run_slots(url: str, count: int, every_s: float, in_flight: int = 1,
                    calm_s: float = 10.0) -> tuple[Timings, SendProgress]:
    batches = [Batch(i, i + 1, url, b"batch-%d" % i) for i in range(count)]
    timings, progress = Timings([i * every_s for i in range(count)]), SendProgress()
    config = SendConfig(max_in_flight=in_flight, catch_up_after_s=calm_s)
    await send_batches(batches, timings, config, start=time.perf_counter(),
                       progress=progress, stop=asyncio.Event())
    return timings, progress


async def test_the_refused_batch_goes_first_and_the_slots_of_the_wait_pass_unsent():
    runner, url, accepted = await door_node(busy_first=1, retry_after_ms=120)
    try:
        timings, progress = await run_slots(url, 8, every_s=0.05)
    finally:
        await runner.cleanup()
    # Batch 0 refused; slots 1-2 (100 ms of the 120 ms wait) unsent; then 0, 1, ... in order,
    # one a slot; what the slots could not carry goes after the last one, in order.
    assert accepted == [b"batch-%d" % i for i in range(8)]
    assert progress.door_refusals == 1 and progress.door_refused_txs == 1 and progress.door_waits >= 1
    assert progress.gap_offers == progress.door_waits + 1      # every slot carried one batch, or waited
    assert list(timings.status) == [ACCEPTED] * 8
    assert timings.intended[0] > 0.0      # offered again in a later slot: its latency counts from there
    # Offered after the last slot (at 0.35 s): intended when offered, past the schedule's end.
    after = [i for i in range(8) if timings.intended[i] > 7 * 0.05]
    assert len(after) == progress.gap_offers and all(timings.intended[i] == timings.sent[i] for i in after)


async def test_a_node_that_keeps_refusing_leaves_its_queue_as_busy_backlog():
    runner, url, accepted = await door_node(busy_first=100, retry_after_ms=50)
    try:
        timings, progress = await run_slots(url, 6, every_s=0.05)
    finally:
        await runner.cleanup()
    # Refused in every slot it was offered, and once more after the last: then it stops.
    assert accepted == [] and progress.gap_offers == 1
    assert all(timings.status[i] == REJECTED and timings.reasons[i] == BUSY_BACKLOG for i in range(6))


async def test_a_node_behind_its_schedule_after_a_wait_catches_up_within_the_run():
    # Refused once, 120 ms: slots 1-2 pass unsent; 150 ms after the refusal each slot carries
    # a second batch while the node is behind (room in flight for it): every batch is taken.
    runner, url, accepted = await door_node(busy_first=1, retry_after_ms=120)
    try:
        timings, progress = await run_slots(url, 16, every_s=0.05, in_flight=4, calm_s=0.15)
    finally:
        await runner.cleanup()
    assert progress.door_waits >= 1 and progress.catch_ups == progress.door_waits + 1
    assert sorted(accepted) == sorted(b"batch-%d" % i for i in range(16))
    assert list(timings.status) == [ACCEPTED] * 16


async def test_a_node_that_refused_lately_is_offered_only_its_schedule():
    runner, url, accepted = await door_node(busy_first=1, retry_after_ms=120)
    try:
        timings, progress = await run_slots(url, 12, every_s=0.05, in_flight=4, calm_s=5.0)
    finally:
        await runner.cleanup()
    assert progress.door_waits >= 1 and progress.catch_ups == 0
    assert progress.gap_offers == progress.door_waits + 1 and len(accepted) == 12


async def test_a_refused_batch_below_one_the_node_took_is_offered_again_after_the_last_slot():
    # Batch 0's refusal comes back after batch 1 (its senders' next nonces) was taken, and the
    # schedule ends there: the node would hold batch 1's transactions on a gap for good.
    runner, url, accepted = await door_node(busy_first=1, retry_after_ms=100, busy_delay_s=0.15)
    try:
        batches = [Batch(i, i + 1, url, b"batch-%d" % i) for i in range(2)]
        timings, progress = Timings([0.0, 0.05]), SendProgress()
        await send_batches(batches, timings, SendConfig(max_in_flight=2), start=time.perf_counter(),
                           progress=progress, stop=asyncio.Event())
    finally:
        await runner.cleanup()
    assert accepted == [b"batch-1", b"batch-0"]
    assert list(timings.status) == [ACCEPTED, ACCEPTED] and progress.gap_offers == 1 and progress.door_refusals == 1
    assert timings.intended[0] == timings.sent[0] > 0.05       # offered after the last slot, intended then
