"""Per-transaction timings and the statistics of a load run: pure bookkeeping, no I/O.

Each planned transaction has five moments (seconds from the run's start):
intended (from the schedule), sent (the request left), accepted (the node answered
"accepted"), included (first seen in a block) and committed (first seen in a block
reported `final`: docs/api.md, "Durability"). A transaction counts as committed only
once final. The latencies that come out of them:

- intended -> committed: the honest one. It starts when the schedule *wanted* the
  transaction sent, so time spent waiting behind a stalled server or a full in-flight
  window counts (no coordinated omission).
- sent -> committed: what a closed-loop client would report; smaller under overload.
- sent -> accepted: the admission round trip.
- intended -> included: how soon a block carried it (before it was final).

Percentiles come from HdrHistogram (microsecond resolution, 3 significant digits) so
p99.9 and max are exact to the histogram's precision at any run length. Transactions
intended inside the warm-up are counted but left out of the latency percentiles.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from dataclasses import dataclass, field

from hdrh.histogram import HdrHistogram

# Statuses of a planned transaction.
PLANNED, ACCEPTED, DUPLICATE, REJECTED, FAILED = range(5)
STATUS_NAMES = ("unsent", "accepted", "duplicate", "rejected", "failed")

PERCENTILES = (50.0, 90.0, 95.0, 99.0, 99.9)
# The run's four latency kinds, as named in its histogram files (summary.json's names).
LATENCY_FILES = ("intended_to_committed", "sent_to_committed", "sent_to_accepted", "schedule_lag",
                 "intended_to_included", "included_to_committed")
# Latencies are recorded in microseconds up to one hour: far beyond any run's timeout.
_HIST_MAX_US = 3_600_000_000
# A generator whose p99 send lag (sent - when its batch was due) exceeds this is behind
# its own schedule. Waiting for a batch to fill is not lag: it is planned, and counted
# in intended -> committed.
SCHEDULE_LAG_WARN_S = 0.1


class Timings:
    """The four moments and the outcome of every planned transaction, in flat arrays."""

    def __init__(self, intended: list[float]) -> None:
        n = len(intended)
        self.intended = array("d", intended)
        self.due = array("d", [math.nan]) * n       # when its batch was due to leave
        self.sent = array("d", [math.nan]) * n
        self.accepted = array("d", [math.nan]) * n
        self.included = array("d", [math.nan]) * n
        self.committed = array("d", [math.nan]) * n
        self.status = bytearray(n)
        self.reasons: dict[int, str] = {}

    def __len__(self) -> int:
        return len(self.intended)

    def mark_sent(self, index: int, t: float, due: float | None = None) -> None:
        """Sent at `t`; its batch was due at `due` (default: its own intended time)."""
        self.sent[index] = t
        self.due[index] = self.intended[index] if due is None else due

    def mark_answer(self, index: int, t: float, status: int, reason: str | None = None) -> None:
        self.status[index] = status
        if status == ACCEPTED or status == DUPLICATE:
            self.accepted[index] = t
        if reason is not None:
            self.reasons[index] = reason

    def mark_sent_range(self, first: int, last: int, t: float, due: float) -> None:
        """Transactions first..last-1 (one batch) sent at `t`, due at `due`: one slice
        write per array, not a Python call per transaction on the sending path."""
        count = last - first
        self.sent[first:last] = array("d", (t,)) * count
        self.due[first:last] = array("d", (due,)) * count

    def mark_answer_range(self, first: int, last: int, t: float, status: int, reason: str | None = None) -> None:
        """The same answer for transactions first..last-1 (one batch), as `mark_answer` each."""
        count = last - first
        self.status[first:last] = bytes((status,)) * count
        if status == ACCEPTED or status == DUPLICATE:
            self.accepted[first:last] = array("d", (t,)) * count
        if reason is not None:
            self.reasons.update(dict.fromkeys(range(first, last), reason))

    def mark_included(self, index: int, t: float) -> None:
        if math.isnan(self.included[index]):
            self.included[index] = t

    def mark_committed(self, index: int, t: float) -> None:
        if math.isnan(self.committed[index]):
            self.committed[index] = t


@dataclass(frozen=True, slots=True)
class LatencySummary:
    count: int
    percentiles_ms: dict[str, float]
    max_ms: float
    mean_ms: float


@dataclass(frozen=True, slots=True)
class RunCounts:
    """What became of every planned transaction.

    `committed`, `rejected`, `lost`, `failed` and `unsent` are disjoint outcomes that
    add up to `planned`; `sent`, `accepted` and `duplicate` count answers on the way.
    """

    planned: int
    sent: int
    accepted: int
    duplicate: int
    committed: int     # seen in a final block (whatever the HTTP answer said)
    rejected: dict[str, int]  # refused by the node, by reason
    lost: int          # answered accepted (or duplicate) but not in a final block by the end
    failed: int        # no usable answer (connection error, timeout) and not in a block
    unsent: int        # never sent (the run was cut short)
    included: int = 0  # seen in a block, final or not (committed ones too): not an outcome

    @property
    def rejected_total(self) -> int:
        return sum(self.rejected.values())

    @property
    def accounted(self) -> int:
        return self.committed + self.rejected_total + self.lost + self.failed + self.unsent


@dataclass(frozen=True, slots=True)
class RunSummary:
    counts: RunCounts
    intended_to_committed: LatencySummary
    sent_to_committed: LatencySummary
    sent_to_accepted: LatencySummary
    schedule_lag: LatencySummary
    warmup_s: float
    measured_s: float
    committed_tps: float           # committed in the measured window / its length
    generator_fell_behind: bool
    intended_to_included: LatencySummary | None = None
    included_to_committed: LatencySummary | None = None
    # The HdrHistograms (microseconds) the summaries above were read from, by
    # LATENCY_FILES name: kept so the run folder can hold them (qmemo.load.hdr_files).
    histograms: dict[str, HdrHistogram] = field(default_factory=dict, repr=False, compare=False)


def latency_histogram(values_s: list[float]) -> HdrHistogram:
    """The values (seconds) in an HdrHistogram of microseconds, clamped to its range."""
    hist = HdrHistogram(1, _HIST_MAX_US, 3)
    for value in values_s:
        hist.record_value(min(max(1, round(value * 1e6)), _HIST_MAX_US))
    return hist


def summarize_latencies(values_s: list[float]) -> LatencySummary:
    return summarize_histogram(latency_histogram(values_s))


def summarize_histogram(hist: HdrHistogram) -> LatencySummary:
    if hist.get_total_count() == 0:
        return LatencySummary(0, {_pname(p): math.nan for p in PERCENTILES}, math.nan, math.nan)
    return LatencySummary(
        count=hist.get_total_count(),
        percentiles_ms={_pname(p): hist.get_value_at_percentile(p) / 1e3 for p in PERCENTILES},
        max_ms=hist.get_max_value() / 1e3,
        mean_ms=hist.get_mean_value() / 1e3,
    )


def _pname(p: float) -> str:
    return f"p{p:g}"


def summarize(timings: Timings, *, warmup_s: float, window_end_s: float | None = None) -> RunSummary:
    """Counts over every planned transaction; latencies and committed TPS over those
    intended in the measured window [warmup_s, window_end_s) - the schedule's duration, or
    the moment the run was interrupted (default: just past the last intended send).

    Called once the run has stopped waiting for commits: anything accepted but not
    committed by then is lost.
    """
    if window_end_s is None:
        window_end_s = (timings.intended[-1] if len(timings) else 0.0) + 1e-9
    status_counts = Counter(timings.status)
    outcomes: Counter[str] = Counter()
    rejected: Counter[str] = Counter()
    for i, status in enumerate(timings.status):
        if not math.isnan(timings.committed[i]):
            outcomes["committed"] += 1
        elif status == REJECTED:
            rejected[timings.reasons.get(i, "unknown")] += 1
        elif status in (ACCEPTED, DUPLICATE):
            outcomes["lost"] += 1
        elif status == FAILED:
            outcomes["failed"] += 1
        else:
            outcomes["unsent"] += 1
    counts = RunCounts(
        planned=len(timings),
        sent=sum(1 for t in timings.sent if not math.isnan(t)),
        accepted=status_counts[ACCEPTED],
        duplicate=status_counts[DUPLICATE],
        committed=outcomes["committed"],
        rejected=dict(rejected),
        lost=outcomes["lost"],
        failed=outcomes["failed"],
        unsent=outcomes["unsent"],
        included=sum(1 for t in timings.included if not math.isnan(t)),
    )
    measured = [i for i in range(len(timings)) if warmup_s <= timings.intended[i] < window_end_s]
    i2c, s2c, s2a, lag, i2i, i2f = [], [], [], [], [], []
    for i in measured:
        sent, accepted, done = timings.sent[i], timings.accepted[i], timings.committed[i]
        included = timings.included[i]
        if not math.isnan(included):
            i2i.append(included - timings.intended[i])
            if not math.isnan(done):
                i2f.append(done - included)
        if not math.isnan(sent):
            lag.append(sent - timings.due[i])
            if not math.isnan(accepted):
                s2a.append(accepted - sent)
            if not math.isnan(done):
                s2c.append(done - sent)
        if not math.isnan(done):
            i2c.append(done - timings.intended[i])
    measured_s = max(window_end_s - warmup_s, 1e-9)
    committed_in_window = sum(1 for i in measured if not math.isnan(timings.committed[i]))
    histograms = {name: latency_histogram(values) for name, values in
                  zip(LATENCY_FILES, (i2c, s2c, s2a, lag, i2i, i2f))}
    i2c_summary, s2c_summary, s2a_summary, lag_summary, i2i_summary, i2f_summary = (
        summarize_histogram(h) for h in histograms.values())
    return RunSummary(
        counts=counts,
        intended_to_committed=i2c_summary,
        sent_to_committed=s2c_summary,
        sent_to_accepted=s2a_summary,
        schedule_lag=lag_summary,
        warmup_s=warmup_s,
        measured_s=measured_s,
        committed_tps=committed_in_window / measured_s,
        generator_fell_behind=bool(lag_summary.count)
        and lag_summary.percentiles_ms["p99"] / 1e3 > SCHEDULE_LAG_WARN_S,
        intended_to_included=i2i_summary,
        included_to_committed=i2f_summary,
        histograms=histograms,
    )
