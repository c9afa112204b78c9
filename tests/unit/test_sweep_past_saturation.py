"""A sweep past saturation: `run_sweep` runs every stage up to its last rate (stopping only
on an interrupt or a stage that raised), each row says what the door refused, what was
lost and whether the nodes agreed, the printed table says where the nodes saturate and
what the stages past it did, and every reader of sweep.json still finds the saturation
stage (the stage below the first limited one) when stages past it exist - a stage past
it that nothing limited included.

The run itself is a stand-in (`run_load` monkeypatched in qmemo.load.run); the readers
read a copy of the recorded sweep tests/fixtures/devnet-sweep (150 and 300 TPS held, 600
limited by latency) with two stages appended past it: 1,200 TPS that nothing limited
and 2,400 TPS the door pushed back at.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from qmemo.analysis import report_memo
from qmemo.analysis.devnet import held_and_limit, load_devnet_run, sweep_points
from qmemo.analysis.headline import SATURATED
from qmemo.analysis.readme_results import results_block, run_context
from qmemo.analysis.report_headline import _curves, load_headlines
from qmemo.analysis.results import load_results
from qmemo.analysis import plots
from qmemo.devnet.soak import saturation_tps as soak_saturation_tps
from qmemo.load import run as run_module
from qmemo.load.agreement import Agreement
from qmemo.load.latency import LatencySummary, RunCounts, RunSummary
from qmemo.load.run import GenConfig, RunResult, run_sweep
from qmemo.load.answers import BUSY_BACKLOG
from qmemo.load.summary import SWEEP_SCHEMA, Sweep, load_summary, read_summary, read_sweep, sweep_row, write
from qmemo.load.summary_view import past_saturation, render_sweep
from qmemo.records import from_json, to_json
from qmemo.scenario.faults import saturation_tps as faults_saturation_tps

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
BLOCK_S = 2.0


# --- the stop rule, with a stand-in run ----------------------------------------------------------

def _latency(p99_ms: float) -> LatencySummary:
    return LatencySummary(10, {"p50": p99_ms / 2, "p90": p99_ms, "p95": p99_ms, "p99": p99_ms, "p99.9": p99_ms},
                          p99_ms, p99_ms / 2)


def _result(out: Path, target: float, committed: float, *, refused: int = 0, interrupted: bool = False,
            reorgs: int = 0) -> RunResult:
    planned = 1000
    counts = RunCounts(planned=planned, sent=planned, accepted=planned - refused, duplicate=0,
                       committed=planned - refused, rejected={BUSY_BACKLOG: refused} if refused else {}, lost=0,
                       failed=0, unsent=0)
    run = RunSummary(counts, _latency(3000.0), _latency(2900.0), _latency(20.0), _latency(1.0), warmup_s=2.0,
                     measured_s=10.0, committed_tps=committed, generator_fell_behind=False)
    summary = load_summary(run, target_tps=target, interrupted=interrupted, block_interval_s=BLOCK_S)
    agreement = Agreement(("http://a",), 1, 10, True, None, {"http://a": reorgs}, reorgs, "run start", ())
    return RunResult(run, target, out, interrupted, replace(summary, agreement=agreement))


@pytest.fixture
def fake_runs(monkeypatch, tmp_path):
    """Stages commit what `committed` says (all of the offered rate by default); the
    configs run_load was called with are kept in `calls`."""
    calls: list[GenConfig] = []
    committed: dict[float, float] = {}
    interrupt_at: set[float] = set()
    raise_at: set[float] = set()

    def fake_run_load(config, *, quiet=False, genesis=None, on_status=None):
        calls.append(config)
        if config.tps in raise_at:
            raise OSError("the nodes went away")
        offered = committed.get(config.tps, config.tps)
        return _result(config.out, config.tps, offered, refused=round(1000 * (1 - offered / config.tps)),
                       interrupted=config.tps in interrupt_at)

    monkeypatch.setattr(run_module, "run_load", fake_run_load)
    monkeypatch.setattr(run_module, "load_genesis", lambda path: None)
    config = GenConfig(genesis=tmp_path / "genesis.json", accounts=tmp_path / "accounts", nodes=["http://a"],
                       out=tmp_path / "sweep")
    return config, calls, committed, interrupt_at, raise_at


RATES = [1000.0, 2000.0, 4000.0, 8000.0]


def test_a_sweep_runs_every_stage_past_its_first_limited_one(fake_runs):
    config, calls, committed, _, _ = fake_runs
    committed.update({4000.0: 3000.0, 8000.0: 3400.0})          # 75% and 42.5%: throughput saturated
    rows = run_sweep(config, RATES, 10.0, quiet=True)
    assert [c.tps for c in calls] == RATES and [r.target_tps for r in rows] == RATES
    assert [r.throughput_saturated for r in rows] == [False, False, True, True]
    assert read_sweep(config.out / "sweep.json").rows == tuple(rows)
    held, limit = held_and_limit(sweep_points(read_sweep(config.out / "sweep.json")))
    assert (held.target_tps, limit.target_tps) == (2000.0, 4000.0)
    assert past_saturation(rows).startswith("the nodes saturate at 4,000 TPS offered (committed 3,000); "
                                            "past it: committed 3,400 TPS, refused at the door 57.5%")


def test_an_interrupt_stops_the_sweep_after_its_stage(fake_runs):
    config, calls, _, interrupt_at, _ = fake_runs
    interrupt_at.add(2000.0)
    rows = run_sweep(config, RATES, 10.0, quiet=True)
    assert [c.tps for c in calls] == [1000.0, 2000.0] and len(read_sweep(config.out / "sweep.json").rows) == 2


def test_a_stage_that_raised_stops_the_sweep_and_the_rows_before_it_are_written(fake_runs):
    config, calls, _, _, raise_at = fake_runs
    raise_at.add(4000.0)
    with pytest.raises(OSError, match="went away"):
        run_sweep(config, RATES, 10.0, quiet=True)
    assert [c.tps for c in calls] == [1000.0, 2000.0, 4000.0]
    assert [r.target_tps for r in read_sweep(config.out / "sweep.json").rows] == [1000.0, 2000.0]


def test_each_stage_compares_the_heights_after_the_stage_before(fake_runs):
    config, calls, _, _, _ = fake_runs
    run_sweep(config, RATES[:3], 10.0, quiet=True)
    assert [c.agreement_from for c in calls] == [1, 11, 11]      # the stand-in's check always ends at 10


def test_a_sweep_with_a_generator_fleet_runs_each_stage_as_one_fleet_run(fake_runs, monkeypatch):
    """`qmemo gen --sweep --generators N`: every stage is a fleet run whose parts plan that
    stage's rate and length (their part options say so), none in this process."""
    from qmemo.cli import build_parser
    from qmemo.commands.gen import gen_config
    from qmemo.load import fleet

    config, calls, _, _, _ = fake_runs
    fleets: list[tuple[float, int, list[str]]] = []

    def fake_fleet(stage, generators, part_args, *, quiet=False, on_status=None):
        fleets.append((stage.tps, generators, part_args))
        return _result(stage.out, stage.tps, stage.tps)

    monkeypatch.setattr(fleet, "run_fleet", fake_fleet)
    args = build_parser().parse_args(["gen", "--generators", "2", "--sweep", "1000:2:4000", "--stage", "5",
                                      "--nodes", "http://a", "--out", str(config.out), "--quiet"])
    assert args.run(args) == 0
    assert calls == [] and [(tps, n) for tps, n, _ in fleets] == [(1000.0, 2), (2000.0, 2), (4000.0, 2)]
    for tps, _, argv in fleets:
        part = gen_config(build_parser().parse_args(["gen", *argv, "--out", "o"]))
        assert (part.tps, part.duration_s, part.schedule) == (tps, 5.0, None)
    assert [r.target_tps for r in read_sweep(config.out / "sweep.json").rows] == [1000.0, 2000.0, 4000.0]


