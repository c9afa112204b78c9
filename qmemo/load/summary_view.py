"""The generator's terminal summary: a pure function from the summary (qmemo.load.summary's
dataclasses, the very ones written to summary.json and sweep.json) to rich tables."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from qmemo.load.summary import Latency, LoadSummary, SweepRow

PERCENTILE_KEYS = ("p50", "p90", "p95", "p99", "p99.9")


def _ms(value: float | None) -> str:
    return "-" if value is None or value != value else f"{value:,.1f}"


def _latency_row(label: str, latency: Latency) -> tuple[str, ...]:
    return (label, *(_ms(latency.percentiles_ms.get(p)) for p in PERCENTILE_KEYS), _ms(latency.max_ms))


def _yes(flag: bool) -> Text | str:
    return Text("yes", style="red") if flag else "no"


def render_summary(summary: LoadSummary, where: str | None = None) -> Group:
    counts = summary.counts
    head = Table(title="load run", title_justify="left", show_header=False)
    head.add_column("what")
    head.add_column("value", justify="right")
    head.add_row("target TPS", f"{summary.target_tps:,.0f}")
    head.add_row("committed TPS (after warm-up)", f"{summary.committed_tps:,.0f}")
    for key in ("planned", "sent", "accepted", "committed", "lost", "failed", "unsent"):
        head.add_row(key, f"{getattr(counts, key):,}")
    if counts.lost_reasons:
        head.add_row("lost, why (the nodes at the end)",
                     ", ".join(f"{k}: {v:,}" for k, v in sorted(counts.lost_reasons.items(), key=lambda kv: -kv[1])))
    head.add_row("rejected", f"{counts.rejected_total:,}" + (
        " (" + ", ".join(f"{k}: {v:,}" for k, v in sorted(counts.rejected.items())) + ")"
        if counts.rejected else ""))
    head.add_row("accounted (committed+rejected+lost+failed+unsent)",
                 Text(f"{counts.accounted:,} of {counts.planned:,}",
                      style="green" if counts.accounted == counts.planned else "bold red"))
    latency = Table(title="latency, ms (warm-up excluded; intended→committed is the honest one)",
                    title_justify="left")
    latency.add_column("", no_wrap=True)
    for key in (*PERCENTILE_KEYS, "max"):
        latency.add_column(key, justify="right")
    kinds = summary.latency_ms
    latency.add_row(*_latency_row("intended→committed", kinds.intended_to_committed))
    # Inclusion (first seen in a block) and the wait from there to final, when the file has them:
    # the saturation verdict is taken on intended→included, so the table shows it.
    if kinds.intended_to_included is not None:
        latency.add_row(*_latency_row("intended→included", kinds.intended_to_included))
    if kinds.included_to_committed is not None:
        latency.add_row(*_latency_row("included→committed", kinds.included_to_committed))
    latency.add_row(*_latency_row("sent→committed", kinds.sent_to_committed))
    latency.add_row(*_latency_row("sent→accepted", kinds.sent_to_accepted))
    latency.add_row(*_latency_row("send lag (sent−due)", summary.schedule_lag_ms))
    failover = summary.failover
    if failover:
        failures = ", ".join(f"{node}: {n:,}" for node, n in sorted(failover.node_failures.items()))
        head.add_row("failed over to another node", f"{failover.failovers:,} batches, "
                     f"{failover.failover_txs:,} txs" + (f" (no answer from {failures})" if failures else ""))
        if failover.resends is not None:
            head.add_row("sent again (refused for now)", f"{failover.resends:,} requests, {failover.resend_txs:,} txs")
        if failover.outcome_unknown_resent:
            resolved = ", ".join(f"{k}: {v:,}" for k, v in sorted((failover.outcome_unknown_resolved or {}).items(),
                                                                   key=lambda kv: -kv[1]))
            head.add_row("sent again (answer lost)", f"{failover.outcome_unknown_resent:,} txs ({resolved})")
    if summary.generator_cpu_us_per_tx is not None:
        head.add_row("generator_cpu_us_per_tx", f"{summary.generator_cpu_us_per_tx:,.2f} "
                     f"({summary.generator_cpu_s:,.2f} s of the generator's CPU, {counts.sent:,} sent)")
    parts: list[Any] = [head, latency]
    if summary.generator_fell_behind:
        parts.append(Text("WARNING: the generator fell behind its own schedule (p99 send lag above 100 ms): "
                          "the generator, not the chain, limited this run. Lower --tps, raise --batch, or "
                          "raise --max-in-flight.", style="bold red"))
    if summary.interrupted:
        parts.append(Text("The run was interrupted: unsent transactions are counted as such, and the wait for "
                          "commits was cut short, so some of those counted lost may still be committed.",
                          style="yellow"))
    if where:
        parts.append(Text(f"run folder: {where}"))
    return Group(*parts)


def render_sweep(rows: Sequence[SweepRow]) -> Table:
    table = Table(title="sweep: throughput vs latency (intended → committed)", title_justify="left")
    for header in ("target TPS", "committed TPS", "p50 ms", "p99 ms", "lost", "rejected", "throughput saturated",
                   "p99 > 3 blocks", "generator behind"):
        table.add_column(header, justify="right")
    for row in rows:
        table.add_row(f"{row.target_tps:,.0f}", f"{row.committed_tps:,.0f}", _ms(row.p50_ms), _ms(row.p99_ms),
                      f"{row.lost:,}", f"{row.rejected:,}", _yes(row.throughput_saturated),
                      _yes(row.latency_saturated), _yes(row.generator_fell_behind))
    return table
