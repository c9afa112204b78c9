"""The agreement check's verdict on hand-built chains: one hash per final height or the
first height with two, compared up to the lowest final height, branch switches counted
from the run's start, a node that did not answer named; and where the verdict goes
(summary.json, the sweep's row, the printed summary)."""

from __future__ import annotations

from dataclasses import replace

from rich.console import Console

import pytest

from qmemo.load.agreement import SINCE_NODE_START, SINCE_RUN_START, Agreement, NodeReading, compare
from qmemo.load.latency import LatencySummary, RunCounts, RunSummary
from qmemo.load.summary import LoadSummary, SweepRow, load_summary, read_summary, sweep_row, write
from qmemo.load.summary_view import agreement_row, render_summary, render_sweep
from qmemo.records import from_json, to_json

A, B, C = "http://127.0.0.1:1", "http://127.0.0.1:2", "http://127.0.0.1:3"


def chain(final_height: int, reorgs: int = 0, **changed: str) -> NodeReading:
    """A node whose final block at height h hashes to "h<h>", but at the heights in `changed` ("at_5": "x")."""
    hashes = {h: f"h{h}" for h in range(1, final_height + 1)}
    hashes |= {int(key.removeprefix("at_")): value for key, value in changed.items()}
    return NodeReading(final_height, reorgs, hashes)


@pytest.fixture
def load_summary_file() -> LoadSummary:
    """A run's summary without the agreement check (as written before it)."""
    lat = LatencySummary(10, {"p50": 900.0, "p90": 1500.0, "p95": 1500.0, "p99": 1500.0, "p99.9": 1500.0}, 1500.0,
                         900.0)
    counts = RunCounts(planned=100, sent=100, accepted=100, duplicate=0, committed=100, rejected={}, lost=0, failed=0,
                       unsent=0)
    run = RunSummary(counts, lat, lat, lat, lat, warmup_s=2.0, measured_s=10.0, committed_tps=10.0,
                     generator_fell_behind=False)
    return load_summary(run, target_tps=10.0, interrupted=False, block_interval_s=2.0)


def test_nodes_with_one_hash_at_every_height_agree():
    agreement = compare({A: chain(6), B: chain(6), C: chain(6)})
    assert agreement.agree and agreement.first_disagreement is None
    assert (agreement.from_height, agreement.to_height, agreement.heights) == (1, 6, 6)
    assert agreement.nodes == (A, B, C) and agreement.unanswered == ()


def test_a_hash_that_differs_at_one_height_is_the_first_disagreement():
    agreement = compare({A: chain(6), B: chain(6, at_4="other", at_5="other too"), C: chain(6)})
    assert not agreement.agree
    assert agreement.first_disagreement is not None
    assert agreement.first_disagreement.height == 4        # the lowest of the two
    assert agreement.first_disagreement.hashes == {A: "h4", B: "other", C: "h4"}


def test_a_final_block_a_node_did_not_give_is_a_disagreement():
    short = NodeReading(5, 0, {h: f"h{h}" for h in (1, 2, 4, 5)})      # says final 5, gave no block 3
    agreement = compare({A: chain(5), B: short})
    assert not agreement.agree and agreement.first_disagreement.height == 3


def test_nodes_at_different_final_heights_are_compared_to_the_lowest():
    # B is final to 3 only: A's and C's blocks above it are not compared, different as they are.
    agreement = compare({A: chain(7, at_5="a"), B: chain(3), C: chain(6, at_5="c")})
    assert agreement.agree and agreement.to_height == 3 and agreement.heights == 3
    assert not compare({A: chain(7, at_5="a"), C: chain(6, at_5="c")}).agree      # without B they differ at 5


def test_the_heights_compared_start_where_asked():
    agreement = compare({A: chain(8, at_2="a"), B: chain(8)}, from_height=3)
    assert agreement.agree and (agreement.from_height, agreement.to_height) == (3, 8)
    assert not compare({A: chain(8, at_2="a"), B: chain(8)}).agree


def test_no_height_to_compare_is_agreement_over_none():
    agreement = compare({A: chain(4), B: chain(4)}, from_height=5)
    assert agreement.agree and agreement.heights == 0 and agreement.to_height == 4


def test_a_node_that_did_not_answer_is_named_and_the_nodes_are_not_known_to_agree():
    agreement = compare({A: chain(5), B: None, C: chain(5)})
    assert agreement.unanswered == (B,) and agreement.nodes == (A, C)
    assert not agreement.agree and agreement.first_disagreement is None
    assert set(agreement.reorgs) == {A, C}
    nobody = compare({A: None, B: None})
    assert not nobody.agree and nobody.unanswered == (A, B) and nobody.heights == 0


