"""What a node counts and times, and the small instruments it counts with.

Counters are plain integers on `NodeMetrics`, bumped in place by the node (an attribute
increment costs tens of nanoseconds; a metrics library's labelled counter costs ~1 us,
more than the rest of a cheap admission check). Distributions keep two views:

- fixed buckets since start (cumulative, what Prometheus histograms need), and
- a ring of the most recent samples, from which percentiles are read when someone
  asks (`/metrics` is polled every ~2 s; sorting 4,096 floats takes ~0.3 ms).

`qmemo.node.reporting` reads these into the frozen snapshot that qmemo.net.wire encodes
as docs/api.md's JSON document and `qmemo.net.prometheus` renders as text. Thread safety:
verify timings arrive from the pool's threads and are merged under one lock per
batch; everything else is touched only on the event loop.

Never imports aiohttp or knows about HTTP.
"""

from __future__ import annotations

import bisect
import os
import threading
import time
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from qmemo.node.stages import StageCPU

# Bucket upper bounds in seconds. Verify: Falcon-512 ~45 us, ML-DSA-44 ~30 us,
# SPHINCS+-128f ~1.5 ms; the buckets bracket all of them with ~2x resolution.
VERIFY_BUCKETS_S = (10e-6, 20e-6, 30e-6, 40e-6, 50e-6, 60e-6, 80e-6, 100e-6, 150e-6, 250e-6, 500e-6,
                    1e-3, 2.5e-3, 5e-3, 10e-3)
# Block intervals and validation stages: from a near-empty block to a slow minute.
INTERVAL_BUCKETS_S = (0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 6.0, 10.0, 30.0)
LAG_BUCKETS_S = (0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
STAGE_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
RECENT_SAMPLES = 4096

VERIFY_PATHS = ("admission", "block")
VALIDATION_STAGES = ("decode", "signatures", "merkle", "state", "durable", "storage")


class Distribution:
    """Samples (seconds) in fixed cumulative buckets, plus a ring of the recent ones."""

    __slots__ = ("bounds", "counts", "total", "count", "recent")

    def __init__(self, bounds: Sequence[float], recent: int = RECENT_SAMPLES) -> None:
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)   # the last bucket is +Inf
        self.total = 0.0
        self.count = 0
        self.recent: deque[float] = deque(maxlen=recent)

    def observe(self, value_s: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value_s)] += 1
        self.total += value_s
        self.count += 1
        self.recent.append(value_s)

    def observe_many(self, values_s: Sequence[float]) -> None:
        bounds, counts, find = self.bounds, self.counts, bisect.bisect_left
        total = 0.0
        n = 0
        for value in values_s:
            counts[find(bounds, value)] += 1
            total += value
            n += 1
        self.total += total
        self.count += n
        self.recent.extend(values_s)

    def observe_sampled(self, count: int, total_s: float, samples_s: Sequence[float]) -> None:
        """`count` observations summing to `total_s`, known by a few evenly spread `samples_s`
        (native code measures each call and hands back 16 at most: no Python per call). The
        count and total are exact; each sample stands for count / len(samples) of the buckets'
        counts and is kept as one recent sample for the percentiles."""
        self.total += total_s
        self.count += count
        if not samples_s:
            self.counts[bisect.bisect_left(self.bounds, total_s / count if count else 0.0)] += count
            return
        share, extra = divmod(count, len(samples_s))
        for i, value in enumerate(samples_s):
            self.counts[bisect.bisect_left(self.bounds, value)] += share + (1 if i < extra else 0)
        self.recent.extend(samples_s)

    def percentiles(self, *quantiles: float) -> list[float | None]:
        """Nearest-rank percentiles of the recent samples (None when there are none)."""
        ordered = sorted(self.recent)
        if not ordered:
            return [None for _ in quantiles]
        last = len(ordered) - 1
        return [ordered[min(last, int(q * len(ordered)))] for q in quantiles]

    def max_recent(self) -> float | None:
        return max(self.recent) if self.recent else None

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound, count of samples <= bound) per bucket, +Inf last: Prometheus's `le`."""
        running, out = 0, []
        for bound, count in zip((*self.bounds, float("inf")), self.counts):
            running += count
            out.append((bound, running))
        return out


class RateWindow:
    """Events per second over the last `window_s`, from (time, count) marks."""

    __slots__ = ("window_s", "_marks")

    def __init__(self, window_s: float = 10.0) -> None:
        self.window_s = window_s
        self._marks: deque[tuple[float, int]] = deque()

    def add(self, count: int, now: float) -> None:
        self._marks.append((now, count))
        self._trim(now)

    def rate(self, now: float) -> float:
        self._trim(now)
        return sum(count for _, count in self._marks) / self.window_s

    def _trim(self, now: float) -> None:
        marks = self._marks
        while marks and marks[0][0] < now - self.window_s:
            marks.popleft()


