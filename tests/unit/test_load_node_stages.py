"""qmemo.load.node_stages: a run's stage costs from two /metrics documents, and its file."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from qmemo.api_schema import MetricsSnapshot, StageFigure
from qmemo.errors import DecodeError
from qmemo.load.node_stages import (NODE_STAGES_SCHEMA, NodeStageCosts, NodeStagesFile, costs_file, read_node_stages,
                                    run_costs, survival, write_node_stages)
from qmemo.node.stages import OTHER, STAGES
from qmemo.records import to_json
from tests.unit.api_documents import metrics_snapshot


def metrics(node: str, accepted: int, process_s: float, cpu_s: dict[str, float], txs: int = 0,
            uptime_s: float = 12.0) -> MetricsSnapshot:
    """A node's /metrics with these admitted transactions, process CPU and stage CPU."""
    snapshot = metrics_snapshot(node, accepted=accepted)
    by_stage = {name: StageFigure(cpu_s.get(name, 0.0), None, None, txs) for name in STAGES}
    by_stage[OTHER] = StageFigure(0.0, None, None, 0)
    return replace(snapshot, uptime_s=uptime_s, process=replace(snapshot.process, event_loop="uvloop"),
                   stages=replace(snapshot.stages, process_cpu_s=process_s, by_stage=by_stage))


def test_a_runs_costs_are_the_difference_of_the_two_readings_and_other_the_rest():
    before = metrics("node-0", 100, 2.0, {"verify": 0.5, "http": 0.1}, txs=100)
    after = metrics("node-0", 1_100, 2.5, {"verify": 0.8, "http": 0.15}, txs=1_100)
    costs = run_costs("http://a", before, after)
    assert costs.admitted == 1_000 and costs.process_cpu_s == pytest.approx(0.5)
    assert costs.cpu_s["verify"] == pytest.approx(0.3) and costs.cpu_s["http"] == pytest.approx(0.05)
    assert costs.cpu_s[OTHER] == pytest.approx(0.15)
    assert list(costs.cpu_s) == [*STAGES, OTHER] and costs.txs["verify"] == 1_000
    assert costs.us_per_tx()["verify"] == pytest.approx(300.0)
    assert sum(costs.us_per_tx().values()) == pytest.approx(500.0)       # the process's 0.5 s over 1,000
    assert (costs.node, costs.scheme, costs.verifier, costs.event_loop) == ("node-0", "Falcon-512", "fast", "uvloop")


def test_a_restarted_node_gives_no_costs():
    after = metrics("node-0", 10, 1.0, {"verify": 0.1})
    assert run_costs("u", metrics("node-0", 500, 9.0, {"verify": 3.0}), after) is None     # counters went back
    assert run_costs("u", metrics("node-0", 0, 0.5, {}, uptime_s=20.0), after) is None     # uptime went back


def test_nothing_admitted_has_no_per_transaction_cost():
    reading = metrics("node-0", 10, 1.0, {})
    assert run_costs("u", reading, reading).us_per_tx() is None


def test_the_file_keeps_the_nodes_that_answered_and_reads_back_equal(tmp_path):
    before = {"http://a": metrics("node-0", 0, 1.0, {}), "http://b": None,
              "http://c": metrics("node-2", 0, 1.0, {})}
    after = {"http://a": metrics("node-0", 50, 1.2, {"store": 0.05}), "http://b": metrics("node-1", 5, 1.0, {}),
             "http://c": None}
    record = costs_file(["http://a", "http://b", "http://c"], before, after)
    assert [node.url for node in record.nodes] == ["http://a"]
    path = tmp_path / "node-stages.json"
    write_node_stages(path, record)
    assert json.loads(path.read_text())["schema"] == NODE_STAGES_SCHEMA
    assert read_node_stages(path) == record and record.nodes[0].event_loop == "uvloop"


def test_a_file_of_another_schema_is_refused_by_name(tmp_path):
    path = tmp_path / "node-stages.json"
    write_node_stages(path, NodeStagesFile("qmemo-node-stages/0", ()))
    with pytest.raises(DecodeError, match="older or newer"):
        read_node_stages(path)


def test_node_costs_round_trip_with_no_verifier(tmp_path):
    costs = NodeStageCosts("u", "node-0", "ML-DSA-44", None, 3, 0.1, {"verify": 0.05, OTHER: 0.05}, {"verify": 3})
    path = tmp_path / "node-stages.json"
    write_node_stages(path, NodeStagesFile(NODE_STAGES_SCHEMA, (costs,)))
    assert read_node_stages(path).nodes == (costs,)


