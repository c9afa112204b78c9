"""The dashboard's first panel: the headline figure, live - end-to-end committed TPS against C.

The same survival figure the report leads with (qmemo.analysis.headline.survival_against_c:
committed TPS over the C single-core verify rate of the verifier the nodes run), taken
live: the chain's committed rate over the last `WINDOW_S` seconds of polls, against the
baseline's rate for the verifier every node reports (the fast verifier's with its key
cached, or liboqs's). It is the answer at the load being offered now, not a saturation
figure: the report's headline is read at the sweep's saturation stage.

Pure like view.py: from a `Snapshot` (and the rows view.py derived) to a rich table; no
I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

from qmemo.analysis.headline import VERIFIER_TIMING, survival_against_c
from qmemo.api_schema import MetricsSnapshot

if TYPE_CHECKING:
    from qmemo.monitor.view import NodeRow, Snapshot

# Blocks come every 2 s and the dashboard polls every 2 s: a rate between two polls jumps
# between 0 and twice the real one. Ten seconds of polls spans five blocks.
WINDOW_S = 10.0


def _committed(metrics: MetricsSnapshot | None) -> float | None:
    return float(metrics.tx.committed) if metrics is not None else None


def window_start(snapshot: Snapshot, window_s: float = WINDOW_S) -> Snapshot | None:
    """The oldest snapshot the poller kept within `window_s` of this one (None: no history)."""
    oldest, earlier = None, snapshot.previous
    while earlier is not None and snapshot.time_s - earlier.time_s <= window_s + 1e-6:
        oldest, earlier = earlier, earlier.previous
    return oldest


def chain_committed_tps(snapshot: Snapshot, window_s: float = WINDOW_S) -> tuple[float | None, float]:
    """(the chain's committed TPS over the window, the window's length in s). Every node
    commits the same blocks, so the chain's rate is the best-informed node's; a node whose
    count went back (a restart) is left out."""
    start = window_start(snapshot, window_s)
    if start is None:
        return None, 0.0
    before = {poll.url: poll for poll in start.polls}
    rates = []
    for poll in snapshot.polls:
        earlier = before.get(poll.url)
        a, b = _committed(earlier.metrics) if earlier else None, _committed(poll.metrics)
        if earlier is not None and a is not None and b is not None and b >= a and poll.time_s > earlier.time_s:
            rates.append((b - a) / (poll.time_s - earlier.time_s))
    return (max(rates) if rates else None), snapshot.time_s - start.time_s


def verifier_in_use(rows: Sequence[NodeRow]) -> str | None:
    """The Falcon verifier every node that answers reports; None when they differ or say nothing."""
    verifiers = {row.verifier for row in rows if row.up}
    return verifiers.pop() if len(verifiers) == 1 and None not in verifiers else None


def headline_table(snapshot: Snapshot, rows: Sequence[NodeRow]) -> Table:
    base = snapshot.baseline
    committed, span = chain_committed_tps(snapshot)
    verifier = verifier_in_use(rows)
    if verifier == "fast" and base.fast_applies:
        against, rate = "C fast verifier, key cached", base.fast_verify_per_s
    else:
        against, rate = f"C {base.library}", base.verify_per_s
    timing = VERIFIER_TIMING.get(verifier or "", "")
    # No one verifier, no survival figure: another verifier's C rate never stands in for it.
    survival = survival_against_c(committed, rate) if committed is not None and rate and verifier else None
    table = Table(title="end to end, live: committed TPS against C for the verifier in use "
                        "(the report's headline; docs/methodology.md)", title_justify="left", expand=True)
    for header in ("committed TPS", "survival against C", "set against (1 core)", "target TPS",
                   "p99 intended→final"):
        table.add_column(header, justify="left" if header == "set against (1 core)" else "right", no_wrap=True)
    if verifier is None and any(row.up for row in rows):
        reference = Text("nodes on different verifiers (or not saying): no one C rate", style="yellow")
    elif not rate:
        reference = Text(f"{against}: not in this baseline", style="yellow")
    else:
        reference = Text(f"{against} {rate:,.0f}/s" + (f", {timing}" if timing else ""))
    gen = snapshot.generator or {}
    p99 = gen.get("p99_ms")
    table.add_row(
        Text(f"{committed:,.0f}" if committed is not None else "-", style="bold")
        + Text(f" (last {span:.0f} s)" if committed is not None else "", style="dim"),
        Text(f"{survival:.3f}" if survival is not None else "-", style="bold green" if survival else ""),
        reference,
        f"{snapshot.target_tps:,.0f}" if snapshot.target_tps else "-",
        f"{p99 / 1e3:,.2f} s" if isinstance(p99, (int, float)) else "-")
    return table
