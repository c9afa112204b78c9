"""The verification pool: signature checks on native threads, in slices of a batch, off the event loop.

A job is one call into the node's ledger (`AdmitBatch.verify`, `BlockBody.verify`) over a
batch (a request's candidates, or a block's transactions the ledger does not know as
verified), or a slice of one: it verifies the records through the admission kernel's
verifier table with the GIL released, remembers the ids that verified in the ledger's
verified set (so a block's validation finds them there), and hands back counts, the total
verify time and a few sampled durations. No Python runs per signature.

Each verify thread has its own queue. A pool starts by using them all; once a window of
`WINDOW_NS` shows the verify threads' CPU under `RELAXED` of it, every job goes whole to
the first thread and the others wait: where the event loop is the bottleneck, a second
thread verifying at the same time only takes a core from the loop (with every batch cut
into one slice per thread, 2 threads admit less than one: `qmemo bench node` with the fast
verifier, docs/methodology.md section 12). After `SATURATED_WINDOWS` windows in a row with the
first thread's CPU at `SATURATED` of them (liboqs's verifier, slower schemes), every batch
is cut into one slice per thread again, each slice to the least busy. A batch that would
keep one thread busy `SPLIT_AFTER_NS` (a block) goes to the idle threads, in a slice each,
whatever the first is doing: nothing else is using them, and the chain waits for it.

Block headers (one signature per block) are verified on the calling thread through the
registry (`verify_header`).

Never imports aiohttp or knows about HTTP.
"""

from __future__ import annotations

import asyncio
import ctypes
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from qmemo.crypto.admit_kernel import AdmitKernel
from qmemo.crypto.schemes import backend_of, scheme_by_id
from qmemo.errors import ConfigError, UnknownScheme
from qmemo.node.metrics import VerifyMetrics
from qmemo.node.stages import thread_cpu_ns

MIN_CHUNK = 8   # below this a job's fixed cost (~20 µs) is not worth a second thread
SPLIT_AFTER_NS = 5_000_000  # a batch that would take this long on one idle thread is cut into slices
WINDOW_NS = 100_000_000     # how often the threads' busy share is judged
SATURATED = 0.9             # the verify threads' CPU this much of a window ...
SATURATED_WINDOWS = 2       # ... this many windows in a row: slice across all (one burst is not enough)
RELAXED = 0.8               # the verify threads' CPU together under this much of a window: the first alone


def name_os_thread(name: str) -> None:
    """Give the calling thread an OS-visible name (Linux, 15 bytes): `top -H`, /proc and the
    node benchmark then tell the verify threads from the event loop."""
    try:
        libc = ctypes.CDLL(None)
        libc.prctl(15, name.encode()[:15], 0, 0, 0)     # 15 = PR_SET_NAME
    except (OSError, AttributeError):
        pass


