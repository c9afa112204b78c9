"""Where the verify pool sends its jobs (qmemo.node.verify_pool): whole to the first
thread while it keeps up, in one slice per thread (to the least busy) once it is
saturated, and a long batch to the idle threads. The jobs here are stand-ins that
record where and how they ran; the ledger's real verify calls are tested with the ledger."""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace

import pytest

from qmemo.node import verify_pool
from qmemo.node.metrics import VerifyMetrics
from qmemo.node.verify_pool import VerifyPool


class Batch:
    """An AdmitBatch stand-in: `candidates` signatures, each "verified" in `per_sig_ns`
    (reported, not spent) after `hold` (an event the job waits for, or seconds of CPU to
    spend, as a verify would)."""

    def __init__(self, candidates: int, per_sig_ns: int = 4_000, hold: threading.Event | float | None = None):
        self.candidates = candidates
        self.per_sig_ns = per_sig_ns
        self.hold = hold
        self.calls: list[tuple[int, int, int]] = []     # (part, parts, the thread's ident)

    def verify(self, table, part, parts):
        if isinstance(self.hold, threading.Event):
            assert self.hold.wait(10)
        elif self.hold:
            until = time.thread_time() + self.hold
            while time.thread_time() < until:
                pass
        self.calls.append((part, parts, threading.get_ident()))
        size = -(-self.candidates // parts)
        checked = max(0, min(self.candidates, (part + 1) * size) - part * size)
        return checked, checked, 0, checked * self.per_sig_ns, []


def make_pool(threads: int) -> VerifyPool:
    return VerifyPool(threads, VerifyMetrics(threads=threads), SimpleNamespace(table=1), None, verifier="fast")


def settle(pool: VerifyPool, monkeypatch) -> None:
    """A quiet window goes by: the pool, which starts with every thread, learns that the
    first keeps up."""
    window = verify_pool.WINDOW_NS
    monkeypatch.setattr(verify_pool, "WINDOW_NS", 1_000_000)
    pool.plan(1)            # the first window starts
    time.sleep(0.002)
    pool.plan(1)            # and is judged: nothing verified in it
    monkeypatch.setattr(verify_pool, "WINDOW_NS", window)


@pytest.fixture
def pool(monkeypatch):
    pool = make_pool(2)
    settle(pool, monkeypatch)
    yield pool
    pool.close()


async def test_a_new_pool_uses_every_thread_until_a_quiet_window_has_gone_by(monkeypatch):
    pool = make_pool(2)
    try:
        assert pool.saturated
        batch = Batch(100)
        await pool.verify_batch(batch, "admission")     # short, but every thread until the pool knows better
        assert sorted((part, parts) for part, parts, _ in batch.calls) == [(0, 2), (1, 2)]
        settle(pool, monkeypatch)
        assert not pool.saturated
    finally:
        pool.close()


async def test_batches_that_keep_the_first_thread_up_all_go_to_it_whole(pool):
    first = Batch(500)
    await pool.verify_batch(first, "admission")       # nothing known yet: a first batch is sliced
    assert sorted((part, parts) for part, parts, _ in first.calls) == [(0, 2), (1, 2)]
    thread_0 = dict((part, ident) for part, _, ident in first.calls)[0]     # slice i runs on thread i
    for _ in range(20):                               # 500 x 4 µs = 2 ms: under SPLIT_AFTER_NS
        batch = Batch(500)
        await pool.verify_batch(batch, "admission")
        assert batch.calls == [(0, 1, thread_0)]
    assert not pool.saturated


async def test_a_long_batch_on_idle_threads_is_sliced_one_slice_per_thread(pool):
    await pool.verify_batch(Batch(100), "admission")          # the mean: 4 µs a signature
    long = Batch(2_000)                                       # 8 ms >= SPLIT_AFTER_NS (5 ms)
    await pool.verify_batch(long, "block")
    assert sorted((part, parts) for part, parts, _ in long.calls) == [(0, 2), (1, 2)]
    assert len(set(ident for _, _, ident in long.calls)) == 2   # two threads, one slice each


async def test_while_the_first_thread_keeps_up_the_others_wait_even_with_jobs_queued(pool):
    await pool.verify_batch(Batch(100), "admission")          # known: short batches are not sliced
    release = threading.Event()
    batches = [Batch(100, hold=release) for _ in range(3)]
    tasks = [asyncio.ensure_future(pool.verify_batch(batch, "admission")) for batch in batches]
    await asyncio.sleep(0.05)
    assert pool._backlog == [3, 0]      # not saturated: one running and two waiting on the first
    release.set()
    await asyncio.gather(*tasks)
    assert len({batch.calls[0][2] for batch in batches}) == 1
    assert pool._backlog == [0, 0]


async def test_a_saturated_first_thread_brings_every_thread_in_until_they_relax(pool, monkeypatch):
    # Bounds low enough that a busy CI machine still gives this thread that much CPU.
    monkeypatch.setattr(verify_pool, "WINDOW_NS", 50_000_000)
    monkeypatch.setattr(verify_pool, "SATURATED", 0.5)
    monkeypatch.setattr(verify_pool, "RELAXED", 0.3)
    await pool.verify_batch(Batch(100), "admission")
    deadline = time.monotonic() + 3.0       # the first thread busy all the time (ends once saturated)
    while time.monotonic() < deadline and not pool.saturated:
        await pool.verify_batch(Batch(100, hold=0.01), "admission")
    assert pool.saturated
    batch = Batch(100)
    await pool.verify_batch(batch, "admission")
    assert sorted((part, parts) for part, parts, _ in batch.calls) == [(0, 2), (1, 2)]
    await asyncio.sleep(0.12)                                   # a window with nothing to do: relaxed
    batch = Batch(100)
    await pool.verify_batch(batch, "admission")
    assert not pool.saturated
    assert [(part, parts) for part, parts, _ in batch.calls] == [(0, 1)]


async def test_a_long_batch_goes_to_the_idle_threads_while_the_first_is_busy(pool):
    await pool.verify_batch(Batch(100), "admission")          # the mean: 4 µs a signature
    release = threading.Event()
    held = Batch(100, hold=release)
    task = asyncio.ensure_future(pool.verify_batch(held, "admission"))
    await asyncio.sleep(0.05)
    block = Batch(2_000)                                      # 8 ms: a block's worth
    await pool.verify_batch(block, "block")                   # not queued behind the held batch
    assert [(part, parts) for part, parts, _ in block.calls] == [(0, 1)]
    release.set()
    await task
    assert block.calls[0][2] != held.calls[0][2]


async def test_saturated_slices_go_to_the_least_busy_threads(monkeypatch):
    pool = make_pool(3)
    try:
        assert pool.saturated                                 # a new pool: every thread
        release = threading.Event()
        first, second = Batch(8, hold=release), Batch(16, hold=release)
        tasks = [asyncio.ensure_future(pool.verify_batch(first, "admission"))]
        await asyncio.sleep(0.02)
        assert pool._backlog == [1, 0, 0]                     # 8 signatures: one slice
        tasks.append(asyncio.ensure_future(pool.verify_batch(second, "admission")))
        await asyncio.sleep(0.02)
        assert pool._backlog == [1, 1, 1]                     # two slices, to the two idle threads
        release.set()
        await asyncio.gather(*tasks)
        assert len({ident for _, _, ident in first.calls + second.calls}) == 3
    finally:
        pool.close()


async def test_one_thread_never_slices_and_no_thread_verifies_inline():
    pool = make_pool(1)
    try:
        batch = Batch(5_000)
        await pool.verify_batch(batch, "block")
        assert [(part, parts) for part, parts, _ in batch.calls] == [(0, 1)]
        assert batch.calls[0][2] != threading.get_ident()
    finally:
        pool.close()
    inline = make_pool(0)
    batch = Batch(5_000)
    await inline.verify_batch(batch, "admission")
    assert batch.calls == [(0, 1, threading.get_ident())]


@pytest.mark.parametrize("saturated, windows", [
    (True, [(0.85, True), (0.5, False), (0.85, False), (0.95, False), (0.95, True)]),
    (False, [(0.85, False), (0.95, False), (0.5, False), (0.95, False), (0.95, True), (0.85, True),
             (0.7, False)]),
])
def test_between_relaxed_and_saturated_the_pool_stays_as_it_was(pool, saturated, windows):
    """Hysteresis: a window with the threads' CPU 85% of it (between RELAXED and SATURATED)
    keeps a saturated pool slicing and a relaxed one on its first thread; a relaxed pool
    turns only after SATURATED_WINDOWS windows in a row at SATURATED (one burst is not
    enough), a saturated one after one window under RELAXED."""
    pool.saturated = saturated
    for busy, expected in windows:
        pool._window_start = time.perf_counter_ns() - verify_pool.WINDOW_NS
        pool._busy_ns = int(busy * verify_pool.WINDOW_NS)
        pool.plan(1)
        assert pool.saturated is expected, (busy, expected)
