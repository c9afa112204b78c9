"""The report's first screen: each devnet run's headline with its sources, and the plot that answers.

The headline itself is defined in qmemo.analysis.headline (saturation, survival against C,
p99 intended -> final, the verifier's timing); this module reads what it needs beside each
run (the headline stage's node-stages.json), lays the figures out with the file and key
each was read from (`markdown.cited`), and draws `headline.png`: p99 against committed TPS
by stage with the headline stage marked, and the CPU a transaction cost there against one
C verify. Without a devnet run it answers what the C baseline alone can: the verify rates.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from qmemo.analysis import plots
from qmemo.analysis.devnet import DevnetRun, limited
from qmemo.analysis.headline import (
    GENERATOR_BOUND, LIMITED, SATURATED, Cited, Headline, c_reference, headline,
)
from qmemo.analysis.markdown import Section, cited, image, num, table
from qmemo.analysis.report_shards_headline import ShardedHeadline, sharded_block
from qmemo.analysis.report_stages import StageCostRow, load_stage_costs, stage_bars, stage_rows
from qmemo.analysis.results import FALCON, Results, display_path

TITLE = "The answer"
PLOT = "headline.png"
SWEEP_HINT = "`./devnet.sh --sweep 2000:1.25:12000 --stage 20 --block-txs 30000`"
DEFINITION = "docs/methodology.md, \"The headline\""
# load_results' fallbacks, in the words a fresh clone's reader needs: where it looked, and
# the command that measures one (qmemo.bench.node_references.C_BASELINE_MISSING names it alike).
NO_C_BASELINE = "no C baseline (no `results/latest/summary.json`, nor a run of this machine's in `results/`)"
MAKE_C_BASELINE = "`.venv/bin/qmemo bench c` measures one (`--quick`: a shorter run), then run this report again"


@dataclass(frozen=True, slots=True)
class RunHeadline:
    run: DevnetRun
    headline: Headline
    costs: tuple[StageCostRow, ...]     # the headline stage's CPU per transaction, nodes pooled per scheme


def load_headlines(results: Results, runs: Sequence[DevnetRun]) -> list[RunHeadline]:
    """Each run's headline, with its verifier and stage costs from the node-stages.json
    beside the run's summary (the headline stage's, for a sweep)."""
    out = []
    for run in runs:
        path, costs = load_stage_costs(run)
        line = headline(run, costs, path if costs else None, results.baseline)
        rows = tuple(stage_rows(results, f"{run.run_id}, {num(run.target_tps)} TPS", costs)[0]) if costs else ()
        out.append(RunHeadline(run, line, rows))
    return out


def _cite(shown: str, figure: Cited) -> str:
    return cited(shown, display_path(figure.source), figure.pointer)


def _figure(figure: Cited, digits: int = 0) -> str:
    return num(float(figure.value), digits)


def _source(figure: Cited) -> str:
    """The table's "read from" cell: the file and the key in it."""
    return f"`{display_path(figure.source)}` `{figure.pointer}`"


def summary_line(line: Headline) -> str:
    """The bold sentence a run's headline opens with."""
    survival = line.survival
    surviving = "" if survival is None else (
        f"; survival against C {'at least ' if not line.is_capacity else ''}{survival:.3f} ({line.timing})")
    return f"**Run `{line.run_id}`: {line.saturation_text()}{surviving}.**"


def _saturation_rows(line: Headline) -> list[tuple[str, str, str]]:
    committed, offered, limit = line.committed_tps, line.offered_tps, line.limit
    if line.outcome == SATURATED:
        rows = [("**committed TPS at saturation** (the highest stage no verdict limited)",
                 f"**{_figure(committed)}**", _source(committed)),
                ("offered TPS at that stage", _figure(offered), _source(offered))]
    elif line.outcome == LIMITED:
        rows = [("committed TPS, **limited at the first rate tried**: saturation lies at or below it",
                 f"**{_figure(committed)}**", _source(committed)),
                ("offered TPS", _figure(offered), _source(offered))]
    else:
        rows = [("committed TPS, **saturation not reached**: a lower bound, no verdict drawn from it",
                 f"**{_figure(committed)}**", _source(committed)),
                ("offered TPS", _figure(offered), _source(offered))]
    if limit is not None and limit.offered_tps != offered:
        rows += [("the next stage: offered TPS", _figure(limit.offered_tps), _source(limit.offered_tps)),
                 ("the next stage: committed TPS", _figure(limit.committed_tps), _source(limit.committed_tps))]
    if limit is not None:
        rows.append(("the next stage: limited by" if limit.offered_tps != offered else "limited by",
                     str(limit.why.value), _source(limit.why)))
    return rows


