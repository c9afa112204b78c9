"""The report's stage-cost section: a node's CPU per transaction, stage by stage, per scheme,
against the C verify cost.

Read from each devnet run's `node-stages.json` (qmemo.load.node_stages, written by the
generator: every node's CPU per stage between the run's start and end), beside the
summary.json the run was read from (a sweep's: its chosen stage's). A row pools the nodes
that ran one scheme with one Falcon verifier: each stage's CPU summed over the nodes, over
the transactions they admitted summed likewise (every node admits every transaction: from
a client, or relayed). The C verify cost is the C baseline's single-core verify time for
that scheme and verifier (1e6 / verifications per second; the row says which C row: the
fast verifier's with its key cached, or liboqs's), taken per node, never from a
neighbour: one transaction needs one verify, and the gap between that bar and the node's
is what the node spends besides the signature check.

Pure apart from `load_stage_costs`, which reads the files; it fills in no figure the
files do not hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from qmemo.analysis import plots
from qmemo.analysis.devnet import DevnetRun
from qmemo.analysis.headline import VERIFIER_TIMING
from qmemo.analysis.markdown import Section, cited, image, num, source_note, table, times
from qmemo.analysis.results import Results, display_path
from qmemo.errors import DecodeError, UnknownScheme
from qmemo.load.node_stages import NODE_STAGES_FILE, NodeStageCosts, NodeStagesFile, Survival, read_node_stages, survival
from qmemo.node.stages import OTHER, STAGES

TITLE = "Stage costs per transaction"
COLUMNS = (*STAGES, OTHER)
PLOT = "stage_costs.png"
C_FAST = "fast, key cached"     # the C row names in the table and on the bars
C_LIBOQS = "liboqs"


@dataclass(frozen=True, slots=True)
class StageCostRow:
    """One bar: a scheme's nodes pooled (or one node), µs of CPU per admitted transaction by stage."""

    label: str
    scheme: str
    verifier: str | None
    admitted: int
    us_per_tx: dict[str, float]     # COLUMNS, in order
    c_verify_us: float | None       # the C baseline's single-core verify time for the scheme and verifier
    c_row: str | None = None        # which C row that is: C_FAST or C_LIBOQS (None without one)

    @property
    def total_us(self) -> float:
        return sum(self.us_per_tx.values())


def load_stage_costs(run: DevnetRun) -> tuple[Path, NodeStagesFile | None]:
    """The run's node-stages.json (beside its summary) and its content, None if it has none."""
    path = run.source.parent / NODE_STAGES_FILE
    if not path.is_file():
        return path, None
    return path, read_node_stages(path)


def pooled(label: str, nodes: Sequence[NodeStageCosts], c_verify_us: float | None,
           c_row: str | None = None) -> StageCostRow | None:
    """The nodes' CPU per stage summed, over their admitted transactions summed (None if none
    admitted); `c_verify_us` is the C row `c_row` the nodes are all set against."""
    admitted = sum(node.admitted for node in nodes)
    if admitted <= 0:
        return None
    us = {stage: sum(node.cpu_s.get(stage, 0.0) for node in nodes) / admitted * 1e6 for stage in COLUMNS}
    verifiers = {node.verifier for node in nodes}
    return StageCostRow(label, nodes[0].scheme, verifiers.pop() if len(verifiers) == 1 else "mixed", admitted, us,
                        c_verify_us, c_row)


def c_verify(results: Results, scheme: str, verifier: str | None) -> tuple[float | None, str | None]:
    """(the C single-core verify time a node is set against, which C row it is): the fast
    verifier's (key cached) for a node running it when the baseline measured it, else
    liboqs's; (None, None) when the baseline has neither."""
    fast = results.baseline.fast_verify_ops_per_s(scheme) if verifier == "fast" else None
    if fast:
        return 1e6 / fast, C_FAST
    try:
        return 1e6 / results.baseline.verify_ops_per_s(scheme), C_LIBOQS
    except (UnknownScheme, ZeroDivisionError):
        return None, None


