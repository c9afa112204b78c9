"""The dashboard's stage-cost panel: where each node's CPU per transaction goes, by stage.

One row per node: its verify rate, its CPU per admitted transaction over the node's recent
window (`/metrics` `stages`, docs/api.md "Stage costs") and a bar of that cost split by
stage; one row per C verify cost of the baseline (liboqs's, and the fast verifier's when
measured; one verify per transaction) on the same scale, so a glance says how far a transaction's whole cost is from the signature check
alone. Bars are scaled together: the longest row's cost fills the width.

Pure like view.py: from a `Snapshot` (and the rows view.py derived) to a rich table; no
I/O, no clock. A node that has admitted nothing in its window shows "-".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

from qmemo.api_schema import MetricsSnapshot
from qmemo.node.stages import OTHER, STAGES

if TYPE_CHECKING:
    from qmemo.monitor.view import NodeRow, Snapshot

BAR_WIDTH = 40
# One letter per stage (readable without colour) on a background of its own.
GLYPHS = {"http": ("H", "black on bright_blue"), "decode_hash": ("D", "black on cyan"),
          "verify": ("V", "black on green"), "mempool": ("M", "black on yellow"),
          "block_build": ("B", "black on magenta"), "block_validate": ("A", "black on bright_magenta"),
          "store": ("S", "black on bright_red"), "relay": ("R", "black on white"), OTHER: ("·", "dim")}
LABELS = {"decode_hash": "decode+hash", "block_build": "block build", "block_validate": "block validate"}


def per_tx_costs(metrics: MetricsSnapshot | None) -> dict[str, float] | None:
    """µs per admitted transaction by stage ("other" last), or None when the node has none."""
    if metrics is None:
        return None
    by_stage = metrics.stages.by_stage
    costs = {name: max(0.0, figure.us_per_tx) for name in (*STAGES, OTHER)
             if (figure := by_stage.get(name)) is not None and figure.us_per_tx is not None}
    return costs if costs and sum(costs.values()) > 0 else None


def cells(parts: Sequence[float], width: int) -> list[int]:
    """`width` cells split in proportion to `parts` (largest remainders), summing to `width`."""
    total = sum(parts)
    if total <= 0 or width <= 0:
        return [0] * len(parts)
    exact = [part / total * width for part in parts]
    counts = [int(value) for value in exact]
    by_remainder = sorted(range(len(parts)), key=lambda i: exact[i] - counts[i], reverse=True)
    for i in by_remainder[:width - sum(counts)]:
        counts[i] += 1
    return counts


def stage_bar(costs: dict[str, float], width: int) -> Text:
    """A bar `width` cells long, one run of its letter per stage in proportion to its cost."""
    names = list(costs)
    bar = Text()
    for name, count in zip(names, cells([costs[name] for name in names], width)):
        glyph, style = GLYPHS[name]
        bar.append(glyph * count, style=style)
    return bar


def stages_table(snapshot: Snapshot, rows: Sequence[NodeRow]) -> Table:
    """Per node: verify/s, µs of CPU per admitted transaction, and its split by stage."""
    base = snapshot.baseline
    table = Table(title="stage costs: CPU per admitted transaction, recent window (bar: same scale per row)",
                  title_justify="left", expand=True, caption=_legend(), caption_justify="left")
    for header in ("node", "verify/s", "µs/tx", "verify share", "by stage"):
        table.add_column(header, justify="left" if header in ("node", "by stage") else "right", no_wrap=True)
    lines: list[tuple[str, str, dict[str, float] | None]] = []
    # The C rows of the baseline table: liboqs's verify, and the same run's fast verifier (what a
    # node running it is set against) when the baseline has it.
    for label, rate in (("C verify (1 core)", base.verify_per_s),
                        ("C fast verify (1 core)", base.fast_verify_per_s)):
        if rate:
            lines.append((label, f"{rate:,.0f}", {"verify": 1e6 / rate}))
    for poll, row in zip(snapshot.polls, rows):
        rate = f"{row.verify_per_s:,.0f}" if row.up and row.verify_per_s is not None else "-"
        lines.append((row.name, rate, per_tx_costs(poll.metrics) if row.up else None))
    longest = max((sum(costs.values()) for _, _, costs in lines if costs), default=0.0)
    for name, rate, costs in lines:
        if not costs:
            table.add_row(name, rate, "-", "-", "")
            continue
        total = sum(costs.values())
        width = max(1, round(BAR_WIDTH * total / longest))
        table.add_row(name, rate, f"{total:,.1f}", f"{costs.get('verify', 0.0) / total * 100:.0f}%",
                      stage_bar(costs, width))
    return table


def _legend() -> Text:
    legend = Text()
    for name in (*STAGES, OTHER):
        glyph, style = GLYPHS[name]
        legend.append(f" {glyph} ", style=style)
        legend.append(f" {LABELS.get(name, name)}  ")
    return legend
