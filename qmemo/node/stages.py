"""Where a node's CPU goes, stage by stage: cumulative CPU time per stage of the pipeline.

The stages (`STAGES`, a documented list: docs/api.md "Stage costs"; the names are the
Prometheus `stage` label and the JSON keys, so they stay stable):

- `http`           the handlers' own work on a request: parsing the body (binary frames or
                   JSON) and encoding the answer. aiohttp's header parsing and socket writes
                   happen outside any handler and fall in "other".
- `decode_hash`    transaction bytes to transactions: parsing, id and signing digest (BLAKE3-512).
- `verify`         signature verification, on the verify pool's threads (admission and block
                   paths); timed per executor job on the thread that ran it.
- `mempool`        admission's checks (duplicate, form, nonce, balance), adding to the pool,
                   and the pool's upkeep when a block commits.
- `block_build`    selecting, building, signing and applying this node's own blocks.
- `block_validate` decoding, Merkle check and applying peers' blocks (signatures missing from
                   the cache are in `verify`).
- `store`          what the node writes to disk: blocks to SQLite, on the store's writer
                   thread, and their encoding for it; accepted transactions to the journal
                   (qmemo.node.journal), on its writer thread.
- `relay`          encoding what goes to the peers (transaction batches, pushed blocks); the
                   client's socket work is in "other".

"other" is the process's CPU (user + system, every thread, since start) minus the sum of
the stages: the event loop's own work, aiohttp, logging, timers, the import at start.
Every stage is measured on the thread doing the work with `time.thread_time_ns` (CPU
time, not wall time: a stage waiting on the GIL or a lock costs nothing), so the stages
are disjoint slices of the process's CPU and add up to at most its total.

Cost: `thread_time_ns` is a system call (0.83 us here; docs/api.md "Stage costs" has the
command, and the 7 reads a single-transaction POST /tx pays), so stages are timed per
batch (a request, a block, an executor job), never per transaction. On the event loop a stage is
a `lap` - an integer add to a list slot, chained so one clock read ends a stage and starts
the next - and never spans an `await` (other tasks run there). Other threads add under
a lock, once per job.

Never imports aiohttp or knows about HTTP.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import ParamSpec, TypeVar

from qmemo.api_schema import StageFigure, StageFigures

STAGES = ("http", "decode_hash", "verify", "mempool", "block_build", "block_validate", "store", "relay")
HTTP, DECODE_HASH, VERIFY, MEMPOOL, BLOCK_BUILD, BLOCK_VALIDATE, STORE, RELAY = range(len(STAGES))
OTHER = "other"
WINDOW_S = 10.0      # the recent window of the per-transaction figures (the dashboard polls every ~2 s)

thread_cpu_ns = time.thread_time_ns

P = ParamSpec("P")
R = TypeVar("R")


class StageCPU:
    """Cumulative CPU nanoseconds and transactions per stage (indexed by the constants above).

    `lap` is for the event loop's thread only (no lock: one thread adds there); other
    threads use `add_from_thread` or `timed`, which keep their own slots under a lock, so
    no add is ever lost to a thread switch mid-increment."""

    __slots__ = ("loop_ns", "loop_txs", "thread_ns", "thread_txs", "lock", "_marks")

    def __init__(self, started_monotonic: float | None = None, started_process_cpu_s: float | None = None) -> None:
        self.loop_ns = [0] * len(STAGES)
        self.loop_txs = [0] * len(STAGES)
        self.thread_ns = [0] * len(STAGES)
        self.thread_txs = [0] * len(STAGES)
        self.lock = threading.Lock()
        # (monotonic s, per-stage ns with "other" last, process ns, admitted). The first mark
        # holds the process's CPU so far (the import, the node's set-up) as "other": the first
        # window's per-transaction "other" then starts here, not at the process's birth.
        start = time.monotonic() if started_monotonic is None else started_monotonic
        process_ns = int((time.process_time() if started_process_cpu_s is None else started_process_cpu_s) * 1e9)
        self._marks: deque[tuple[float, tuple[int, ...], int, int]] = deque(
            [(start, (0,) * len(STAGES) + (process_ns,), process_ns, 0)])

    def lap(self, stage: int, started_ns: int, txs: int = 0) -> int:
        """Add the CPU since `started_ns` (a `thread_cpu_ns()` on this thread) to `stage`;
        returns the clock read, which starts the next stage."""
        now = thread_cpu_ns()
        self.loop_ns[stage] += now - started_ns
        self.loop_txs[stage] += txs
        return now

    def add_from_thread(self, stage: int, cpu_ns: int, txs: int = 0) -> None:
        with self.lock:
            self.thread_ns[stage] += cpu_ns
            self.thread_txs[stage] += txs

    def timed(self, stage: int, function: Callable[P, R], txs: int = 0) -> Callable[P, R]:
        """`function`, its CPU on the thread that runs it added to `stage` (for an executor);
        `txs` only if it returns: a call that raises spent the CPU but handled nothing, and
        its retry (a store write tried again) must not count the same transactions twice."""
        def run(*args: P.args, **kwargs: P.kwargs) -> R:
            started = thread_cpu_ns()
            handled = 0
            try:
                result = function(*args, **kwargs)
                handled = txs
                return result
            finally:
                self.add_from_thread(stage, thread_cpu_ns() - started, handled)
        return run

    def totals(self) -> tuple[list[int], list[int]]:
        """(CPU ns, transactions) per stage, loop and threads together."""
        with self.lock:
            thread_ns, thread_txs = list(self.thread_ns), list(self.thread_txs)
        return ([a + b for a, b in zip(self.loop_ns, thread_ns)],
                [a + b for a, b in zip(self.loop_txs, thread_txs)])

    def window(self, now: float, cpu_ns: Sequence[int], process_ns: int, admitted: int,
               window_s: float = WINDOW_S) -> tuple[float, list[int], int, int]:
        """Remember these totals; return (span s, per-stage ns, process ns, admitted) since the
        newest mark at least `window_s` old (or the oldest there is: since start at first).
        Only the event loop calls it (the snapshot builder)."""
        marks = self._marks
        while len(marks) > 1 and now - marks[1][0] >= window_s:
            marks.popleft()
        then, then_ns, then_process, then_admitted = marks[0]
        marks.append((now, tuple(cpu_ns), process_ns, admitted))
        return (now - then, [a - b for a, b in zip(cpu_ns, then_ns)], process_ns - then_process,
                admitted - then_admitted)


def stage_figures(stages: StageCPU, cpu_ns: Sequence[int], txs: Sequence[int], process_cpu_s: float,
                  admitted: int, now: float, other_on_loop_ns: int | None = None) -> StageFigures:
    """The figures from per-stage totals (`StageCPU.totals`, plus what is kept elsewhere: the
    verify pool's CPU), the process's CPU read *after* them, and the admitted count; `now`
    (monotonic) moves `stages`' recent window. `other_on_loop_ns`: the event loop's CPU outside
    every stage (`loop_other_ns`), None where unknown."""
    process_ns = int(process_cpu_s * 1e9)
    accounted_ns = sum(cpu_ns)
    # Read after the stages, the process total includes every lap they hold: never below,
    # unless a stage double counts. Then "other" is zero and the excess is shown, not hidden.
    other_ns = max(0, process_ns - accounted_ns)
    overrun_ns = max(0, accounted_ns - process_ns)
    span_s, window_ns, _, window_admitted = stages.window(now, [*cpu_ns, other_ns], process_ns,
                                                                          admitted)
    # In a window, a job that straddles its start counts whole at its end: "other" may dip
    # below zero by that much; it is shown as zero rather than as negative CPU.
    window_ns[-1] = max(0, window_ns[-1])
    by_stage: dict[str, StageFigure] = {}
    for name, total, count, recent in zip((*STAGES, OTHER), (*cpu_ns, other_ns), (*txs, 0), window_ns):
        by_stage[name] = StageFigure(total / 1e9, total / process_ns if process_ns else None,
                                     _per_tx_us(recent, window_admitted), count)
    # The total is the sum of the parts shown (the window's process CPU but for that dip).
    return StageFigures(process_cpu_s, accounted_ns / 1e9, overrun_ns / 1e9, span_s, window_admitted,
                        _per_tx_us(sum(window_ns), window_admitted), by_stage,
                        None if other_on_loop_ns is None else min(other_on_loop_ns, other_ns) / 1e9)


def loop_other_ns(stages: StageCPU, loop_cpu_ns: int, inline_ns: int = 0) -> int:
    """The event loop thread's CPU outside every stage: its CPU since the process began
    (`thread_cpu_ns()` read on it, after the stages' totals were read) less its laps and
    `inline_ns` (stage CPU filed from elsewhere that ran on it: the verify pool's, inline)."""
    return max(0, loop_cpu_ns - sum(stages.loop_ns) - inline_ns)


def _per_tx_us(cpu_ns: int, txs: int) -> float | None:
    return cpu_ns / txs / 1e3 if txs > 0 else None
