"""`qmemo bench node`: a real, short run (one verify thread, two rounds of a node each, a few batches).

Checks the result file's structure and that its numbers are positive and consistent
with each other and with the flags; nothing here asserts a speed.
"""

from __future__ import annotations

import json

import pytest

from qmemo.bench.c_baseline import load_c_baseline
from qmemo.bench.node_figures import KERNEL_STEP
from qmemo.bench.node_references import C_BASELINE_MISSING
from qmemo.errors import QmemoError
from tests.conftest import VENV_BIN, run_command

pytestmark = pytest.mark.slow

TXS, WARMUP, BATCH = 1000, 250, 250


@pytest.fixture(scope="module")
def document(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("node-bench") / "node.json"
    done = run_command([str(VENV_BIN / "qmemo"), "bench", "node", "--txs", str(TXS), "--warmup", str(WARMUP),
                        "--batch", str(BATCH), "--concurrency", "2", "--threads", "1", "--rounds", "2",
                        "--out", str(out)],
                       timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"saved {out}" in done.stdout
    return json.loads(out.read_text())


def test_the_document_names_its_schema_parameters_and_machine(document):
    assert document["schema"] == "qmemo-node-bench/1"
    assert document["parameters"] == {"scheme": "Falcon-512", "txs": TXS, "warmup": WARMUP, "batch": BATCH,
                                      "concurrency": 2, "threads": [1], "rounds": 2, "payload_bytes": 188,
                                      "gil_switch_interval_s": None, "verifier": "fast"}
    assert document["machine"]
    assert document["speedup_2_vs_1_threads"] is None      # only one thread count ran


def median_run(document: dict) -> dict:
    [run] = [run for run in document["runs"] if run["median"]]
    return run


def test_each_round_is_a_node_run_and_the_figures_are_the_median_runs(document):
    runs = document["runs"]
    assert [(run["threads"], run["round"]) for run in runs] == [(1, 0), (1, 1)]
    # Two runs: the median is the lower of the two middle ones, the one with less CPU per transaction.
    assert median_run(document) is min(runs, key=lambda run: run["node_cpu_us_per_tx"])
    rounds = document["rounds"]
    cpu = [run["node_cpu_us_per_tx"] for run in runs]
    assert rounds["by_threads"]["1"]["node_cpu_us_per_tx"] == cpu
    assert rounds["by_threads"]["1"]["admitted_per_s"] == [run["admitted_per_s"] for run in runs]
    assert rounds["by_threads"]["1"]["spread"] == pytest.approx(max(cpu) / min(cpu) - 1)
    assert rounds["disturbed"] == ([1] if rounds["by_threads"]["1"]["spread"] > rounds["disturbed_above"] else [])

def test_the_c_baseline_is_the_one_this_checkout_has(document):
    """What the document says of the C baseline is what results/latest holds: its rate,
    that it is missing, or why it could not be read."""
    baseline = document["c_baseline"]
    try:
        expected = load_c_baseline()
    except QmemoError as exc:
        assert baseline == {"error": str(exc)}
        return
    if expected is None:
        assert baseline == {"missing": C_BASELINE_MISSING}
    else:
        assert baseline == {"ops_per_s": expected.verify_ops_per_s("Falcon-512"),
                            "source": str(expected.path.resolve()), "run_id": expected.run_id,
                            "quick": expected.quick}


def test_every_offered_transaction_is_admitted_once(document):
    for run in document["runs"]:        # each round's node is a fresh one
        assert run["threads"] == 1
        assert run["accepted"] == run["transactions"] == TXS    # admitted <= offered, and here all of them
        # `answers` counts every request's HTTP status, the warm-up's included; `accepted` only the timed ones.
        # A batch the door refused `busy` (its queue full of the other client's batch) is sent again
        # and then admitted: counted under "busy" as well as under its final 200.
        answers = dict(run["answers"])
        assert answers.pop("200") == (WARMUP + TXS) // BATCH
        assert set(answers) <= {"busy"}, answers


def test_rates_and_cpu_figures_are_positive_and_agree(document):
    run = median_run(document)
    assert run["wall_s"] > 0 and run["node_cpu_s"] > 0 and run["client_cpu_s"] >= 0
    assert run["admitted_per_s"] == pytest.approx(run["transactions"] / run["wall_s"])
    assert run["admitted_per_cpu_s"] == pytest.approx(run["transactions"] / run["node_cpu_s"])
    assert run["node_cores_busy"] == pytest.approx(run["node_cpu_s"] / run["wall_s"])
    assert sum(run["node_cpu_s_by_thread"].values()) == pytest.approx(run["node_cpu_s"])
    assert sum(run["cpu_us_per_tx_by_thread"].values()) == pytest.approx(run["node_cpu_us_per_tx"])
    assert run["verify_calls"] > 0 and run["verify_s"] > 0
    # The node's own stage accounting over the same span: the verify and admission stages
    # ran, and with "other" they add up to the node's CPU (its /metrics reads bracket the
    # span a little wider than the /proc reads).
    stages = run["stages_cpu_s"]
    assert stages["verify"] > 0 and stages["decode_hash"] > 0 and stages["mempool"] > 0
    assert sum(stages.values()) == pytest.approx(run["node_cpu_s"], rel=0.25, abs=0.05)
    assert run["stages_us_per_tx"]["verify"] == pytest.approx(stages["verify"] / run["transactions"] * 1e6)
    assert 0 < run["other_on_loop_cpu_s"] <= stages["other"] + 0.005
    if document["c_baseline"].get("ops_per_s"):
        assert run["ratio_to_c_single_core"] == pytest.approx(
            run["admitted_per_cpu_s"] / document["c_baseline"]["ops_per_s"])


def test_same_run_references_and_breakdown_are_measured(document):
    refs = document["same_run_references"]
    assert refs["verifier"] == "fast" and "variable-time" in refs["implementation"]
    for label in ("kernel_verify", "native_loop_verify", "registry_verify", "ctypes_verify"):
        assert refs[label]["ops_per_s"] > 0
        assert refs[label]["ops_per_s"] * refs[label]["us_per_op"] == pytest.approx(1e6)
    assert refs["two_threads_verify"]["ops_per_s"] > 0
    steps = document["admission_breakdown_us_per_tx"]
    assert set(steps) == {"kernel: frame, decode, ids, digests", "ledger checks", "signature (kernel, node's verifier)",
                          "ledger commit (pool)", "JSON answer (C)"}
    assert all(value > 0 for value in steps.values())


def test_headline_sets_the_node_against_its_own_verifiers_native_loop(document):
    run = median_run(document)
    head = document["headline"]
    assert head["verifier"] == run["verifier"] == "fast" and head["threads"] == 1
    assert head["admitted_per_cpu_s"] == run["admitted_per_cpu_s"]
    # The tightest of the verifier's native loops (its batch call; the kernel's verify, the node's path).
    refs = document["same_run_references"]
    assert head["same_run_verify_per_s"] == refs[head["reference"]]["ops_per_s"] == \
        max(refs["native_loop_verify"]["ops_per_s"], refs["kernel_verify"]["ops_per_s"])
    assert head["ratio"] == pytest.approx(head["admitted_per_cpu_s"] / head["same_run_verify_per_s"])
    assert run["ratio_to_same_run"][head["reference"]] == pytest.approx(head["ratio"])
    # Its ceiling: the same reference's verify against the kernel's decode and hashing, same run.
    top = head["ceiling"]
    assert top["verify_us_per_tx"] == pytest.approx(1e6 / head["same_run_verify_per_s"])
    assert top["decode_hash_us_per_tx"] == document["admission_breakdown_us_per_tx"][KERNEL_STEP]
    assert head["ratio"] < top["ratio"] < 1
    # Its floor ratio: that same protocol work per transaction over the node's CPU per transaction.
    assert head["floor_us_per_tx"] == pytest.approx(top["verify_us_per_tx"] + top["decode_hash_us_per_tx"])
    assert head["node_cpu_us_per_tx"] == run["node_cpu_us_per_tx"]
    assert head["floor_ratio"] == pytest.approx(head["floor_us_per_tx"] / head["node_cpu_us_per_tx"])
    # The fast verifier's key cache served the node: far fewer keys than transactions, mostly hits.
    assert run["key_cache"]["size"] >= 1 and run["key_cache"]["hits"] > run["key_cache"]["misses"]


def test_zero_verify_threads_runs_the_node_verifying_inline(tmp_path):
    """--threads 0 is a node that verifies on its event loop (qmemo node --verify-threads 0)."""
    out = tmp_path / "inline.json"
    done = run_command([str(VENV_BIN / "qmemo"), "bench", "node", "--txs", str(BATCH), "--warmup", "0",
                        "--batch", str(BATCH), "--concurrency", "1", "--threads", "0", "--rounds", "1",
                        "--out", str(out)],
                       timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    [run] = json.loads(out.read_text())["runs"]
    assert run["threads"] == 0 and run["accepted"] == run["transactions"] == BATCH