# --- the row's new figures, from a summary document ------------------------------------------------

def test_the_row_takes_door_refusals_lost_agreement_and_p99_from_the_stages_summary(tmp_path):
    document = json.loads((FIXTURES / "devnet-sweep" / "stage-600tps" / "summary.json").read_text())
    document["counts"].update(rejected={BUSY_BACKLOG: 1200, "bad_nonce": 3}, rejected_total=1203, lost=2,
                              accepted=3597, committed=3595, accounted=4800)
    document["agreement"] = {"nodes": ["http://a", "http://b"], "from_height": 4, "to_height": 40, "agree": True,
                             "first_disagreement": None, "reorgs": {"http://a": 2, "http://b": 1},
                             "reorgs_total": 3, "reorgs_since": "run start", "unanswered": []}
    (tmp_path / "summary.json").write_text(json.dumps(document))
    row = sweep_row(read_summary(tmp_path / "summary.json"), tmp_path)
    assert (row.planned, row.door_refused, row.rejected, row.lost) == (4800, 1200, 1203, 2)
    assert row.door_refused_share == pytest.approx(0.25)
    assert (row.agree, row.reorgs) == (True, 3)
    assert row.p99_ms == document["latency_ms"]["intended_to_committed"]["percentiles_ms"]["p99"]
    assert from_json(type(row), to_json(row)) == row
    # A summary with no door refusal has 0 refused; a sweep row written before the field reads as None.
    assert sweep_row(replace(read_summary(tmp_path / "summary.json"),
                             counts=replace(read_summary(tmp_path / "summary.json").counts, rejected={})),
                     tmp_path).door_refused == 0
    old = read_sweep(FIXTURES / "devnet-sweep" / "sweep.json").rows[0]
    assert (old.door_refused, old.planned, old.door_refused_share) == (None, None, None)


