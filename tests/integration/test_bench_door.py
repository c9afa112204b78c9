"""`qmemo bench door`: a real, short run (one round: a quiet node and a hostile one).

Checks the result file's structure, that the hostile clients were really there (the
node held their connections, and with a short node timeout closed them and saw them come
back), and that the figures follow from the runs; nothing here asserts a speed.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import VENV_BIN, run_command

pytestmark = pytest.mark.slow

TXS, WARMUP, BATCH = 3000, 250, 250
SLOW, TRICKLED, IDLE, READERS = 10, 10, 60, 4


@pytest.fixture(scope="module")
def document(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("door-bench") / "door.json"
    done = run_command([str(VENV_BIN / "qmemo"), "bench", "door", "--txs", str(TXS), "--warmup", str(WARMUP),
                        "--batch", str(BATCH), "--concurrency", "2", "--rounds", "1", "--slow-bodies", str(SLOW),
                        "--trickled-headers", str(TRICKLED), "--idle", str(IDLE), "--slow-readers", str(READERS),
                        "--interval-s", "0.05",
                        "--node-timeout-s", "0.05", "--out", str(out)], timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"saved {out}" in done.stdout and "median admitted tx/s" in done.stdout
    return json.loads(out.read_text())


def test_the_document_names_its_schema_parameters_and_machine(document):
    assert document["schema"] == "qmemo-door-bench/1"
    assert document["parameters"]["hostile"] == {"slow_bodies": SLOW, "trickled_headers": TRICKLED, "idle": IDLE,
                                                 "slow_readers": READERS, "interval_s": 0.05}
    assert document["parameters"]["node_timeout_s"] == 0.05 and document["machine"]
    assert [(run["round"], run["mode"]) for run in document["runs"]] == [(0, "quiet"), (0, "hostile")]


def test_the_hostile_clients_held_connections_and_the_node_closed_them(document):
    quiet, hostile = document["runs"]
    assert quiet["disturbance"] == {}
    assert hostile["disturbance"]["connections"] >= SLOW + TRICKLED + IDLE + READERS
    assert hostile["disturbance"]["closed_by_node"] > 0     # the 0.05 s timeouts, during the run
    assert hostile["open_fds"] > quiet["open_fds"]


def test_the_verdict_is_the_hostile_median_over_the_quiet_one(document):
    quiet, hostile = document["runs"]
    for run in (quiet, hostile):
        assert run["transactions"] == TXS and run["accepted"] == TXS
        assert run["admitted_per_s"] == pytest.approx(TXS / run["wall_s"])
    assert document["rate_ratio"] == pytest.approx(hostile["admitted_per_s"] / quiet["admitted_per_s"])
    assert document["meets_target"] == (document["rate_ratio"] >= document["target_ratio"] == 0.90)