def stage_rows(results: Results, run_id: str, costs: NodeStagesFile) -> tuple[list[StageCostRow], list[StageCostRow]]:
    """(one row per scheme and verifier, its nodes pooled; one row per node) of one run. Each
    node is set against the C row of its own verifier; a scheme whose nodes ran different
    verifiers gets one pooled row per verifier (labelled with it), never one C bar for all."""
    groups: dict[tuple[str, str | None], list[NodeStageCosts]] = {}
    for node in costs.nodes:
        groups.setdefault((node.scheme, node.verifier), []).append(node)
    verifiers_of: dict[str, int] = {}
    for scheme, _ in groups:
        verifiers_of[scheme] = verifiers_of.get(scheme, 0) + 1
    schemes, nodes = [], []
    for (scheme, verifier), members in groups.items():
        c_us, c_row = c_verify(results, scheme, verifier)
        name = f"{scheme} {verifier or '-'}" if verifiers_of[scheme] > 1 else scheme
        if (row := pooled(f"{name} ({run_id})", members, c_us, c_row)) is not None:
            schemes.append(row)
    for node in costs.nodes:
        c_us, c_row = c_verify(results, node.scheme, node.verifier)
        if (row := pooled(f"{node.node} ({run_id})", [node], c_us, c_row)) is not None:
            nodes.append(row)
    return schemes, nodes


def stage_bars(rows: Sequence[StageCostRow]) -> tuple[list[str], dict[str, list[float]]]:
    """(bar labels, µs per stage per bar): one bar per row, then one C verify bar per row
    that has its C cost (all of it in `verify`), for plots.stage_costs and plots.headline."""
    labels = [row.label for row in rows]
    parts = {stage: [row.us_per_tx[stage] for row in rows] for stage in COLUMNS}
    for row in rows:
        if row.c_verify_us is not None:
            labels.append(f"{row.label.rsplit(' (', 1)[0]}: one C verify, {row.c_row} (1 core)")
            for stage in COLUMNS:
                parts[stage].append(row.c_verify_us if stage == "verify" else 0.0)
    return labels, parts


def _table_rows(rows: Sequence[StageCostRow]) -> list[tuple[str, ...]]:
    return [(row.label, row.verifier or "-", num(row.admitted), *(num(row.us_per_tx[s], 1) for s in COLUMNS),
             num(row.total_us, 1), num(row.c_verify_us, 1), row.c_row or "-",
             times(row.total_us / row.c_verify_us if row.c_verify_us else None))
            for row in rows]


def event_loops(costs: NodeStagesFile) -> str:
    """The event loops the run's nodes ran, each with its nodes ("uvloop on every node")."""
    by_loop: dict[str, list[str]] = {}
    for node in costs.nodes:
        by_loop.setdefault(node.event_loop or "not recorded (a file from before it was kept)", []).append(node.node)
    if len(by_loop) == 1:
        return f"{next(iter(by_loop))} on every node"
    return ", ".join(f"{loop} on {', '.join(nodes)}" for loop, nodes in sorted(by_loop.items()))


def verify_share_table(rows: Sequence[tuple[DevnetRun, Survival]]) -> str:
    """Secondary figures on where the verify stage's CPU went, per run (qmemo.load.node_stages:
    the files name the first `survival`, from before the headline's survival against C was
    defined), and a sweep's stages' share as sweep.json holds it, each cited to its row."""
    headers = ("run", "nodes", "cores", "verifier", "verifies/s (all nodes)", "verify µs (nodes' stage)",
               "verifies per core-s", "verify stage's share of machine CPU", "needed verifies' share of machine CPU",
               "verify stage's share of node CPU")
    body = [(run.run_id, str(fig.nodes), str(fig.cores),
             f"{fig.verifier or '-'} ({VERIFIER_TIMING.get(fig.verifier or '', 'unknown')})",
             num(fig.verifies / fig.span_s), num(fig.verify_us, 1), num(fig.verifies_per_core_s),
             num(fig.ratio, 3), num(fig.committed_ratio, 3), num(fig.node_share, 3))
            for run, fig in rows]
    text = [
        "Secondary figures, not the headline (\"The answer\" defines the one survival figure, against C). Here "
        "the nodes' own `verify` stage is the yardstick: the verify stage's share of the machine's CPU (the "
        "signatures all nodes verified per second per core, over the rate one core reaches as that stage "
        "measured it; the file's `survival.ratio`), the same with only the verifies the chain needed (each "
        "committed transaction once on each node; `committed_ratio`), and the verify stage's share of the CPU "
        "the nodes did use (`node_share`). The first two are low below saturation by construction (idle cores; "
        "on a shared machine, other work).",
        table(headers, body, "l" + "r" * (len(headers) - 1))]
    stages = [cited(f"{run.run_id} at {num(point.target_tps)} TPS offered: {num(point.verify_share, 3)}",
                    display_path(run.sweep_source), f"rows[{point.index}].survival_ratio")
              for run, _ in rows if run.sweep_source is not None for point in run.sweep
              if point.verify_share is not None]
    if stages:
        text.append("By sweep stage, the verify stage's share of machine CPU: " + "; ".join(stages) + ".")
    return "\n\n".join(text)