class VerifyPool:
    """N verify threads (0: verify on the calling thread) over the admission kernel's table."""

    def __init__(self, threads: int, metrics: VerifyMetrics, kernel: AdmitKernel, ledger: Any, *,
                 name: str = "node", min_chunk: int = MIN_CHUNK, verifier: str) -> None:
        if threads < 0:
            raise ConfigError("verify threads must be 0 (inline) or more")
        backend_of("Falcon-512", verifier)   # an unknown verifier fails at start, not per transaction
        self.threads = threads
        self.metrics = metrics
        self.kernel = kernel
        self.ledger = ledger
        self.verifier = verifier
        self._min_chunk = min_chunk
        self._header_verifiers: dict[int, Callable[[bytes, bytes, bytes], bool]] = {}
        self._executors = [ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{name}-verify",
                                              initializer=name_os_thread, initargs=(f"{name}-verify",))
                           for _ in range(threads)]
        self._backlog = [0] * threads       # jobs given to each thread and not finished
        self._checked = self._checked_ns = 0    # signatures verified so far, and their time: a batch's estimate
        # Slicing every batch across all threads: until a first window has shown the first
        # thread keeps up (a slow verifier then loses no time at the start).
        self.saturated = threads > 1
        self._window_start: int | None = None   # the first job starts the first window
        self._busy_ns = 0                       # the verify threads' CPU in jobs finished in this window
        self._hot_windows = 0                   # windows in a row at SATURATED

    @property
    def inline(self) -> bool:
        """No threads: signatures are verified on the calling (event loop) thread."""
        return not self._executors

    async def verify_batch(self, batch: Any, path: str) -> None:
        """Verify an AdmitBatch's candidates (verdicts land in the batch)."""
        await self._run(lambda part, parts: batch.verify(self.kernel.table, part, parts), batch.candidates, path)

    async def verify_body(self, body: Any, path: str) -> int:
        """Verify a block body's signatures the ledger does not know as verified; how many were checked."""
        missing = self.ledger.unverified(body)
        if missing:
            await self._run(lambda part, parts: body.verify(self.ledger, self.kernel.table, part, parts), missing, path)
        return missing

    async def _run(self, job: Callable[[int, int], tuple], count: int, path: str) -> None:
        if not self._executors:
            self._file(path, *self._timed(job, 0, 1))
            return
        loop = asyncio.get_running_loop()
        threads = self.plan(count)
        futures = []
        for part, thread in enumerate(threads):
            self._backlog[thread] += 1
            future = loop.run_in_executor(self._executors[thread], self._timed, job, part, len(threads))
            future.add_done_callback(lambda _, thread=thread: self._finished(thread))
            futures.append(future)
        for result in await asyncio.gather(*futures):
            self._file(path, *result)

    def plan(self, count: int) -> list[int]:
        """The threads a batch of `count` signatures goes to, one slice each: while
        saturated, one slice per thread (at least MIN_CHUNK signatures each), to the least
        busy; else a long batch (SPLIT_AFTER_NS by the mean verify time so far, or any
        batch before anything is known) to the idle threads; else the whole batch to the
        first thread."""
        threads = len(self._executors)
        if threads < 2:
            return [0]
        self._judge(time.perf_counter_ns())
        backlog, most = self._backlog, max(1, count // self._min_chunk)
        if self.saturated:
            return sorted(range(threads), key=backlog.__getitem__)[:most]
        if not self._checked or count * self._checked_ns >= SPLIT_AFTER_NS * self._checked:
            idle = [thread for thread in range(threads) if not backlog[thread]]
            if idle:
                return idle[:most]
        return [0]

    def _judge(self, now_ns: int) -> None:
        """Once a window: saturated or not, by the verify threads' CPU in it."""
        if self._window_start is None:
            self._window_start = now_ns
            return
        elapsed = now_ns - self._window_start
        if elapsed >= WINDOW_NS:
            busy = self._busy_ns / elapsed
            self._hot_windows = self._hot_windows + 1 if busy >= SATURATED else 0
            self.saturated = busy >= RELAXED if self.saturated else self._hot_windows >= SATURATED_WINDOWS
            self._window_start, self._busy_ns = now_ns, 0

    def _finished(self, thread: int) -> None:
        self._backlog[thread] -= 1

    @staticmethod
    def _timed(job: Callable[[int, int], tuple], part: int, parts: int) -> tuple:
        started = thread_cpu_ns()
        checked, valid, hits, ns, samples = job(part, parts)
        return checked, hits, ns, samples, thread_cpu_ns() - started

    def _file(self, path: str, checked: int, hits: int, ns: int, samples: list[int], cpu_ns: int) -> None:
        self._checked += checked
        self._checked_ns += ns
        self._busy_ns += cpu_ns
        self.metrics.record_summary(path, checked, ns, samples, cpu_ns)
        self.metrics.count_cache(hits, checked)

    def verify(self, scheme_id: int, public_key: bytes, message: bytes, signature: bytes) -> bool:
        """One block header's signature (qmemo.core.state.HeaderVerifier), on the calling
        thread, through the registry, timed under the "block" path."""
        verify = self._header_verifiers.get(scheme_id)
        if verify is None:
            try:
                verify = scheme_by_id(scheme_id, self.verifier).verify
            except UnknownScheme:
                def verify(public_key: bytes, message: bytes, signature: bytes) -> bool:
                    return False
            self._header_verifiers[scheme_id] = verify
        started = time.perf_counter_ns()
        ok = verify(public_key, message, signature)
        self.metrics.record_summary("block", 1, time.perf_counter_ns() - started, [])
        return ok

    def close(self) -> None:
        for executor in self._executors:
            executor.shutdown(wait=True, cancel_futures=True)

