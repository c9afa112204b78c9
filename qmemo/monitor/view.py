"""The dashboard's view: a pure function from snapshots to a rich renderable.

Data flows one way: the poller (monitor/poll.py) collects `Snapshot`s; `derive()` turns
two successive snapshots into rates; `render()` builds the tables. Nothing here does
I/O or reads a clock, so the whole view is tested by rendering to a fixed-width console.

A node's `/metrics` arrives decoded (qmemo.api_schema.MetricsSnapshot, the class the node
fills in); one whose document could not be read (another version) is a poll without
metrics and shows as down, with why. A figure the node has not measured yet is None: "-".
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from qmemo.analysis.memo import CONSERVATIVE_SHARDS, CONSERVATIVE_TPS, TARGET_SHARDS, TARGET_TPS
from qmemo.api_schema import MetricsSnapshot
from qmemo.monitor.headline_view import headline_table
from qmemo.monitor.stages_view import stages_table

# MEMO's per-shard verification requirements, without cross-shard traffic:
# 10,000 TPS / 4 shards = 2,500/s (conservative); 50,700 / 256 = ~198/s (target).
CONSERVATIVE_VERIFY_PER_SHARD = CONSERVATIVE_TPS / CONSERVATIVE_SHARDS
TARGET_VERIFY_PER_SHARD = TARGET_TPS / TARGET_SHARDS


@dataclass(frozen=True, slots=True)
class NodePoll:
    """One poll of one node: its /metrics document, or why there is none."""

    url: str
    time_s: float
    metrics: MetricsSnapshot | None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Baseline:
    """The C single-core verify rate the nodes are set against, and which run it came from.

    The dashboard names the run on its first screen (id, age, quick or full) because a
    "% of C" means nothing without knowing which C: a verify-only quick run of a minute
    ago and a full run of last week are different yardsticks.
    """

    verify_per_s: float | None
    source: str            # a path, or the command that would produce one
    # The same run's fast Falcon verifier (cached key): what a node running it is set against.
    fast_verify_per_s: float | None = None
    run_id: str | None = None
    measured_at_s: float | None = None    # Unix time the run started
    kind: str | None = None               # "full", "quick", "quick, verify only"
    library: str = "liboqs"               # whose verify `verify_per_s` times (libsecp256k1 for ECDSA, ...)
    this_machine: bool = True             # False: another machine's or liboqs build's run, shown as such
    fast_applies: bool = True             # the scheme is one the fast Falcon verifier serves
    busy_load: float | None = None        # load average at the run's start, when above the cores


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything the dashboard shows at one moment."""

    time_s: float
    polls: list[NodePoll]
    baseline: Baseline
    target_tps: float | None = None
    generator: dict[str, Any] | None = None   # the generator's live.json, when one runs
    previous: Snapshot | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class NodeRow:
    """One node's line, derived from its last two polls."""

    name: str
    up: bool
    error: str | None
    height: int | None
    tip_age_s: float | None
    mempool: int | None
    accepted_per_s: float | None
    committed_tps: float | None
    verify_per_s: float | None
    verify_p50_us: float | None
    verify_p99_us: float | None
    cache_hit_rate: float | None
    cpu_percent: float | None
    loop_lag_p99_ms: float | None
    verify_per_core_s: float | None   # verifications per second of verify-thread time
    block_interval_s: float | None
    verifier: str | None              # Falcon's verifier on that node: "fast" or "liboqs"
    key_cache_keys: float | None      # public keys the fast verifier holds decoded
    key_cache_hit_rate: float | None