def run_table(line: Headline) -> str:
    rows = _saturation_rows(line)
    reference = line.reference
    if reference is not None and line.survival is not None:
        bound = "" if line.is_capacity else " (at least: saturation not reached)"
        rows += [(f"**survival against C**{bound} = committed TPS / C single-core verify/s",
                  f"**{line.survival:.3f}**", f"computed: {_figure(line.committed_tps)} / "
                                              f"{_figure(reference.verify_per_s)}"),
                 (f"C single-core verify/s: {reference.row} ({reference.timing})",
                  _figure(reference.verify_per_s), _source(reference.verify_per_s))]
    else:
        rows.append(("survival against C", "-", line.survival_text().split(": ", 1)[1]))
    if line.p99_final_ms is not None:
        rows.append(("**p99 intended → final** (s), at that stage",
                     f"**{num(float(line.p99_final_ms.value) / 1e3, 2)}**", _source(line.p99_final_ms)))
    verifier = line.verifier
    rows.append(("the nodes' verifier", f"{verifier.value} ({line.timing})" if verifier else "not recorded",
                 _source(verifier) if verifier else "no node-stages.json, or nodes on different verifiers"))
    return table(("figure", "value", "read from"), rows, "lrl")


def run_block(line: Headline) -> str:
    return "\n\n".join([summary_line(line), run_table(line)])


def c_only_block(results: Results, sharded_only: bool = False) -> str:
    """No (unsharded) devnet run: what the C baseline answers, and the commands that add the rest."""
    if sharded_only:
        opening = ("**No unsharded devnet run was given: no single-chain saturation or survival against C "
                   "here.**")
    else:
        opening = "**No devnet run was given: this report holds the C baseline only.**"
    lines = [f"{opening} The end-to-end answer (where the chain saturates, how much of C survives) needs a "
             f"devnet sweep: {SWEEP_HINT}, then `.venv/bin/qmemo report --devnet runs/<its folder>`.", ""]
    for verifier in ("liboqs", "fast"):
        reference = c_reference(results.baseline, FALCON, verifier)
        if reference is not None:
            lines.append(f"- {FALCON} verify on one core, {reference.row} ({reference.timing}): "
                         f"**{_cite(_figure(reference.verify_per_s) + '**', reference.verify_per_s)} per second.")
    return "\n".join(lines)


def _curves(entries: Sequence[RunHeadline]) -> dict[str, list[tuple[float, float | None, str]]]:
    curves: dict[str, list[tuple[float, float | None, str]]] = {}
    for entry in entries:
        run, line = entry.run, entry.headline
        if run.sweep:
            headline_key = line.committed_tps.key
            points = [(p.committed_tps, p.p99_ms,
                       plots.LIMITED if limited(p) else
                       plots.HEADLINE if ("rows", p.index, "committed_tps") == headline_key else plots.HELD)
                      for p in run.sweep]
        else:
            kind = plots.LIMITED if line.outcome in (LIMITED, GENERATOR_BOUND) else plots.HEADLINE
            points = [(run.committed_tps, run.latency_ms.get("intended_to_committed", {}).get("p99"), kind)]
        curves[run.run_id] = points
    return curves


def no_c_block() -> str:
    """No C baseline: what the report leaves out, and the command that fills it in."""
    return (f"**This report has {NO_C_BASELINE}:** {MAKE_C_BASELINE}. Left out until then: the C suite's "
            "sections, the headroom of a C core against MEMO's scenarios, and every node's stage costs against a "
            "C verify; the figures above are the nodes' own.")


def headline_section(results: Results | None, plot_dir: Path, entries: Sequence[RunHeadline],
                     sharded: Sequence[ShardedHeadline] = ()) -> Section:
    """`sharded`: the sharded runs given, each answered first by its per-shard verify load
    against the research's model (a sharded devnet's committed TPS is every shard's together,
    not one node's: no single-chain headline for it). `results` None: no C baseline, and
    `entries` empty (an unsharded run's answer is set against C)."""
    blocks_sharded = [sharded_block(line) for line in sharded]
    details = ("cross-shard transfers and invariants, and the C core's headroom against MEMO's scenarios, are in "
               "\"Shards end to end\"; every node's stage costs in \"Stage costs per transaction\"."
               if results is not None else
               "cross-shard transfers and invariants, and its load against MEMO's scenarios, are in \"Shards end "
               "to end\".")
    aside = (f"Sharded devnet run(s) {', '.join(f'`{line.run.run_id}`' for line in sharded)}: each shard's load, "
             + details) if sharded else ""
    if not entries:
        c_block = c_only_block(results, bool(sharded)) if results is not None else no_c_block()
        return Section(TITLE, "\n\n".join(part for part in (*blocks_sharded, aside, c_block) if part))
    blocks = [run_block(entry.headline) for entry in entries]
    labels, parts = stage_bars([row for entry in entries for row in entry.costs])
    sources = [display_path(entry.headline.committed_tps.source) for entry in entries]
    plots.headline(plot_dir / PLOT, _curves(entries), labels, parts,
                   f"{results.machine_caption()} - " + ", ".join(dict.fromkeys(sources)))
    note = ("How each figure is defined: " + DEFINITION + ". A verify speed is compared only with the same "
            "verifier's: liboqs hashes to the lattice point in constant time, the fast verifier in variable time "
            "(a transaction is public), which costs less (\"Falcon verify implementations\"). Every stage of the "
            "sweep, the latency percentiles and the stage costs follow in \"Devnet end to end\" and \"Stage costs "
            "per transaction\". " + f"Not saturated? A sweep finds it: {SWEEP_HINT}.")
    return Section(TITLE, "\n\n".join([*blocks, image(PLOT, "p99 against committed TPS with the headline stage "
                                                            "marked; CPU per transaction against one C verify"),
                                       note, *blocks_sharded, *([aside] if aside else [])]), (PLOT,))

