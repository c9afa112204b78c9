"""The terminal summary of a sharded run: cross-shard transfers, each shard, the invariants.

A pure function from summary.json's records (qmemo.load.shard_summary) to rich tables,
shown under the run's usual summary (qmemo.load.summary_view)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Group
from rich.table import Table
from rich.text import Text

from qmemo.load.summary import LoadSummary, SweepRow


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _ok(flag: bool) -> Text:
    return Text("yes", style="green") if flag else Text("NO", style="bold red")


def render_sharded(summary: LoadSummary) -> Group:
    parts: list[Table] = []
    cross = summary.cross_shard
    if cross is not None:
        table = Table(title="cross-shard transfers", title_justify="left", show_header=False)
        table.add_column("what")
        table.add_column("value", justify="right")
        table.add_row("planned", f"{cross.planned:,}")
        table.add_row("debited (final on the source)", f"{cross.committed:,}")
        table.add_row("credited (final on the destination)", f"{cross.credited:,}")
        table.add_row("lost (debited, not credited)", Text(f"{cross.lost:,}", style="bold red" if cross.lost else ""))
        table.add_row("intended→credited p50 / p99 / max, ms",
                      f"{_ms(cross.p50_ms_intended_to_credited)} / {_ms(cross.p99_ms_intended_to_credited)} / "
                      f"{_ms(cross.max_ms_intended_to_credited)}")
        table.add_row("debited→credited p99, ms", _ms(cross.p99_ms_committed_to_credited))
        parts.append(table)
    if summary.shards:
        table = Table(title="shards", title_justify="left")
        for name in ("shard", "chain", "nodes", "planned", "committed", "TPS", "to others", "credited in",
                     "intra p99 ms", "verifies/tx", "model 1+share"):
            table.add_column(name, justify="right")
        for shard in summary.shards:
            table.add_row(str(shard.shard), str(shard.chain_id), str(len(shard.nodes)), f"{shard.planned:,}",
                          f"{shard.committed:,}", f"{shard.committed_tps:,.0f}", f"{shard.cross_planned:,}",
                          f"{shard.credited_in:,}", _ms(shard.p99_ms_intra),
                          "-" if shard.verifies_per_committed_tx is None else f"{shard.verifies_per_committed_tx:.2f}",
                          f"{shard.modelled_verifies_per_tx:.2f}")
        parts.append(table)
    checks = summary.invariants
    if checks is not None:
        table = Table(title="invariants (every shard's final state)", title_justify="left", show_header=False)
        table.add_column("what")
        table.add_column("value", justify="right")
        table.add_row("supply conserved", _ok(checks.supply_conserved))
        table.add_row("credited exactly once", _ok(checks.credited_exactly_once))
        table.add_row("supply before / after / in flight",
                      f"{checks.supply_before:,} / {checks.supply_after:,} / {checks.in_flight:,}")
        table.add_row("debited, not credited / accounts off", f"{checks.not_credited:,} / {checks.accounts_off:,}")
        if checks.settled is not None:
            table.add_row("every shard quiet when its state was read", _ok(checks.settled))
        if checks.settled is False:
            table.caption = ("a shard was still moving when its state was read (past saturation): these "
                             "invariants are not shown to hold, and the run exits 4")
        parts.append(table)
    return Group(*parts)


def render_shard_sweep(rows: Sequence[SweepRow]) -> Table:
    table = Table(title="sharded sweep", title_justify="left")
    for name in ("target TPS", "committed TPS", "intra p99 ms", "cross p99 ms", "lost", "invariants", "limited by"):
        table.add_column(name, justify="right")
    for row in rows:
        table.add_row(f"{row.target_tps:,.0f}", f"{row.committed_tps:,.0f}", _ms(row.intra_p99_ms),
                      _ms(row.cross_p99_ms), f"{row.lost:,}",
                      _ok(bool(row.invariants_hold)), row.why or "-")
    return table
