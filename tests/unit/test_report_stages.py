"""The report's stage-cost section (qmemo.analysis.report_stages) on the recorded C baseline
and a devnet run folder with a node-stages.json made by the generator's own writer."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from qmemo.analysis.devnet import load_devnet_run
from qmemo.analysis.report_stages import COLUMNS, TITLE, event_loops, pooled, stage_costs_section, stage_rows
from qmemo.analysis.results import load_results
from qmemo.load.node_stages import (NODE_STAGES_FILE, NODE_STAGES_SCHEMA, NodeStageCosts, NodeStagesFile,
                                    write_node_stages)
from qmemo.node.stages import OTHER

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def node(name: str, admitted: int, verify_s: float, other_s: float, scheme: str = "Falcon-512") -> NodeStageCosts:
    cpu = dict.fromkeys(COLUMNS, 0.0)
    cpu["verify"], cpu[OTHER] = verify_s, other_s
    return NodeStageCosts(f"http://{name}", name, scheme, "fast", admitted, verify_s + other_s, cpu, {})


@pytest.fixture(scope="module")
def results():
    return load_results(FIXTURES / "c-baseline-quick")


def run_with(tmp_path: Path, record: NodeStagesFile | None):
    folder = tmp_path / "run"
    folder.mkdir()
    shutil.copy(FIXTURES / "devnet-run" / "summary.json", folder / "summary.json")
    if record is not None:
        write_node_stages(folder / NODE_STAGES_FILE, record)
    return load_devnet_run(folder)


def test_a_scheme_pools_its_nodes_cpu_over_their_admitted_transactions():
    row = pooled("x", [node("a", 1_000, 0.05, 0.05), node("b", 3_000, 0.09, 0.03)], 40.0)
    assert row.admitted == 4_000
    assert row.us_per_tx["verify"] == pytest.approx(35.0)        # 0.14 s over 4,000
    assert row.us_per_tx[OTHER] == pytest.approx(20.0)
    assert row.total_us == pytest.approx(55.0) and row.c_verify_us == 40.0
    assert pooled("x", [node("a", 0, 0.1, 0.1)], None) is None


def test_rows_by_scheme_and_by_node_carry_the_baselines_verify_time(results):
    record = NodeStagesFile(NODE_STAGES_SCHEMA, (node("node-0", 100, 0.004, 0.002),
                                                 node("node-1", 100, 0.006, 0.002),
                                                 node("node-2", 50, 0.001, 0.001, scheme="Nope-1")))
    schemes, nodes = stage_rows(results, "r1", record)
    assert [row.label for row in schemes] == ["Falcon-512 (r1)", "Nope-1 (r1)"]
    assert [row.label for row in nodes] == ["node-0 (r1)", "node-1 (r1)", "node-2 (r1)"]
    fast_us = 1e6 / results.baseline.fast_verify_ops_per_s("Falcon-512")    # the nodes run the fast verifier
    assert schemes[0].c_verify_us == pytest.approx(fast_us) and schemes[1].c_verify_us is None
    assert schemes[0].us_per_tx["verify"] == pytest.approx(50.0)


def test_nodes_on_liboqs_are_set_against_liboqs_c_verify(results):
    liboqs = NodeStageCosts("u", "node-0", "Falcon-512", "liboqs", 10, 0.001, dict.fromkeys(COLUMNS, 0.0), {})
    schemes, _ = stage_rows(results, "r", NodeStagesFile(NODE_STAGES_SCHEMA, (liboqs,)))
    assert schemes[0].c_verify_us == pytest.approx(1e6 / results.baseline.verify_ops_per_s("Falcon-512"))


def test_the_section_tables_and_draws_a_run_with_stage_costs(tmp_path, results):
    run = run_with(tmp_path, NodeStagesFile(NODE_STAGES_SCHEMA, (node("node-0", 2_000, 0.1, 0.3),)))
    section = stage_costs_section(results, tmp_path, [run])
    assert section.title == TITLE and section.plots == ("stage_costs.png",)
    assert (tmp_path / "stage_costs.png").read_bytes().startswith(b"\x89PNG")
    row = next(line for line in section.body.splitlines() if line.startswith("| Falcon-512 (run, 300 TPS)"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[2] == "2,000" and cells[3 + COLUMNS.index("verify")] == "50.0"
    assert cells[3 + COLUMNS.index(OTHER)] == "150.0" and cells[3 + len(COLUMNS)] == "200.0"
    assert NODE_STAGES_FILE in section.body and "c-baseline-quick/summary.json" in section.body


def test_the_section_names_the_event_loop_each_node_ran(tmp_path, results):
    on = [replace(node("node-0", 100, 0.01, 0.03), event_loop="uvloop"),
          replace(node("node-1", 100, 0.01, 0.03), event_loop="uvloop")]
    section = stage_costs_section(results, tmp_path, [run_with(tmp_path, NodeStagesFile(NODE_STAGES_SCHEMA, on))])
    assert "run: uvloop on every node." in section.body
    mixed = [on[0], replace(on[1], event_loop="asyncio"), node("node-2", 100, 0.01, 0.03)]
    assert event_loops(NodeStagesFile(NODE_STAGES_SCHEMA, mixed)) == \
        "asyncio on node-1, not recorded (a file from before it was kept) on node-2, uvloop on node-0"


def test_a_run_folder_without_stage_costs_is_named_not_guessed(tmp_path, results):
    section = stage_costs_section(results, tmp_path, [run_with(tmp_path, None)])
    assert section.plots == () and "No stage costs in" in section.body and NODE_STAGES_FILE in section.body
    assert not (tmp_path / "stage_costs.png").exists()
    assert "--devnet" in stage_costs_section(results, tmp_path, []).body


def test_each_node_is_set_against_its_own_verifiers_c_row(tmp_path, results):
    # node-0 runs the fast verifier, node-1 liboqs: each node and each pooled row takes its
    # own C cost (the fixture's fast and liboqs rows differ), and says which row it took.
    fast = node("node-0", 100, 0.004, 0.002)
    liboqs = NodeStageCosts("http://node-1", "node-1", "Falcon-512", "liboqs", 100, 0.006,
                            {**dict.fromkeys(COLUMNS, 0.0), "verify": 0.006}, {})
    record = NodeStagesFile(NODE_STAGES_SCHEMA, (fast, liboqs))
    schemes, nodes = stage_rows(results, "r", record)
    fast_us = 1e6 / results.baseline.fast_verify_ops_per_s("Falcon-512")
    liboqs_us = 1e6 / results.baseline.verify_ops_per_s("Falcon-512")
    assert fast_us < liboqs_us * 0.9          # far enough apart that taking the wrong one shows
    assert [(row.label, row.verifier, row.c_row) for row in schemes] == [
        ("Falcon-512 fast (r)", "fast", "fast, key cached"), ("Falcon-512 liboqs (r)", "liboqs", "liboqs")]
    assert [row.c_verify_us for row in schemes] == [pytest.approx(fast_us), pytest.approx(liboqs_us)]
    assert [row.c_verify_us for row in nodes] == [pytest.approx(fast_us), pytest.approx(liboqs_us)]
    assert [row.c_row for row in nodes] == ["fast, key cached", "liboqs"]
    section = stage_costs_section(results, tmp_path, [run_with(tmp_path, record)])
    row = next(line for line in section.body.splitlines() if line.startswith("| node-1 (run, 300 TPS)"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert cells[4 + len(COLUMNS)] == f"{liboqs_us:.1f}" and cells[5 + len(COLUMNS)] == "liboqs"


def test_the_section_states_the_verify_stage_shares_as_secondary_figures_with_their_verifier(tmp_path, results):
    timed = [NodeStageCosts(n.url, n.node, n.scheme, n.verifier, n.admitted, n.process_cpu_s, n.cpu_s,
                            {"verify": verifies}, span_s=10.0)
             for n, verifies in ((node("node-0", 1_000, 0.05, 0.05), 1_000), (node("node-1", 1_000, 0.03, 0.07), 1_500))]
    run = run_with(tmp_path, NodeStagesFile(NODE_STAGES_SCHEMA, tuple(timed), cores=2))
    text = stage_costs_section(results, tmp_path, [run]).body
    # 2,500 verifies in 0.08 s of verify CPU (32 us each); 2,500 / 10 s / 2 cores = 125 per core-s of 31,250
    assert "verify stage's share of machine CPU" in text and "| 0.004 |" in text and "| 32.0 |" in text
    assert "Secondary figures, not the headline" in text
    assert "fast (variable-time hash-to-point)" in text


def test_stage_costs_without_spans_say_the_verify_stage_shares_are_missing(tmp_path, results):
    run = run_with(tmp_path, NodeStagesFile(NODE_STAGES_SCHEMA, (node("node-0", 100, 0.004, 0.002),)))
    assert "No verify-stage shares" in stage_costs_section(results, tmp_path, [run]).body


def test_the_section_says_fixed_costs_dominate_at_low_load(tmp_path, results):
    run = run_with(tmp_path, NodeStagesFile(NODE_STAGES_SCHEMA, (node("node-0", 100, 0.004, 0.002),)))
    assert "Fixed costs dominate at low load" in stage_costs_section(results, tmp_path, [run]).body
