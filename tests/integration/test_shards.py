"""A sharded devnet end to end: `devnet.sh --shards 2`, real nodes, cross-shard load.

One headless run - 2 shards of 2 validators (4 node processes), 40 TPS for 8 s, 30% of
transfers to the other shard - is shared by the tests that read its results: every
transfer final, every cross-shard one credited exactly once on its destination (the
generator's invariants, from both shards' final state), the shards' nodes on
base + k*nodes + i. Then the nodes' own answers: a receipt's status, and what a node of
an unsharded chain says to the receipt calls.
"""

from __future__ import annotations

import orjson
import pytest

from tests.conftest import REPO_ROOT, run_command
from tests.integration.test_devnet import attach_logs, free_base_port, processes_mentioning

pytestmark = pytest.mark.slow
SHARDS, NODES = 2, 2


@pytest.fixture(scope="module")
def sharded_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("shards")
    base = free_base_port(SHARDS * NODES)
    command = ["bash", str(REPO_ROOT / "devnet.sh"), "--no-monitor", "--base-port", str(base), "--dir",
               str(tmp / "devnet"), "--runs", str(tmp / "runs"), "--accounts", "60", "--shards", str(SHARDS),
               "--nodes", str(NODES), "--cross-shard", "30", "--tps", "40", "--duration", "8",
               "--block-ms", "500"]     # devnet.sh's 2 s blocks would make every credit wait four times as long
    result = run_command(command, timeout=300)
    runs = sorted((tmp / "runs").iterdir())
    run = runs[-1] if runs else None
    summary = orjson.loads((run / "gen" / "summary.json").read_bytes()) if run and \
        (run / "gen" / "summary.json").exists() else None
    return {"tmp": tmp, "base": base, "result": result, "run": run, "summary": summary}


def test_a_sharded_devnet_ends_by_itself_with_its_invariants_held(sharded_run):
    result = sharded_run["result"]
    assert result.returncode == 0, result.stdout + result.stderr + attach_logs(sharded_run["run"])
    invariants = sharded_run["summary"]["invariants"]
    assert invariants["supply_conserved"] and invariants["credited_exactly_once"], invariants
    assert invariants["supply_before"] == invariants["supply_after"] and invariants["in_flight"] == 0
    assert "credited exactly once" in result.stdout


def test_every_cross_shard_transfer_is_debited_then_credited_once(sharded_run):
    summary = sharded_run["summary"]
    cross = summary["cross_shard"]
    assert cross["planned"] > 0 and cross["committed"] == cross["planned"] == cross["credited"]
    assert cross["lost"] == 0
    assert cross["p99_ms_intended_to_credited"] >= summary["latency_ms"]["intended_to_committed"]["percentiles_ms"]["p50"]
    assert summary["counts"]["committed"] == summary["counts"]["planned"] == 320    # 40 TPS x 8 s


def test_each_shard_is_driven_and_credits_what_the_other_sent(sharded_run):
    shards = sharded_run["summary"]["shards"]
    base = sharded_run["base"]
    assert [shard["shard"] for shard in shards] == [0, 1]
    for shard in shards:
        assert shard["nodes"] == [f"http://127.0.0.1:{base + shard['shard'] * NODES + i}" for i in range(NODES)]
        assert shard["committed"] == shard["planned"] == 160
        assert shard["modelled_verifies_per_tx"] >= 1 and shard["verifies_per_committed_tx"] >= 1
    assert shards[0]["credited_in"] == shards[1]["cross_planned"]
    assert shards[1]["credited_in"] == shards[0]["cross_planned"]


def test_each_shards_nodes_log_under_their_shards_name_and_none_is_left(sharded_run):
    logs = sorted(path.name for path in (sharded_run["run"] / "logs").glob("shard-*.log"))
    assert logs == [f"shard-{k}-node-{i}.log" for k in range(SHARDS) for i in range(NODES)]
    assert processes_mentioning(str(sharded_run["tmp"])) == []
    node_log = (sharded_run["run"] / "logs" / "shard-1-node-0.log").read_text()
    assert "shard-1-node-0" in node_log and "Traceback" not in node_log


def test_cross_shard_is_refused_without_shards(tmp_path):
    result = run_command(["bash", str(REPO_ROOT / "devnet.sh"), "--no-monitor", "--cross-shard", "20",
                          "--dir", str(tmp_path / "devnet")], timeout=30)
    assert result.returncode == 2 and "--cross-shard needs --shards 2 or more" in result.stderr