def test_branch_switches_count_from_the_run_start_and_a_restarted_node_from_zero():
    readings = {A: chain(5, reorgs=7), B: chain(5, reorgs=2), C: chain(5, reorgs=3)}
    since_start = compare(readings)
    assert since_start.reorgs == {A: 7, B: 2, C: 3} and since_start.reorgs_total == 12
    assert since_start.reorgs_since == SINCE_NODE_START
    # B's counter fell below its start reading: it restarted, and counts from 0 again. C had no start reading.
    run = compare(readings, reorgs_before={A: 4, B: 5, C: None})
    assert run.reorgs == {A: 3, B: 2, C: 3} and run.reorgs_total == 8 and run.reorgs_since == SINCE_RUN_START


def test_the_agreement_reads_back_from_summary_json_and_fills_the_sweep_row(load_summary_file, tmp_path):
    agreement = compare({A: chain(6, reorgs=1), B: chain(6, at_2="x", reorgs=2)}, reorgs_before={A: 0, B: 0})
    document = to_json(agreement)
    assert document["first_disagreement"] == {"height": 2, "hashes": {A: "h2", B: "x"}}
    assert from_json(Agreement, document) == agreement
    summary = replace(load_summary_file, agreement=agreement)
    write(tmp_path / "summary.json", summary)
    assert read_summary(tmp_path / "summary.json") == summary
    assert "agreement" not in to_json(load_summary_file)        # older files: absent, not null
    row = sweep_row(summary, "stage")
    assert (row.agree, row.reorgs) == (False, 3)
    assert sweep_row(load_summary_file, "stage").agree is None      # a summary without the check
    assert from_json(SweepRow, to_json(row)) == row


def _text(renderable) -> str:
    console = Console(width=200, record=True)
    console.print(renderable)
    return console.export_text()


def test_the_printed_row_says_the_heights_the_verdict_and_the_branch_switches():
    label, verdict = agreement_row(compare({A: chain(9, reorgs=1), B: chain(9)}, from_height=3,
                                           reorgs_before={A: 0, B: 0}))
    assert label == "nodes agree (final hashes, heights 3-9)"
    assert verdict.plain == f"yes; branch switches: 1 ({A}: 1, {B}: 0)"
    _, verdict = agreement_row(compare({A: chain(9), B: chain(9, at_7="x")}))
    assert verdict.plain.startswith("NO at height 7; branch switches: 0") and "since the nodes started" in verdict.plain
    _, verdict = agreement_row(compare({A: chain(9), B: None}, reorgs_before={}))
    assert verdict.plain.startswith(f"NO: no answer from {B}")


def test_the_printed_summary_has_the_agreement_row_only_when_checked(load_summary_file):
    agreement = compare({A: chain(4), B: chain(4)}, reorgs_before={A: 0, B: 0})
    text = _text(render_summary(replace(load_summary_file, agreement=agreement)))
    assert "nodes agree (final hashes, heights 1-4)" in text and "yes; branch switches: 0" in text
    assert "nodes agree" not in _text(render_summary(load_summary_file))


def test_the_sweep_table_shows_each_stages_agreement(load_summary_file):
    agreeing = sweep_row(replace(load_summary_file, agreement=compare({A: chain(3, reorgs=2), B: chain(3)})), "s1")
    text = _text(render_sweep([agreeing, sweep_row(load_summary_file, "s2")]))
    header = " ".join(line for line in text.splitlines() if "┃" in line)    # headers wrap onto lines
    assert all(word in header for word in ("nodes", "agree", "branch", "switches"))
    lines = [line for line in text.splitlines() if "│" in line and "yes" in line]
    assert len(lines) == 1 and lines[0].rstrip(" │").endswith("2")


def _sample(node: str, reorgs: int, pid: int, started_at_s: float) -> dict:
    """One line of a scenario's metrics/<node>.jsonl whose /metrics says `reorgs` branch switches."""
    from tests.unit.api_documents import metrics_snapshot

    metrics = metrics_snapshot(node)
    metrics = replace(metrics, blocks=replace(metrics.blocks, reorgs=reorgs),
                      process=replace(metrics.process, pid=pid, started_at_s=started_at_s))
    return {"time_s": 1.0, "node": node, "ok": True, "status": None, "metrics": to_json(metrics)}


def test_a_scenarios_branch_switches_add_up_each_process_lifes_highest_count():
    from qmemo.scenario.invariants import branch_switches, final_blocks_kept

    lines = [_sample("node-0", 1, 10, 0.0), _sample("node-0", 3, 10, 0.0),      # one life: 3
             _sample("node-0", 2, 11, 50.0),                                     # restarted: 2 more
             _sample("node-1", 0, 12, 0.0), {"time_s": 2.0, "node": "node-1", "ok": False, "metrics": None}]
    switches = branch_switches(lines, ["node-0", "node-1", "node-2"])
    assert switches == {"node-0": 5, "node-1": 0, "node-2": 0}
    result = final_blocks_kept([("node-0", 1, "h1")], {"node-0": {1: "h1"}}, switches)
    assert result.passed and result.figures["branch_switches_total"] == 5
    assert result.detail.endswith("; 5 branch switches (node-0: 5, node-1: 0, node-2: 0)")