# --- the printed table ---------------------------------------------------------------------------------

def _text(renderable) -> str:
    console = Console(width=240, record=True)
    console.print(renderable)
    return console.export_text()


def _rows(tmp_path, *stages: tuple[float, float, int, int, bool]):
    """(target, committed, refused, reorgs, agree) -> sweep rows, each from a stand-in summary."""
    out = []
    for target, committed, refused, reorgs, agree in stages:
        result = _result(tmp_path, target, committed, refused=refused, reorgs=reorgs)
        agreement = replace(result.file_summary.agreement, agree=agree)
        out.append(sweep_row(replace(result.file_summary, agreement=agreement), tmp_path))
    return out


def test_the_table_says_where_the_nodes_saturate_and_what_the_stages_past_it_did(tmp_path):
    rows = _rows(tmp_path, (1000, 1000, 0, 0, True), (2000, 1500, 250, 0, True), (4000, 1700, 575, 1, True),
                 (8000, 1650, 790, 2, False))
    text = _text(render_sweep(rows))
    assert "refused at the door" in text and "575 (57.5%)" in text
    assert ("the nodes saturate at 2,000 TPS offered (committed 1,500); past it: committed 1,650-1,700 TPS, "
            "refused at the door 57.5-79.0%, lost 0, branch switches 3, "
            "final hashes agree: no") in " ".join(text.split())


def test_the_line_says_when_the_nodes_did_not_saturate_or_no_stage_ran_past_them(tmp_path):
    assert past_saturation(_rows(tmp_path, (1000, 1000, 0, 0, True), (2000, 1900, 0, 0, True))) == \
        "the nodes did not saturate up to 2,000 TPS offered (every stage the generator kept up with committed 90% of it)"
    assert past_saturation(_rows(tmp_path, (1000, 1000, 0, 0, True), (2000, 1500, 250, 0, True))) == \
        "the nodes saturate at 2,000 TPS offered (committed 1,500); no stage past it"


# --- every reader, fed a sweep with stages past saturation --------------------------------------------

