"""The generator's terminal summary: a pure function from the summary (qmemo.load.summary's
dataclasses, the very ones written to summary.json and sweep.json) to rich tables."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from rich.console import Group
from rich.table import Table
from rich.text import Text

from qmemo.load.agreement import SINCE_NODE_START, Agreement
from qmemo.load.summary import Latency, LoadSummary, SweepRow

PERCENTILE_KEYS = ("p50", "p90", "p95", "p99", "p99.9")


def _ms(value: float | None) -> str:
    return "-" if value is None or value != value else f"{value:,.1f}"


def _s(value_ms: float | None) -> str:
    return "-" if value_ms is None or value_ms != value_ms else f"{value_ms / 1000:,.1f}"


def _latency_row(label: str, latency: Latency) -> tuple[str, ...]:
    return (label, *(_ms(latency.percentiles_ms.get(p)) for p in PERCENTILE_KEYS), _ms(latency.max_ms))


def _yes(flag: bool) -> Text | str:
    return Text("yes", style="red") if flag else "no"


def agreement_row(agreement: Agreement) -> tuple[str, Text]:
    """The summary's line on the nodes' agreement: the heights compared, the verdict, the branch switches."""
    heights = f"heights {agreement.from_height:,}-{agreement.to_height:,}" if agreement.heights else "no height"
    if agreement.agree:
        verdict = Text("yes", style="green")
    elif agreement.first_disagreement is not None:
        verdict = Text(f"NO at height {agreement.first_disagreement.height:,}", style="bold red")
    else:
        verdict = Text("NO: " + (f"no answer from {', '.join(agreement.unanswered)}" if agreement.unanswered
                                 else "no node answered"), style="bold red")
    per_node = ", ".join(f"{node}: {n:,}" for node, n in agreement.reorgs.items())
    verdict.append(f"; branch switches: {agreement.reorgs_total:,}" + (f" ({per_node})" if per_node else "")
                   + (" since the nodes started" if agreement.reorgs_since == SINCE_NODE_START else ""))
    return f"nodes agree (final hashes, {heights})", verdict


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
    if counts.committed_late:
        head.add_row("of them committed late", f"{counts.committed_late:,} (final when the nodes were asked at the end, "
                     "after the follower's wait: latency up to then)")
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
    door = summary.door
    if door is not None and (door.refusals or door.waits):
        head.add_row("refused at the door (503 busy)", f"{door.refusals:,} batches ({door.refused_txs:,} txs), each "
                     f"offered again; {door.waits:,} slots ({door.waited_txs:,} txs) unsent while a node asked to "
                     f"wait; {door.requeues:,} batches sent back behind one")
    if summary.generator_cpu_us_per_tx is not None:
        head.add_row("generator_cpu_us_per_tx", f"{summary.generator_cpu_us_per_tx:,.2f} "
                     f"({summary.generator_cpu_s:,.2f} s of the generator's CPU, {counts.sent:,} sent)")
    if summary.agreement is not None:
        head.add_row(*agreement_row(summary.agreement))
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


def render_sweep(rows: Sequence[SweepRow]) -> Group:
    """The sweep's table, stage by stage (past saturation too), and under it the line that
    says where the nodes saturate and what the stages past it did (`past_saturation`). The
    three verdicts share one column (`limited by`), so that the table fits 120 columns."""
    table = Table(title="sweep: throughput vs latency (intended → committed)", title_justify="left")
    for header in ("target TPS", "committed TPS", "p50 s", "p99 s", "lost", "rejected",
                   "refused at the door", "limited by", "nodes agree", "branch switches"):
        # Headers wrap; no column is narrower than its longest word, or than what its cells say
        # ("throughput", "575,000 (57.5%)").
        least = max({"refused at the door": 15, "limited by": len("throughput")}.get(header, 0),
                    *map(len, header.split()))
        table.add_column(header, justify="right", min_width=least, max_width=max(least, len("100,000")))
    for row in rows:
        table.add_row(f"{row.target_tps:,.0f}", f"{row.committed_tps:,.0f}", _s(row.p50_ms), _s(row.p99_ms),
                      f"{row.lost:,}" if not row.lost else Text(f"{row.lost:,}", style="bold red"),
                      f"{row.rejected:,}", door_refused_cell(row.door_refused, row.door_refused_share),
                      _limited_by(row),
                      "-" if row.agree is None else "yes" if row.agree else Text("NO", style="bold red"),
                      "-" if row.reorgs is None else f"{row.reorgs:,}")
    return Group(table, Text(past_saturation(rows)))


def _limited_by(row: SweepRow) -> Text | str:
    verdicts = (("throughput", row.throughput_saturated), ("p99", row.latency_saturated),
                ("generator", row.generator_fell_behind))
    named = ", ".join(name for name, holds in verdicts if holds)
    return Text(named, style="red") if named else "-"


def door_refused_cell(refused: int | None, share: float | None) -> str:
    """'1,234 (4.9%)': transactions refused at the door and never taken, and their share of those planned."""
    if refused is None:
        return "-"
    return f"{refused:,}" + (f" ({share:.1%})" if share is not None else "")


def _span(values: Sequence[float], form: str) -> str:
    low, high = min(values), max(values)
    return format(low, form) if format(low, form) == format(high, form) else f"{low:{form}}-{high:{form}}"


class StageFigures(Protocol):
    """What `past_saturation` reads of a stage: a SweepRow, or the report's SweepPoint."""

    @property
    def target_tps(self) -> float: ...
    @property
    def committed_tps(self) -> float: ...
    @property
    def throughput_saturated(self) -> bool: ...
    @property
    def lost(self) -> int: ...
    @property
    def door_refused_share(self) -> float | None: ...
    @property
    def agree(self) -> bool | None: ...
    @property
    def reorgs(self) -> int | None: ...


def past_saturation(rows: Sequence[StageFigures]) -> str:
    """Where the nodes saturate - the first stage (by offered rate) whose committed TPS fell
    below 90% of its offered rate while the generator kept up (the row's
    `throughput_saturated`, the writer's verdict) - and what the stages past it did."""
    ordered = sorted(rows, key=lambda r: r.target_tps)
    at = next((i for i, r in enumerate(ordered) if r.throughput_saturated), None)
    if at is None:
        top = f" up to {ordered[-1].target_tps:,.0f} TPS offered" if ordered else ""
        return f"the nodes did not saturate{top} (every stage the generator kept up with committed 90% of it)"
    head = (f"the nodes saturate at {ordered[at].target_tps:,.0f} TPS offered "
            f"(committed {ordered[at].committed_tps:,.0f})")
    past = ordered[at + 1:]
    if not past:
        return head + "; no stage past it"
    shares = [r.door_refused_share for r in past if r.door_refused_share is not None]
    reorgs = [r.reorgs for r in past if r.reorgs is not None]
    agree = [r.agree for r in past if r.agree is not None]
    refused = _span([100 * share for share in shares], ".1f") + "%" if shares else "-"

    switches = f"{sum(reorgs):,}" if reorgs else "-"
    agreed = ("yes" if all(agree) else "no") if agree else "not checked"
    return (f"{head}; past it: committed {_span([r.committed_tps for r in past], ',.0f')} TPS, "
            f"refused at the door {refused}, lost {sum(r.lost for r in past):,}, "
            f"branch switches {switches}, final hashes agree: {agreed}")
