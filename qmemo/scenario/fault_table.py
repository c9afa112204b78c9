"""Each fault of a finished run, with the transactions intended around it: `qmemo scenario show --faults RUN`.

A chaos run holds a dozen faults; its invariants say whether anything broke, not what
each fault cost. This reads the run folder (`timeline.jsonl`, `gen/transactions.csv`)
and gives, per fault, when it began and was undone, what it did to which nodes, and the
generator's transactions intended from its start until `after_s` past its end: how many,
how many final, and their intended -> committed p50 and p99 (the wait a client saw). Pure
but for reading the two files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qmemo.scenario.invariants import read_jsonl, read_transactions

AFTER_S = 10.0          # after a fault is undone, its victims restart and catch up: still its cost
# timeline.jsonl's names: a fault's start, and what undoes it.
ENDS = {"kill -9": "restart", "clean stop": "restart", "SIGSTOP": "SIGCONT", "partition": "heal",
        "link down": "link up"}


@dataclass(frozen=True, slots=True)
class FaultRow:
    start_s: float
    end_s: float | None
    what: str
    nodes: str
    intended: int
    committed: int
    p50_ms: float | None
    p99_ms: float | None


def _nodes(line: dict[str, Any]) -> str:
    if "groups" in line:
        return " / ".join(",".join(map(str, group)) for group in line["groups"])
    nodes = line.get("nodes", [line["node"]] if "node" in line else [])
    return ",".join(map(str, nodes))


def _percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p / 100))]


def fault_rows(run_dir: Path, after_s: float = AFTER_S) -> list[FaultRow]:
    timeline = [line for line in read_jsonl(Path(run_dir) / "timeline.jsonl") if line.get("t_s") is not None]
    transactions = read_transactions(Path(run_dir) / "gen" / "transactions.csv")
    rows: list[FaultRow] = []
    for index, line in enumerate(timeline):
        what = line["what"]
        if what not in ENDS:
            continue
        nodes = _nodes(line)
        end = next((later["t_s"] for later in timeline[index + 1:]
                    if later["what"] == ENDS[what] and _nodes(later) == nodes), None)
        until = (end if end is not None else line["t_s"]) + after_s
        window = [tx for tx in transactions if line["t_s"] <= tx.intended_s < until]
        latencies = [(tx.committed_s - tx.intended_s) * 1e3 for tx in window if tx.committed_s is not None]
        rows.append(FaultRow(line["t_s"], end, what, nodes, len(window), len(latencies),
                             _percentile(latencies, 50), _percentile(latencies, 99)))
    return rows


def render(rows: list[FaultRow], after_s: float = AFTER_S) -> str:
    """The rows as a markdown table."""
    def ms(value: float | None) -> str:
        return "-" if value is None or math.isnan(value) else f"{value:,.0f}"

    lines = [f"| at s | undone at s | fault | nodes | intended from its start to {after_s:g} s after | final | "
             f"p50 ms | p99 ms |", "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        end = "-" if row.end_s is None else f"{row.end_s:.1f}"
        lines.append(f"| {row.start_s:.1f} | {end} | {row.what} | {row.nodes} | {row.intended:,} | "
                     f"{row.committed:,} | {ms(row.p50_ms)} | {ms(row.p99_ms)} |")
    return "\n".join(lines)
