"""The dashboard's shards table: a sharded devnet's nodes grouped by shard.

Per shard: its nodes up, its committed TPS, the receipts its blocks credit per second
(cross-shard transfers from the other shards), its nodes' signature verifies per second,
and verifies per committed transaction measured beside the research's model, 1 + the
cross-shard share (here: receipts credited per transaction committed, the share this
shard receives), and the generator process that drives it with its send lag p99 (a
fleet's part falling behind its schedule shows on its shards' rows). Then the total over
the shards, and the generator's cross-shard progress and latency when it runs.

Pure, as view.py: polls in, a table out (tested on a fixed-width console).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.table import Table

from qmemo.api_schema import MetricsSnapshot
from qmemo.monitor.view import NodePoll, Snapshot, _fmt, _num, _rate


@dataclass(frozen=True, slots=True)
class ShardRow:
    shard: int
    nodes: int
    up: int
    committed_tps: float | None       # the best-informed node's: every node commits the same blocks
    credited_per_s: float | None      # receipts credited by its blocks
    verify_per_s: float | None        # per node, mean: signatures verified in jobs (transactions, receipts)
    verifies_per_tx: float | None     # verify_per_s / committed_tps
    modelled_per_tx: float | None     # 1 + credited_per_s / committed_tps


def _verified(metrics: MetricsSnapshot) -> float:
    return metrics.stages.by_stage["verify"].txs if "verify" in metrics.stages.by_stage else 0


def shard_rows(snapshot: Snapshot) -> list[ShardRow]:
    """One row per shard the polled nodes run (none for an unsharded devnet)."""
    before = {p.url: p for p in snapshot.previous.polls} if snapshot.previous else {}
    groups: dict[int, list[NodePoll]] = {}
    for poll in snapshot.polls:
        metrics = poll.metrics or (before.get(poll.url).metrics if before.get(poll.url) else None)
        if metrics is not None and metrics.shard is not None:
            groups.setdefault(metrics.shard.index, []).append(poll)
    rows = []
    for shard, polls in sorted(groups.items()):
        up = [p for p in polls if p.metrics is not None]
        committed = _best([_rate(p, before.get(p.url), lambda s: s.tx.committed) for p in up])
        credited = _best([_rate(p, before.get(p.url), lambda s: s.receipts.credited if s.receipts else 0)
                          for p in up])
        verifies = [v for v in (_rate(p, before.get(p.url), _verified) for p in up) if v is not None]
        verify = sum(verifies) / len(verifies) if verifies else None
        rows.append(ShardRow(shard, len(polls), len(up), committed, credited, verify,
                             verify / committed if verify is not None and committed else None,
                             1 + credited / committed if credited is not None and committed else None))
    return rows


def shard_generators(generator: dict[str, Any] | None) -> dict[int, tuple[str, float | None]]:
    """Which generator drives each shard, and its send lag p99 (ms): a fleet's parts by the
    shards each lists; one process for every shard it names."""
    if not generator or not generator.get("running"):
        return {}
    parts = generator.get("generators")
    if isinstance(parts, list):
        return {shard: (f"part {part.get('part')}", _num(part.get("schedule_lag_p99_ms")))
                for part in parts if isinstance(part, dict) for shard in part.get("shards") or ()
                if isinstance(shard, int)}
    return {shard: ("one", _num(generator.get("schedule_lag_p99_ms")))
            for shard in generator.get("shards") or () if isinstance(shard, int)}


def _best(values: Sequence[float | None]) -> float | None:
    return max((v for v in values if v is not None), default=None)


def shards_table(snapshot: Snapshot) -> Table | None:
    rows = shard_rows(snapshot)
    if not rows:
        return None
    table = Table(title="shards (cross-shard receipts credited; verifies per committed tx: measured vs 1 + share)",
                  title_justify="left", expand=True)
    for header in ("shard", "nodes up", "commit TPS", "credited/s", "cross share", "verify/s per node",
                   "verifies/tx", "model 1+share", "generator", "send lag p99"):
        table.add_column(header, justify="left" if header == "shard" else "right", no_wrap=True)
    drivers = shard_generators(snapshot.generator)
    for row in rows:
        share = row.credited_per_s / row.committed_tps if row.credited_per_s is not None and row.committed_tps \
            else None
        part, lag = drivers.get(row.shard, (None, None))
        table.add_row(str(row.shard), f"{row.up} of {row.nodes}", _fmt(row.committed_tps), _fmt(row.credited_per_s),
                      _fmt(share * 100 if share is not None else None, ".0f", "%"), _fmt(row.verify_per_s),
                      _fmt(row.verifies_per_tx, ".2f"), _fmt(row.modelled_per_tx, ".2f"),
                      "-" if part is None else str(part), _fmt(lag, ",.0f", " ms"))
    rates = [row.committed_tps for row in rows if row.committed_tps is not None]
    credited = [row.credited_per_s for row in rows if row.credited_per_s is not None]
    table.add_row("all", f"{sum(r.up for r in rows)} of {sum(r.nodes for r in rows)}",
                  _fmt(sum(rates) if rates else None), _fmt(sum(credited) if credited else None),
                  _fmt(sum(credited) / sum(rates) * 100 if rates and credited and sum(rates) else None, ".0f", "%"),
                  "", "", "", "", "", style="bold")
    cross = (snapshot.generator or {}).get("cross_shard")
    if isinstance(cross, dict):
        table.caption = (f"generator: cross-shard {_fmt(_num(cross.get('credited')))} of "
                         f"{_fmt(_num(cross.get('planned')))} credited; intended→credited p50 / p99 "
                         f"{_fmt(_num(cross.get('p50_ms')))} / {_fmt(_num(cross.get('p99_ms')))} ms")
    return table
