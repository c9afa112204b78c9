"""The generator's terminal summary: a pure function from a summary document to rich tables."""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

LATENCIES = (("intended_to_committed", "intended→committed"),
             ("sent_to_committed", "sent→committed"),
             ("sent_to_accepted", "sent→accepted"))
PERCENTILE_KEYS = ("p50", "p90", "p95", "p99", "p99.9")


def _ms(value: Any) -> str:
    return "-" if not isinstance(value, (int, float)) or value != value else f"{value:,.1f}"


def render_summary(doc: dict[str, Any], where: str | None = None) -> Group:
    counts = doc["counts"]
    head = Table(title="load run", title_justify="left", show_header=False)
    head.add_column("what")
    head.add_column("value", justify="right")
    head.add_row("target TPS", f"{doc['target_tps']:,.0f}")
    head.add_row("committed TPS (after warm-up)", f"{doc['committed_tps']:,.0f}")
    for key in ("planned", "sent", "accepted", "committed", "lost", "failed", "unsent"):
        head.add_row(key, f"{counts[key]:,}")
    head.add_row("rejected", f"{counts['rejected_total']:,}" + (
        " (" + ", ".join(f"{k}: {v:,}" for k, v in sorted(counts["rejected"].items())) + ")"
        if counts["rejected"] else ""))
    head.add_row("accounted (committed+rejected+lost+failed+unsent)",
                 Text(f"{counts['accounted']:,} of {counts['planned']:,}",
                      style="green" if counts["accounted"] == counts["planned"] else "bold red"))
    latency = Table(title="latency, ms (warm-up excluded; intended→committed is the honest one)",
                    title_justify="left")
    latency.add_column("", no_wrap=True)
    for key in (*PERCENTILE_KEYS, "max"):
        latency.add_column(key, justify="right")
    for key, label in LATENCIES:
        row = doc["latency_ms"][key]
        latency.add_row(label, *(_ms(row["percentiles_ms"].get(p)) for p in PERCENTILE_KEYS), _ms(row["max_ms"]))
    lag = doc["schedule_lag_ms"]
    latency.add_row("send lag (sent−due)", *(_ms(lag["percentiles_ms"].get(p)) for p in PERCENTILE_KEYS),
                    _ms(lag["max_ms"]))
    failover = doc.get("failover")
    if failover:
        failures = ", ".join(f"{node}: {n:,}" for node, n in sorted(failover["node_failures"].items()))
        head.add_row("failed over to another node", f"{failover['failovers']:,} batches, "
                     f"{failover['failover_txs']:,} txs" + (f" (no answer from {failures})" if failures else ""))
    parts: list[Any] = [head, latency]
    if doc["generator_fell_behind"]:
        parts.append(Text("WARNING: the generator fell behind its own schedule (p99 send lag above 100 ms): "
                          "the generator, not the chain, limited this run. Lower --tps, raise --batch, or "
                          "raise --max-in-flight.", style="bold red"))
    if doc.get("interrupted"):
        parts.append(Text("The run was interrupted: unsent transactions are counted as such, and the wait for "
                          "commits was cut short, so some of those counted lost may still be committed.",
                          style="yellow"))
    if where:
        parts.append(Text(f"run folder: {where}"))
    return Group(*parts)


def render_sweep(rows: list[dict[str, Any]]) -> Table:
    table = Table(title="sweep: throughput vs latency (intended → committed)", title_justify="left")
    for header in ("target TPS", "committed TPS", "p50 ms", "p99 ms", "lost", "rejected", "saturated"):
        table.add_column(header, justify="right")
    for row in rows:
        table.add_row(f"{row['target_tps']:,.0f}", f"{row['committed_tps']:,.0f}", _ms(row["p50_ms"]),
                      _ms(row["p99_ms"]), f"{row['lost']:,}", f"{row['rejected']:,}",
                      Text("yes", style="red") if row["saturated"] else "no")
    return table
