"""The generator's result files: a run's `summary.json` and a sweep's `sweep.json`.

One schema for each, as dataclasses that the writer (qmemo.load.run) fills and the
reader (qmemo.analysis.devnet, for the report) decodes with the same classes
(qmemo.records: strict, a missing or unknown key is an error). Whether a run saturated
the chain is decided here, once, when the summary is made; readers take the verdict
from the file instead of re-deriving it. docs/devnet.md describes every field.

Pure: no I/O beyond `read_*`/`write_*` at the bottom, no clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from qmemo.errors import DecodeError
from qmemo.load.latency import LatencySummary, RunCounts, RunSummary
from qmemo.records import OMIT_NONE, from_json, to_json

SUMMARY_SCHEMA = "qmemo-load-summary/2"   # /2: the writer's saturation verdict ("saturated", "why")
SWEEP_SCHEMA = "qmemo-sweep/2"

SATURATION_SHARE = 0.9          # committed below 90% of the target: the chain cannot keep up
SATURATION_P99_INTERVALS = 3    # or p99 intended->committed beyond 3 block intervals


@dataclass(frozen=True, slots=True)
class Latency:
    """Percentiles of one latency kind, in ms (None: nothing was measured)."""

    count: int
    percentiles_ms: dict[str, float | None]     # "p50", "p90", "p95", "p99", "p99.9"
    max_ms: float | None
    mean_ms: float | None


@dataclass(frozen=True, slots=True)
class Latencies:
    intended_to_committed: Latency
    sent_to_committed: Latency
    sent_to_accepted: Latency


@dataclass(frozen=True, slots=True)
class Counts:
    """What became of every planned transaction (see qmemo.load.latency.RunCounts)."""

    planned: int
    sent: int
    accepted: int
    duplicate: int
    committed: int
    rejected: dict[str, int]                    # by reason
    lost: int
    failed: int
    unsent: int
    rejected_total: int
    accounted: int                              # committed + rejected + lost + failed + unsent


@dataclass(frozen=True, slots=True)
class Failover:
    """The sender's failover (qmemo.load.sender): tries nodes did not answer, and batches
    (and their transactions) that went to a node other than their own - resent after a
    failure, or sent there at once while their own node was known to be down."""

    failovers: int
    failover_txs: int
    node_failures: dict[str, int]               # by node URL


@dataclass(frozen=True, slots=True)
class LoadSummary:
    schema: str
    target_tps: float
    committed_tps: float
    measured_s: float
    warmup_s: float
    interrupted: bool
    counts: Counts
    latency_ms: Latencies
    schedule_lag_ms: Latency
    generator_fell_behind: bool
    saturated: bool                             # the chain could not keep up with the offered load
    why: str                                    # the saturation reasons, "; "-separated ("" if none)
    # None (and absent from the file) in summaries written before the sender failed over.
    failover: Failover | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True, slots=True)
class SweepRow:
    target_tps: float
    committed_tps: float
    p50_ms: float | None                        # intended -> committed
    p99_ms: float | None
    lost: int
    rejected: int
    failed: int
    saturated: bool
    why: str
    run: str                                    # the stage's run folder


@dataclass(frozen=True, slots=True)
class Sweep:
    schema: str
    rows: tuple[SweepRow, ...]


def _finite(value: float) -> float | None:
    # JSON has no NaN: a latency nothing was measured for is null.
    return None if math.isnan(value) else value


def _latency(summary: LatencySummary) -> Latency:
    return Latency(summary.count, {k: _finite(v) for k, v in summary.percentiles_ms.items()},
                   _finite(summary.max_ms), _finite(summary.mean_ms))


def _counts(counts: RunCounts) -> Counts:
    return Counts(counts.planned, counts.sent, counts.accepted, counts.duplicate, counts.committed,
                  dict(counts.rejected), counts.lost, counts.failed, counts.unsent, counts.rejected_total,
                  counts.accounted)


def saturation_reasons(run: RunSummary, target_tps: float, block_interval_s: float) -> list[str]:
    """Why this run says the chain was at its limit (empty: it kept up)."""
    reasons = []
    if run.committed_tps < SATURATION_SHARE * target_tps:
        reasons.append("committed < 90% of target")
    p99 = run.intended_to_committed.percentiles_ms["p99"]
    if not p99 <= SATURATION_P99_INTERVALS * block_interval_s * 1e3:  # also true for NaN: nothing committed
        reasons.append("p99 > 3 block intervals")
    if run.generator_fell_behind:
        reasons.append("generator fell behind")
    return reasons


def load_summary(run: RunSummary, *, target_tps: float, interrupted: bool, block_interval_s: float,
                 failover: Failover | None = None) -> LoadSummary:
    """The summary.json of one run."""
    reasons = saturation_reasons(run, target_tps, block_interval_s)
    return LoadSummary(
        schema=SUMMARY_SCHEMA, target_tps=target_tps, committed_tps=run.committed_tps, measured_s=run.measured_s,
        warmup_s=run.warmup_s, interrupted=interrupted, counts=_counts(run.counts),
        latency_ms=Latencies(_latency(run.intended_to_committed), _latency(run.sent_to_committed),
                             _latency(run.sent_to_accepted)),
        schedule_lag_ms=_latency(run.schedule_lag), generator_fell_behind=run.generator_fell_behind,
        saturated=bool(reasons), why="; ".join(reasons), failover=failover,
    )


def sweep_row(summary: LoadSummary, run_dir: Path) -> SweepRow:
    """One stage of a sweep: its summary's figures and verdict, and where it is."""
    percentiles = summary.latency_ms.intended_to_committed.percentiles_ms
    return SweepRow(summary.target_tps, summary.committed_tps, percentiles["p50"], percentiles["p99"],
                    summary.counts.lost, summary.counts.rejected_total, summary.counts.failed, summary.saturated,
                    summary.why, str(run_dir))


# --- files ------------------------------------------------------------------------------------

def _decode(cls: type, schema: str, data: Any, where: str) -> Any:
    found = data.get("schema") if isinstance(data, dict) else None
    if found != schema:
        raise DecodeError(f"{where} is not a {schema} file (schema {found!r})")
    return from_json(cls, data, where)


def read_summary(path: Path) -> LoadSummary:
    return _decode(LoadSummary, SUMMARY_SCHEMA, _read(path), str(path))


def read_sweep(path: Path) -> Sweep:
    return _decode(Sweep, SWEEP_SCHEMA, _read(path), str(path))


def write(path: Path, record: LoadSummary | Sweep) -> None:
    path.write_bytes(orjson.dumps(to_json(record), option=orjson.OPT_INDENT_2))


def _read(path: Path) -> Any:
    try:
        return orjson.loads(path.read_bytes())
    except orjson.JSONDecodeError as exc:
        raise DecodeError(f"{path} is not JSON: {exc}") from exc
