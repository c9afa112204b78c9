"""The headline of a devnet run (qmemo.analysis.headline): saturation, survival against C,
p99 and the verifier, each cited to the row it was read from; and the headroom's devnet
capacity taken from it (no verdict from a lower bound).

Runs are built as the reader builds them (DevnetRun, SweepPoint); the C baseline is the
recorded quick run in tests/fixtures/c-baseline-quick."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from qmemo.bench.c_baseline import load_c_baseline
from qmemo.analysis.devnet import DevnetRun, SweepPoint
from qmemo.analysis.headline import (
    C_FAST, GENERATOR_BOUND, LIMITED, NOT_REACHED, SATURATED, headline, survival_against_c,
)
from qmemo.analysis.report_memo import devnet_capacities
from qmemo.load.node_stages import NODE_STAGES_SCHEMA, NodeStageCosts, NodeStagesFile

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SUMMARY = Path("/tmp/run/summary.json")
SWEEP = Path("/tmp/run/sweep.json")
STAGES = Path("/tmp/run/stage-300tps/node-stages.json")
RUN = DevnetRun(source=SUMMARY, run_id="run", measured_s=10.0, target_tps=600.0,
                committed_tps=600.0, counts={}, latency_ms={"intended_to_committed": {"p99": 4_500.0}},
                generator_fell_behind=False, schedule_lag_ms={}, throughput_saturated=False,
                latency_saturated=False)


def stage(target: float, committed: float, index: int, *, throughput: bool = False, latency: bool = False,
          generator: bool = False, why: str = "") -> SweepPoint:
    return SweepPoint(target, committed, 1_000.0, 2_000.0 + target, throughput, None, latency, generator, why, index)


def swept(*points: SweepPoint) -> DevnetRun:
    return replace(RUN, sweep=tuple(sorted(points, key=lambda p: p.target_tps)), sweep_source=SWEEP)


def nodes_on(*verifiers: str | None) -> NodeStagesFile:
    return NodeStagesFile(NODE_STAGES_SCHEMA, tuple(
        NodeStageCosts(f"http://n{i}", f"node-{i}", "Falcon-512", verifier, 10, 1.0, {}, {})
        for i, verifier in enumerate(verifiers)), 2)


@pytest.fixture(scope="module")
def baseline():
    return load_c_baseline(FIXTURES / "c-baseline-quick" / "summary.json")


# --- saturation ---------------------------------------------------------------------------------

def test_a_sweep_saturates_at_its_highest_held_stage_below_a_stage_the_chain_could_not_carry():
    line = headline(swept(stage(150, 150, 0), stage(300, 300, 1),
                          stage(600, 590, 2, latency=True, why="p99 > 3 block intervals")))
    assert line.outcome == SATURATED and line.is_capacity
    assert (line.committed_tps.value, line.committed_tps.source, line.committed_tps.pointer) == \
        (300, SWEEP, "rows[1].committed_tps")
    assert (line.limit.offered_tps.value, line.limit.why.value, line.limit.why.pointer) == \
        (600, "p99 > 3 block intervals", "rows[2].why")
    assert line.p99_final_ms.pointer == "rows[1].p99_ms"
    assert line.saturation_text().startswith("saturates at 300 TPS committed")


def test_a_sweep_cites_each_stage_by_its_row_in_the_file_not_by_its_rank():
    # sweep.json rows out of offered order: the reader sorts, the citation keeps the row.
    line = headline(swept(stage(300, 300, 2), stage(150, 150, 0), stage(600, 400, 1, throughput=True,
                                                                        why="committed < 90% of target")))
    assert line.committed_tps.pointer == "rows[2].committed_tps"
    assert line.limit.committed_tps.pointer == "rows[1].committed_tps"


def test_a_sweep_nothing_limited_is_held_and_not_reached():
    line = headline(swept(stage(150, 150, 0), stage(300, 300, 1)))
    assert line.outcome == NOT_REACHED and not line.is_capacity and line.limit is None
    assert line.saturation_text() == "held at 300 TPS, saturation not reached"


def test_a_stage_above_limited_only_by_the_generator_says_nothing_of_the_chain():
    line = headline(swept(stage(300, 300, 0), stage(600, 600, 1, generator=True, why="generator fell behind")))
    assert line.outcome == GENERATOR_BOUND and not line.is_capacity
    assert "saturation not reached" in line.saturation_text()


def test_a_sweep_limited_at_its_first_stage_is_limited_and_is_a_capacity_only_if_throughput_fell_short():
    slow = headline(swept(stage(600, 600, 0, latency=True, why="p99 > 3 block intervals")))
    assert slow.outcome == LIMITED and not slow.is_capacity
    short = headline(swept(stage(600, 400, 0, throughput=True, why="committed < 90% of target")))
    assert short.outcome == LIMITED and short.is_capacity and short.committed_tps.value == 400


@pytest.mark.parametrize("run, outcome, capacity", [
    (RUN, NOT_REACHED, False),                                                         # kept up with its load
    (replace(RUN, latency_saturated=True, why="p99 > 3 block intervals"), LIMITED, False),  # all committed, slowly
    (replace(RUN, throughput_saturated=True, committed_tps=400.0, why="committed < 90% of target"), LIMITED, True),
    (replace(RUN, generator_fell_behind=True, why="generator fell behind"), GENERATOR_BOUND, False),
])
def test_a_single_run_draws_a_verdict_only_when_its_throughput_fell_short(run, outcome, capacity):
    line = headline(run)
    assert (line.outcome, line.is_capacity) == (outcome, capacity)
    assert line.committed_tps.pointer == "committed_tps" and line.committed_tps.source == SUMMARY
    assert line.p99_final_ms.pointer == "latency_ms.intended_to_committed.percentiles_ms.p99"


# --- survival against C -------------------------------------------------------------------------

def test_survival_is_committed_tps_over_the_c_single_core_rate():
    assert survival_against_c(5_000.0, 200_000.0) == pytest.approx(0.025)
    assert survival_against_c(5_000.0, 0.0) is None


def test_nodes_on_the_fast_verifier_are_set_against_its_c_rate_with_the_key_cached(baseline):
    line = headline(RUN, nodes_on("fast", "fast", "fast"), STAGES, baseline)
    fast = baseline.fast_verify_ops_per_s("Falcon-512")
    assert line.reference.row == C_FAST and line.reference.verify_per_s.value == fast
    assert line.reference.verify_per_s.pointer.startswith("verify_implementations[")
    assert line.survival == pytest.approx(600.0 / fast)
    assert line.timing == "variable-time hash-to-point"
    assert (line.verifier.value, line.verifier.pointer, line.verifier.source) == ("fast", "nodes[0].verifier", STAGES)


def test_nodes_on_liboqs_are_set_against_liboqs_constant_time_median(baseline):
    line = headline(RUN, nodes_on("liboqs", "liboqs"), STAGES, baseline)
    assert line.reference.verify_per_s.value == baseline.verify_ops_per_s("Falcon-512")
    assert line.reference.verify_per_s.pointer == "single_core_verify.Falcon-512.ops_per_s"
    assert line.timing == "constant-time hash-to-point"


@pytest.mark.parametrize("stages", [
    None,                                   # no node-stages.json: the verifier is unknown
    nodes_on("fast", "liboqs", "fast"),     # nodes on different verifiers: no one C rate fits
    nodes_on(None, None),                   # nodes too old to say
])
def test_no_survival_without_one_known_verifier(baseline, stages):
    line = headline(RUN, stages, STAGES if stages else None, baseline)
    assert line.survival is None and line.reference is None
    assert line.survival_text().startswith("no survival figure")


def test_no_fast_rate_in_the_baseline_means_no_survival_never_liboqs_in_its_place(baseline):
    without_fast = replace(baseline, summary=replace(baseline.summary, verify_implementations=None))
    assert headline(RUN, nodes_on("fast"), STAGES, without_fast).survival is None


def test_a_lower_bound_says_so_in_its_survival(baseline):
    assert headline(RUN, nodes_on("fast"), STAGES, baseline).survival_text().startswith("at least ")


def test_every_figure_the_headline_states_is_among_its_citations(baseline):
    line = headline(swept(stage(300, 300, 0), stage(600, 590, 1, latency=True, why="p99 > 3 block intervals")),
                    nodes_on("fast"), STAGES, baseline)
    pointers = {c.pointer for c in line.citations()}
    assert {"rows[0].committed_tps", "rows[0].target_tps", "rows[0].p99_ms", "rows[1].target_tps",
            "rows[1].committed_tps", "rows[1].why", "nodes[0].verifier"} <= pointers
    assert any(p.startswith("verify_implementations[") for p in pointers)


# --- the headroom's devnet capacity -------------------------------------------------------------

def test_a_run_that_did_not_saturate_is_a_lower_bound_without_a_verdict():
    [capacity] = devnet_capacities([headline(RUN)])
    assert capacity.lower_bound and capacity.label == "devnet run, node end to end (lower bound)"
    assert (capacity.source, capacity.key) == (str(SUMMARY), "committed_tps")


def test_a_saturated_sweep_is_a_capacity_cited_to_its_held_row_of_sweep_json():
    line = headline(swept(stage(300, 300, 0), stage(600, 400, 1, throughput=True, why="committed < 90% of target")))
    [capacity] = devnet_capacities([line])
    assert not capacity.lower_bound and capacity.label == "devnet run, node end to end"
    # the held stage's 300, not the limited stage's figures, and sweep.json's row, not a stage's summary
    assert (capacity.verify_rate, capacity.source, capacity.key) == (300, str(SWEEP), "rows[0].committed_tps")


def test_headroom_png_leaves_a_lower_bound_out_and_draws_a_capacity(monkeypatch, tmp_path):
    from qmemo.analysis import plots
    from qmemo.analysis.report_memo import headroom_section
    from qmemo.analysis.results import load_results

    drawn: dict[str, list[float]] = {}
    monkeypatch.setattr(plots, "headroom_bars", lambda path, labels, series, comfort, caption: drawn.update(series))
    saturated = replace(headline(swept(stage(300, 300, 0), stage(600, 400, 1, throughput=True, why="x"))),
                        run_id="sat")
    headroom_section(load_results(FIXTURES / "c-baseline-quick"), tmp_path, [headline(RUN), saturated])
    assert "devnet sat, node end to end" in drawn
    assert not any("lower bound" in label for label in drawn)
