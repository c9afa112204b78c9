"""Open-loop sending: every batch leaves at its scheduled time, whatever earlier replies do.

Sends never wait for earlier replies. The only thing that can delay a send is the
explicit in-flight cap (`max_in_flight` requests outstanding) and the connection pool
size; both are options, and any delay they cause is recorded, because latency is
measured from the *intended* time (see latency.py).

A batch of transactions is sent when its last member is due: a transaction never
leaves before its intended time, and the wait for the rest of its batch counts in its
latency. Request bodies are encoded before the run starts, so the sending path does no
signing and no encoding.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import aiohttp
import orjson

from qmemo.load.latency import ACCEPTED, DUPLICATE, FAILED, REJECTED, Timings

_STATUS = {"accepted": ACCEPTED, "duplicate": DUPLICATE, "rejected": REJECTED}


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
    request_timeout_s: float = 30.0


@dataclass
class SendProgress:
    """Live counters the status file and the summary read."""

    sent: int = 0
    answered: int = 0
    in_flight: int = 0
    max_in_flight_seen: int = 0


async def send_batches(batches: list[Batch], timings: Timings, config: SendConfig, *,
                       start: float, progress: SendProgress, stop: asyncio.Event) -> None:
    """Send every batch at its scheduled time (perf_counter `start` + intended offset)."""
    slots = asyncio.Semaphore(config.max_in_flight)
    connector = aiohttp.TCPConnector(limit=config.connections, force_close=False)
    timeout = aiohttp.ClientTimeout(total=config.request_timeout_s)
    tasks: set[asyncio.Task] = set()
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        for batch in batches:
            due = start + timings.intended[batch.last - 1]
            delay = due - time.perf_counter()
            if delay > 0:
                try:
                    await asyncio.wait_for(stop.wait(), timeout=delay)
                except asyncio.TimeoutError:
                    pass
            if stop.is_set():
                break
            if slots.locked():
                # The in-flight cap is reached: wait for a slot, or for an interrupt.
                acquire = asyncio.ensure_future(slots.acquire())
                stopped = asyncio.ensure_future(stop.wait())
                await asyncio.wait({acquire, stopped}, return_when=asyncio.FIRST_COMPLETED)
                stopped.cancel()
                if not acquire.done():
                    acquire.cancel()
                    break
            else:
                await slots.acquire()
            if stop.is_set():
                slots.release()
                break
            sent_at = time.perf_counter() - start
            due_at = due - start
            for i in range(batch.first, batch.last):
                timings.mark_sent(i, sent_at, due_at)
            progress.sent += batch.last - batch.first
            progress.in_flight += 1
            progress.max_in_flight_seen = max(progress.max_in_flight_seen, progress.in_flight)
            task = asyncio.create_task(_post(session, batch, timings, start, progress))
            tasks.add(task)
            task.add_done_callback(lambda t: (tasks.discard(t), slots.release()))
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


async def _post(session: aiohttp.ClientSession, batch: Batch, timings: Timings, start: float,
                progress: SendProgress) -> None:
    try:
        async with session.post(f"{batch.target}/txs", data=batch.body,
                                headers={"Content-Type": "application/octet-stream"}) as response:
            payload = await response.read()
            answered_at = time.perf_counter() - start
            _record_answer(batch, timings, answered_at, response.status, payload)
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
        answered_at = time.perf_counter() - start
        for i in range(batch.first, batch.last):
            timings.mark_answer(i, answered_at, FAILED, f"transport:{type(exc).__name__}")
    finally:
        progress.in_flight -= 1
        progress.answered += batch.last - batch.first


def _record_answer(batch: Batch, timings: Timings, t: float, status: int, payload: bytes) -> None:
    """Per-transaction outcome from a /txs answer; a whole-request error applies to all."""
    try:
        document = orjson.loads(payload)
    except orjson.JSONDecodeError:
        document = None
    results = document.get("results") if isinstance(document, dict) else None
    if status == 200 and isinstance(results, list) and len(results) == batch.last - batch.first:
        for i, result in zip(range(batch.first, batch.last), results):
            outcome = _STATUS.get(result.get("status") if isinstance(result, dict) else None)
            if outcome is None:
                timings.mark_answer(i, t, FAILED, "unreadable_result")
            else:
                timings.mark_answer(i, t, outcome, result.get("code") if outcome == REJECTED else None)
        return
    code = document.get("error") if isinstance(document, dict) else None
    reason = code or f"http_{status}"
    for i in range(batch.first, batch.last):
        timings.mark_answer(i, t, REJECTED if 400 <= status < 500 else FAILED, reason)