def test_stages_beyond_the_process_cpu_over_a_run_are_kept_as_an_overrun():
    before = metrics("node-0", 0, 1.0, {"verify": 0.2})
    after = metrics("node-0", 100, 1.1, {"verify": 0.35})     # 0.15 s of stages in 0.1 s of process
    costs = run_costs("u", before, after)
    assert costs.cpu_s[OTHER] == 0.0 and costs.overrun_cpu_s == pytest.approx(0.05)
    assert sum(costs.cpu_s.values()) == pytest.approx(costs.process_cpu_s + costs.overrun_cpu_s)
    fitting = run_costs("u", before, metrics("node-0", 100, 1.5, {"verify": 0.35}))
    assert fitting.overrun_cpu_s == 0.0


def test_a_file_written_before_the_overrun_field_reads_as_unknown_overrun():
    record = (Path(__file__).resolve().parents[1] / "fixtures" / "devnet-run" / "node-stages.json")
    assert "overrun_cpu_s" not in record.read_text()
    assert all(node.overrun_cpu_s is None for node in read_node_stages(record).nodes)      # unknown, not 0


def test_reading_the_schema_loads_no_http_client():
    # `qmemo report` reads these files: the fetch lives with the generator (qmemo.load.run).
    loaded = subprocess.run([sys.executable, "-c", "import sys, qmemo.load.node_stages, qmemo.analysis.report_stages;"
                             "print('aiohttp' in sys.modules)"], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "False"


def timed(document: MetricsSnapshot, uptime_s: float) -> MetricsSnapshot:
    return replace(document, uptime_s=uptime_s)


def test_survival_is_the_verify_work_per_core_second_over_the_same_runs_verify_rate():
    # Two nodes over 10 s on 2 cores: 4,000 + 6,000 verifies, 0.2 + 0.3 s of verify CPU (50 us each).
    urls = ["http://a", "http://b"]
    before = {"http://a": timed(metrics("node-0", 0, 1.0, {"verify": 1.0}, txs=0), 5.0),
              "http://b": timed(metrics("node-1", 0, 1.0, {"verify": 2.0}, txs=0), 7.0)}
    after = {"http://a": timed(metrics("node-0", 4_000, 3.0, {"verify": 1.2}, txs=4_000), 15.0),
             "http://b": timed(metrics("node-1", 6_000, 3.0, {"verify": 2.3}, txs=6_000), 17.0)}
    record = costs_file(urls, before, after, cores=2)
    assert [node.span_s for node in record.nodes] == [10.0, 10.0] and record.cores == 2
    figures = survival(record, committed_tps=400.0)
    assert figures.verifies == 10_000 and figures.verify_us == pytest.approx(50.0)
    assert figures.verifies_per_core_s == pytest.approx(500.0)             # 10,000 / 10 s / 2 cores
    assert figures.ratio == pytest.approx(500.0 / 20_000.0)                # one core verifies 20,000/s
    assert figures.ratio == pytest.approx(0.5 / (10.0 * 2))                # = the verify stage's share of the machine
    assert figures.committed_ratio == pytest.approx(400.0 * 2 / 2 / 20_000.0)
    assert (figures.nodes, figures.verifier) == (2, "fast")
    assert figures.node_share == pytest.approx(0.5 / 4.0)                  # of the nodes' 2 + 2 s of CPU
    assert survival(record).committed_ratio is None


def test_survival_needs_spans_cores_and_verifies():
    before, after = timed(metrics("node-0", 0, 1.0, {}), 1.0), timed(metrics("node-0", 10, 2.0, {"verify": 0.1}, 10), 2.0)
    assert survival(costs_file(["u"], {"u": before}, {"u": after})) is None                  # no cores
    assert survival(costs_file(["u"], {"u": before}, {"u": before}, cores=2)) is None         # nothing verified
    untimed = replace(costs_file(["u"], {"u": before}, {"u": after}, cores=2), nodes=(
        replace(costs_file(["u"], {"u": before}, {"u": after}).nodes[0], span_s=None),))
    assert survival(untimed) is None                                                         # an older file's readings
    older = Path(__file__).resolve().parents[1] / "fixtures" / "devnet-run" / "node-stages.json"
    assert survival(read_node_stages(older)) is None


def test_the_manifests_verifier_comes_from_the_same_metrics_document():
    from qmemo.load.run import node_verifier

    document = metrics_snapshot(verifier="fast")
    assert node_verifier(document) == {"verifier": "fast", "key_cache": to_json(document.verify.key_cache)}
    assert node_verifier(replace(document, verify=replace(document.verify, verifier="liboqs", key_cache=None))) == \
        {"verifier": "liboqs", "key_cache": None}
    assert node_verifier(None) is None