def _num(value: Any) -> float | None:
    """A number from the generator's live status (its own file: read loosely), else None."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _rate(now: NodePoll, before: NodePoll | None, read: Callable[[MetricsSnapshot], float]) -> float | None:
    """Per second between two polls of one node; None without two, or across a restart."""
    if before is None or before.metrics is None or now.metrics is None:
        return None
    a, b = read(before.metrics), read(now.metrics)
    dt = now.time_s - before.time_s
    if dt <= 0 or b < a:  # b < a: the node restarted
        return None
    return (b - a) / dt


def derive(now: NodePoll, before: NodePoll | None) -> NodeRow:
    m = now.metrics
    if m is None:
        return NodeRow(now.url, False, now.error, *([None] * 16))
    verify, key_cache = m.verify, m.verify.key_cache
    lookups = verify.cache.hits + verify.cache.misses
    verify_count = _rate(now, before, lambda s: sum(s.verify.count.values()))
    verify_busy = _rate(now, before, lambda s: sum(s.verify.seconds.values()))
    cpu = _rate(now, before, lambda s: s.process.cpu_seconds)
    return NodeRow(
        name=m.node,
        up=True,
        error=None,
        height=m.height,
        tip_age_s=m.tip_age_s,
        mempool=m.mempool.count,
        accepted_per_s=_rate(now, before, lambda s: s.tx.accepted),
        committed_tps=_rate(now, before, lambda s: s.tx.committed),
        verify_per_s=verify_count,
        verify_p50_us=verify.latency_us.get("p50"),
        verify_p99_us=verify.latency_us.get("p99"),
        cache_hit_rate=verify.cache.hits / lookups if lookups else None,
        cpu_percent=cpu * 100 if cpu is not None else None,
        loop_lag_p99_ms=m.event_loop_lag_ms.p99,
        verify_per_core_s=verify_count / verify_busy if verify_count and verify_busy else None,
        block_interval_s=m.blocks.interval_s.p50,
        verifier=verify.verifier,
        key_cache_keys=key_cache.size if key_cache is not None else None,
        key_cache_hit_rate=key_cache.hit_rate if key_cache is not None else None,
    )


def node_rows(snapshot: Snapshot) -> list[NodeRow]:
    before = {p.url: p for p in snapshot.previous.polls} if snapshot.previous else {}
    return [derive(poll, before.get(poll.url)) for poll in snapshot.polls]


def _fmt(value: float | None, spec: str = ",.0f", suffix: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:{spec}}{suffix}"


def render(snapshot: Snapshot) -> Group:
    """The whole dashboard for one snapshot: the headline figure live first, then each node
    (a sharded devnet's grouped by shard)."""
    from qmemo.monitor.shards_view import shards_table    # it reads this module's values

    rows = node_rows(snapshot)
    shards = shards_table(snapshot)     # a sharded devnet: its nodes grouped by shard
    return Group(headline_table(snapshot, rows), _nodes_table(rows), *([shards] if shards is not None else []),
                 _chain_table(snapshot, rows),
                 _baseline_table(snapshot, rows), stages_table(snapshot, rows))


def _nodes_table(rows: list[NodeRow]) -> Table:
    table = Table(title="qMEMO devnet: nodes", title_justify="left", expand=True)
    # Short headers, and the node and its state never squeezed out on a narrow terminal.
    for header in ("node", "state", "height", "tip age", "mempool", "acc/s", "commit TPS",
                   "verify/s", "verify µs p50/p99", "cache", "verifier (keys, hit)", "CPU", "lag p99"):
        left = header in ("node", "state")
        table.add_column(header, justify="left" if left else "right", no_wrap=True,
                         min_width=6 if left else None)
    for row in rows:
        if not row.up:
            table.add_row(Text(row.name, style="red"), Text("DOWN", style="bold red"),
                          Text(row.error or "", style="red"), *(["-"] * 10), style="red")
            continue
        table.add_row(
            row.name, Text("up", style="green"), _fmt(row.height), _fmt(row.tip_age_s, ".1f", " s"),
            _fmt(row.mempool), _fmt(row.accepted_per_s), _fmt(row.committed_tps), _fmt(row.verify_per_s),
            f"{_fmt(row.verify_p50_us)}/{_fmt(row.verify_p99_us)}",
            _fmt(row.cache_hit_rate * 100 if row.cache_hit_rate is not None else None, ".0f", "%"),
            _verifier_cell(row), _fmt(row.cpu_percent, ".0f", "%"), _fmt(row.loop_lag_p99_ms, ".1f", " ms"),
        )
    return table


def _verifier_cell(row: NodeRow) -> str:
    """"fast (1,204, 99%)": the verifier, and for the fast one its key cache's size and hit rate."""
    if row.verifier is None:
        return "-"
    if row.key_cache_keys is None:
        return row.verifier
    rate = row.key_cache_hit_rate * 100 if row.key_cache_hit_rate is not None else None
    return f"{row.verifier} ({_fmt(row.key_cache_keys)}, {_fmt(rate, '.0f', '%')})"


def _chain_table(snapshot: Snapshot, rows: list[NodeRow]) -> Table:
    up = [r for r in rows if r.up]
    # Every node commits the same blocks, so the chain's rate is the best-informed node's.
    committed = max((r.committed_tps for r in up if r.committed_tps is not None), default=None)
    interval = max((r.block_interval_s for r in up if r.block_interval_s is not None), default=None)
    table = Table(title="chain", title_justify="left", expand=True, show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("nodes up", f"{len(up)} of {len(rows)}")
    table.add_row("target TPS", _fmt(snapshot.target_tps))
    table.add_row("committed TPS", _fmt(committed))
    table.add_row("block interval p50", _fmt(interval, ".2f", " s"))
    gen = snapshot.generator
    if gen:
        table.add_row("generator: sent / committed", f"{_fmt(_num(gen.get('sent')))} / {_fmt(_num(gen.get('committed')))}")
        table.add_row("generator latency p50 / p99 (intended→committed)",
                      f"{_fmt(_num(gen.get('p50_ms')))} / {_fmt(_num(gen.get('p99_ms')))} ms")
        parts = gen.get("generators")
        if isinstance(parts, list) and parts:     # a --generators fleet: whether each part keeps its schedule
            lags = " / ".join(_fmt(_num(part.get("schedule_lag_p99_ms")) if isinstance(part, dict) else None)
                              for part in parts)
            table.add_row(f"generators: {len(parts)}, send lag p99 per part", f"{lags} ms")
    return table


def age_text(seconds: float | None) -> str:
    """"measured 3 min ago": the baseline's age, in the largest unit that fits."""
    if seconds is None:
        return "age unknown"
    seconds = max(0.0, seconds)
    for unit, size in (("day", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size:
            count = int(seconds // size)
            return f"measured {count} {unit}{'s' if unit == 'day' and count > 1 else ''} ago"
    return f"measured {int(seconds)} s ago"


def baseline_title(snapshot: Snapshot) -> str:
    """The table's title: which C run the figures are set against, how old, how measured."""
    base = snapshot.baseline
    if base.run_id is None:
        return f"verify thread against the C baseline ({base.source})"
    age = age_text(snapshot.time_s - base.measured_at_s if base.measured_at_s is not None else None)
    other = "" if base.this_machine else "; NOT this machine or liboqs build"
    busy = "" if base.busy_load is None else f"; measured BUSY (load {base.busy_load:.1f}): C figures low"
    return (f"verify thread against the C baseline: run {base.run_id} ({base.kind}, {age}{other}{busy}) - "
            f"{base.source}")


def _reference(base: Baseline, row: NodeRow) -> tuple[str, float | None]:
    """The baseline row a node is set against: the same verifier it runs, never another.

    A node on the fast Falcon verifier is set against the fast verifier's C rate; when
    the baseline did not measure that verifier there is no fair figure, so none is shown.
    """
    if row.verifier == "fast" and base.fast_applies:
        return "C fast verifier", base.fast_verify_per_s
    return f"C {base.library}", base.verify_per_s


def _baseline_table(snapshot: Snapshot, rows: list[NodeRow]) -> Table:
    base = snapshot.baseline
    table = Table(title=baseline_title(snapshot), title_justify="left", expand=True)
    # A node's verify thread against C while it verifies: how fast the verify code runs in the
    # node, not how much of C survives end to end (that is the headline panel above).
    for header in ("node", "verify/s per thread-s", "set against", "thread vs C",
                   f"headroom vs {CONSERVATIVE_VERIFY_PER_SHARD:,.0f}/s", f"headroom vs {TARGET_VERIFY_PER_SHARD:,.0f}/s"):
        table.add_column(header, justify="left" if header in ("node", "set against") else "right", no_wrap=True)
    for label, rate in ((f"C {base.library} verifier (1 core)", base.verify_per_s),
                        ("C fast verifier (1 core, cached key)", base.fast_verify_per_s)):
        if rate:
            table.add_row(label, _fmt(rate), "", "100%", _fmt(rate / CONSERVATIVE_VERIFY_PER_SHARD, ".1f", "x"),
                          _fmt(rate / TARGET_VERIFY_PER_SHARD, ".1f", "x"))
    for row in rows:
        per_core = row.verify_per_core_s if row.up else None
        against, reference = _reference(base, row)
        share = per_core / reference * 100 if per_core and reference else None
        table.add_row(row.name, _fmt(per_core), against if reference else f"{against}: not in this run",
                      _fmt(share, ".0f", "%"),
                      _fmt(per_core / CONSERVATIVE_VERIFY_PER_SHARD if per_core else None, ".1f", "x"),
                      _fmt(per_core / TARGET_VERIFY_PER_SHARD if per_core else None, ".1f", "x"))
    return table