@dataclass
class VerifyMetrics:
    """Signature verifications by path; fed from pool threads, so merged under a lock."""

    threads: int
    count: dict[str, int] = field(default_factory=lambda: dict.fromkeys(VERIFY_PATHS, 0))
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(VERIFY_PATHS, 0.0))
    # The verify threads' CPU (ns) in their jobs: the `verify` stage (qmemo.node.stages).
    cpu_ns: dict[str, int] = field(default_factory=lambda: dict.fromkeys(VERIFY_PATHS, 0))
    # Signatures verified inside those jobs: the `verify` stage's `txs`. Block headers checked
    # on the event loop are in `count` but not here: their CPU is in block_validate/block_build,
    # and counting them against the jobs' CPU would understate the cost per signature.
    job_count: int = 0
    latency: dict[str, Distribution] = field(
        default_factory=lambda: {path: Distribution(VERIFY_BUCKETS_S) for path in VERIFY_PATHS})
    window: RateWindow = field(default_factory=RateWindow)
    cache_hits: int = 0
    cache_misses: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, path: str, durations_ns: Sequence[int], cpu_ns: int | None = None) -> None:
        """Add one batch of per-call durations (nanoseconds) to `path`'s figures, and, for an
        executor job, the CPU time it took on its thread (`thread_time_ns`, all of it: cache
        lookups too). Without `cpu_ns` the calls were made elsewhere (block headers on the
        event loop) and their CPU is some other stage's."""
        if not durations_ns and not cpu_ns:
            return
        seconds = [d * 1e-9 for d in durations_ns]
        with self.lock:
            if cpu_ns is not None:
                self.cpu_ns[path] += cpu_ns
                self.job_count += len(seconds)
            self.count[path] += len(seconds)
            self.seconds[path] += sum(seconds)
            self.latency[path].observe_many(seconds)
            self.window.add(len(seconds), time.monotonic())

    def add_path(self, path: str) -> None:
        """Count a path beside VERIFY_PATHS (a shard's node: "receipt")."""
        with self.lock:
            self.count.setdefault(path, 0)
            self.seconds.setdefault(path, 0.0)
            self.cpu_ns.setdefault(path, 0)
            self.latency.setdefault(path, Distribution(VERIFY_BUCKETS_S))

    def record_summary(self, path: str, count: int, total_ns: int, samples_ns: Sequence[int],
                       cpu_ns: int | None = None) -> None:
        """`record` for native jobs: `count` verifications taking `total_ns` in all, a few
        sampled durations (Distribution.observe_sampled), and the job's CPU (the `verify`
        stage) when it ran on a pool thread."""
        if not count and not cpu_ns:
            return
        with self.lock:
            if cpu_ns is not None:
                self.cpu_ns[path] += cpu_ns
                self.job_count += count
            self.count[path] += count
            self.seconds[path] += total_ns * 1e-9
            self.latency[path].observe_sampled(count, total_ns * 1e-9, [d * 1e-9 for d in samples_ns])
            self.window.add(count, time.monotonic())

    def count_cache(self, hits: int, misses: int) -> None:
        """Signatures found verified already (hits) or checked now (misses)."""
        with self.lock:
            self.cache_hits += hits
            self.cache_misses += misses

    def latency_us(self) -> dict[str, float | None]:
        """p50/p99 over the recent samples of every path together."""
        with self.lock:
            merged = sorted(s for d in self.latency.values() for s in d.recent)
        if not merged:
            return {"p50": None, "p99": None}
        last = len(merged) - 1
        return {"p50": merged[min(last, len(merged) // 2)] * 1e6,
                "p99": merged[min(last, int(0.99 * len(merged)))] * 1e6}

    def ops_per_s(self) -> float:
        with self.lock:
            return self.window.rate(time.monotonic())


@dataclass
class NodeMetrics:
    """Every counter and distribution of one node, since it started."""

    verify: VerifyMetrics
    started_monotonic: float = field(default_factory=time.monotonic)
    stages: StageCPU = field(default_factory=StageCPU)
    tx_received: int = 0
    tx_accepted: int = 0
    tx_duplicate: int = 0
    tx_rejected: Counter[str] = field(default_factory=Counter)
    tx_committed: int = 0
    tx_evicted: Counter[str] = field(default_factory=Counter)
    blocks_produced: int = 0
    blocks_received: int = 0
    blocks_rejected: Counter[str] = field(default_factory=Counter)
    # Our blocks' pushes to a peer, attempted: "ids" (as `BlockIds`, rebuilt from the peer's
    # pool), "missing" (of those, answered that it lacks a transaction, or a 404 from a node
    # that does not know the call), "whole" (as the encoding: after a "missing", or straight
    # away while a peer lacked one lately).
    blocks_pushed: Counter[str] = field(default_factory=Counter)
    missed_slots: int = 0
    block_interval: Distribution = field(default_factory=lambda: Distribution(INTERVAL_BUCKETS_S, 256))
    last_block_interval_s: float | None = None
    validation: dict[str, Distribution] = field(
        default_factory=lambda: {stage: Distribution(STAGE_BUCKETS_S, 32) for stage in VALIDATION_STAGES})
    loop_lag: Distribution = field(default_factory=lambda: Distribution(LAG_BUCKETS_S, 1200))
    bytes_in: int = 0
    bytes_out: int = 0
    relayed_txs: int = 0
    reorgs: int = 0

    def uptime_s(self) -> float:
        return time.monotonic() - self.started_monotonic

    def mean_validation_ms(self) -> dict[str, float | None]:
        """Per stage, the mean over the recent blocks (the ring holds the last 32)."""
        out: dict[str, float | None] = {}
        for stage, distribution in self.validation.items():
            recent = distribution.recent
            out[stage] = sum(recent) / len(recent) * 1e3 if recent else None
        return out


def open_fds() -> int | None:
    """How many file descriptors this process has open (/proc/self/fd; None where there is no /proc)."""
    try:
        entries = os.listdir("/proc/self/fd")
    except OSError:
        return None
    return len(entries) - 1     # less the listing's own descriptor, open while it read the folder


def process_usage() -> tuple[float, int, int | None]:
    """This process's CPU seconds (user + system, all threads), its resident set in bytes,
    and the part of it that is neither file-backed nor shared (None without /proc)."""
    cpu_s = time.process_time()
    try:
        with open("/proc/self/statm", "rb") as statm:
            fields = statm.read().split()
        page = os.sysconf("SC_PAGE_SIZE")
        rss, shared = int(fields[1]) * page, int(fields[2]) * page
        return cpu_s, rss, rss - shared
    except (OSError, ValueError, IndexError):
        import resource

        return cpu_s, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, None
