"""Reading a `qmemo bench node` result for the report (qmemo.analysis.py_bench): a file
with several rounds per thread count is read as each count's median run; a file from
before rounds, as every run it has."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from qmemo.analysis.py_bench import read_node_bench
from qmemo.paths import REPO_ROOT

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "py-bench" / "node-bench-20261126T034032Z.json"


def write(tmp_path: Path, document: dict) -> Path:
    path = tmp_path / "node-bench.json"
    path.write_text(json.dumps(document))
    return path


def test_a_file_from_before_rounds_is_read_whole(tmp_path):
    document = json.loads(FIXTURE.read_text())
    assert all("median" not in run for run in document["runs"])
    bench = read_node_bench(write(tmp_path, document))
    assert [run.threads for run in bench.runs] == [run["threads"] for run in document["runs"]]


def test_with_rounds_only_each_thread_counts_median_run_is_read(tmp_path):
    document = json.loads(FIXTURE.read_text())
    first = document["runs"][0]
    slower = copy.deepcopy(first) | {"median": False, "node_cpu_us_per_tx": first["node_cpu_us_per_tx"] * 1.2}
    document["runs"] = [dict(run, median=True) for run in document["runs"]] + [slower]
    bench = read_node_bench(write(tmp_path, document))
    assert [run.threads for run in bench.runs] == [run["threads"] for run in document["runs"][:-1]]
    assert [run.node_cpu_us_per_tx for run in bench.runs] == \
        [run["node_cpu_us_per_tx"] for run in document["runs"][:-1]]