@pytest.fixture
def past_sweep(tmp_path) -> Path:
    """The recorded sweep (150, 300 held; 600 limited by latency) and two stages past it:
    1,200 TPS that nothing limited (its folder a copy of 300's with its rate and a
    committed rate no stage below reached) and 2,400 TPS refused at the door."""
    folder = tmp_path / "past-sweep"
    shutil.copytree(FIXTURES / "devnet-sweep", folder)
    for rate, committed, limited in ((1200, 1150.0, False), (2400, 1100.0, True)):
        stage = folder / f"stage-{rate}tps"
        shutil.copytree(folder / "stage-300tps", stage)
        summary = json.loads((stage / "summary.json").read_text())
        summary.update(target_tps=float(rate), committed_tps=committed, throughput_saturated=limited,
                       why="committed < 90% of target" if limited else "")
        (stage / "summary.json").write_text(json.dumps(summary))
    sweep = read_sweep(folder / "sweep.json")
    extra = tuple(replace(sweep.rows[1], target_tps=float(rate), committed_tps=committed,
                          throughput_saturated=limited, why="committed < 90% of target" if limited else "",
                          run=str(folder / f"stage-{rate}tps"), planned=rate * 8, door_refused=refused,
                          agree=True, reorgs=1)
                  for rate, committed, limited, refused in ((1200, 1150.0, False, 0), (2400, 1100.0, True, 9000)))
    write(folder / "sweep.json", Sweep(SWEEP_SCHEMA, sweep.rows + extra))
    return folder


def test_the_devnet_reader_takes_the_stage_below_the_first_limited_one_as_the_run(past_sweep):
    run = load_devnet_run(past_sweep)
    assert [p.target_tps for p in run.sweep] == [150, 300, 600, 1200, 2400]
    assert (run.target_tps, run.source) == (300, past_sweep / "stage-300tps" / "summary.json")
    held, limit = held_and_limit(run.sweep)
    assert (held.target_tps, limit.target_tps, limit.why) == (300, 600, "p99 > 3 block intervals")


def test_the_headline_and_the_readme_block_saturate_at_the_stage_below_the_first_limited_one(past_sweep):
    results = load_results(FIXTURES / "c-baseline-quick")
    run = load_devnet_run(past_sweep)
    [entry] = load_headlines(results, [run])
    line = entry.headline
    assert line.outcome == SATURATED
    assert (line.committed_tps.pointer, line.limit.offered_tps.pointer) == ("rows[1].committed_tps",
                                                                            "rows[2].target_tps")
    block = results_block(results, line, run, run_context(run), "x")
    assert "**300 TPS** committed at saturation; the next stage (600 offered): p99 > 3 block intervals" in block
    # the headline plot marks the 300 TPS stage, not the unlimited 1,200 past it
    marks = {committed: kind for committed, _, kind in _curves([entry])[run.run_id]}
    assert marks[300] == plots.HEADLINE and marks[1150.0] == plots.HELD


def test_the_reports_sweep_table_shows_the_stages_past_saturation_and_marks_the_right_stage(past_sweep, tmp_path,
                                                                                           monkeypatch):
    drawn = {}
    monkeypatch.setattr(plots, "throughput_latency",
                        lambda path, sweeps, caption, saturation=None: drawn.update(saturation=saturation))
    results = load_results(FIXTURES / "c-baseline-quick")
    run = load_devnet_run(past_sweep)
    [entry] = load_headlines(results, [run])
    body = report_memo.devnet_section(results, tmp_path, [run], [entry.headline]).body
    assert drawn["saturation"] == {run.run_id: 300}
    assert "| refused at the door | nodes agree | branch switches |" in body
    assert "| 2,400 | 1,100.0 |" in body and "9,000 (46.9%)" in body
    assert (f"- {run.run_id}: the nodes saturate at 2,400 TPS offered (committed 1,100); no stage past it"
            in body)


def test_soak_and_the_fault_scenarios_rate_from_the_stage_below_the_first_limited_one(past_sweep):
    sweep = read_sweep(past_sweep / "sweep.json")
    assert soak_saturation_tps(sweep) == 300            # what 300 TPS committed, not 1,200's 1,150
    assert faults_saturation_tps(sweep) == 300          # its offered rate, not 1,200