def stage_costs_section(results: Results, plot_dir: Path, runs: Sequence[DevnetRun]) -> Section:
    if not runs:
        return Section(TITLE, "No devnet run folder was given (`qmemo report --devnet RUN_DIR`): the stage costs "
                              "come from the nodes' figures a generator run keeps (`node-stages.json`).")
    scheme_rows: list[StageCostRow] = []
    node_rows: list[StageCostRow] = []
    sources: list[str] = []
    missing: list[str] = []
    survivals: list[tuple[DevnetRun, Survival]] = []
    loops: list[str] = []
    for run in runs:
        path, costs = load_stage_costs(run)
        if costs is None:
            missing.append(display_path(path))
            continue
        loops.append(f"{run.run_id}: {event_loops(costs)}")
        if (figures := survival(costs, run.committed_tps)) is not None:
            survivals.append((run, figures))
        # The offered rate in every label: CPU per transaction depends on it (the note below).
        schemes, nodes = stage_rows(results, f"{run.run_id}, {num(run.target_tps)} TPS", costs)
        scheme_rows += schemes
        node_rows += nodes
        sources.append(display_path(path))
    body: list[str] = []
    if scheme_rows:
        headers = ("scheme or node (run, offered)", "verifier", "admitted", *COLUMNS, "total µs", "C verify µs",
                   "C row", "total / one C verify")
        body += [
            "CPU per admitted transaction (µs) by stage of the node, between the generator run's start and end "
            "(its drain included), with the C baseline's single-core verify time for the scheme and the nodes' "
            f"verifier (the fast verifier's with its key cached, where measured; else liboqs's: column `C row`; "
            f"`{results.summary_source}`). Stages: docs/api.md, \"Stage costs\"; `other` is the process's CPU "
            "the stages do not hold (the event loop, aiohttp, logging, thread hand-offs; also the "
            "accepted-transaction journal in runs from before it was timed as `store`).",
            "**Fixed costs dominate at low load.** Producing a block every 2 s, the event loop's timers and "
            "polls, and the generator's follower cost about the same per second at any rate, so at a low offered "
            "rate they are shared by few transactions and the µs per transaction is high; near saturation the "
            "same work is spread over many. Compare rows at the same offered rate (in each label), and read a "
            "run's marginal cost at its saturation stage (\"The answer\").",
            table(headers, _table_rows(scheme_rows), "ll" + "r" * (len(headers) - 2)),
            source_note(*sources, results.summary_source),
            "By node (the producer of more blocks pays more block building; the others more validation):",
            table(headers, _table_rows(node_rows), "ll" + "r" * (len(headers) - 2)),
            source_note(*sources, results.summary_source),
            # `other` is mostly the event loop's own work, which its implementation changes by ~7%
            # (docs/methodology.md section 12): a comparison across runs must know it.
            "The nodes' event loop (`event_loop` in node-stages.json; `qmemo node --event-loop`): "
            + "; ".join(loops) + ".",
        ]
        bars, parts = stage_bars(scheme_rows)
        plots.stage_costs(plot_dir / PLOT, bars, parts,
                          f"{results.machine_caption()} - " + ", ".join(sources))
        body.append(image(PLOT, "CPU per transaction by stage against the C verify cost"))
    if survivals:
        body += [verify_share_table(survivals), source_note(*sources)]
    elif scheme_rows:
        body.append("No verify-stage shares: these node-stages files predate their fields (`span_s`, `cores`); a "
                    "new `qmemo gen` run writes them.")
    if missing:
        body.append("No stage costs in " + ", ".join(f"`{m}`" for m in missing) + ": that run folder predates "
                    "them (or its nodes did not answer); a new `qmemo gen` run writes them.")
    return Section(TITLE, "\n\n".join(body), (PLOT,) if scheme_rows else ())
