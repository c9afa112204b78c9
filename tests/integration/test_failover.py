"""The load generator fails over like a wallet (issue 12, part 3), against real node processes.

Before: each sender was bound to one node; with that node down for 5 s, 2,730 sends
failed and left their senders with nonce gaps, so later transactions were held and then
evicted. Now a batch a node does not answer is resent, the same signed bytes, to another
node: with one of three nodes SIGSTOPped for a few seconds under load, every planned
transaction is committed, none failed or lost, and the summary names the node that did
not answer and how many batches went elsewhere.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from tests.conftest import REPO_ROOT, VENV_BIN
from tests.integration.nodes import Devnet, Network, make_devnet

TPS = 200
DURATION_S = 10
STOPPED_S = 4           # the fault: one node frozen, mid-run


@pytest.fixture(scope="module")
def devnet(tmp_path_factory: pytest.TempPathFactory) -> Devnet:
    # 90 accounts, 30 per node: at 200 TPS a sender sends ~2 transactions a second, so
    # the batches a frozen node holds leave gaps well inside a node's 64-nonce window.
    return make_devnet(tmp_path_factory.mktemp("devnet"), validators=3, accounts=90, block_interval_ms=500,
                       producer_timeout_ms=500)


def test_generator_fails_over_when_a_node_is_stopped_and_nothing_is_lost(devnet, tmp_path: Path):
    out, live = tmp_path / "gen", tmp_path / "live.json"
    with Network(devnet, tmp_path) as net:
        net.start()
        frozen = net.nodes[1]
        generator = subprocess.Popen(
            [str(VENV_BIN / "qmemo"), "gen", "--genesis", str(devnet.genesis),
             "--accounts", str(devnet.path / "accounts.keys.json"),
             "--nodes", ",".join(node.url for node in net.nodes), "--tps", str(TPS), "--duration", str(DURATION_S),
             "--commit-timeout", "15", "--out", str(out), "--live", str(live), "--no-cache", "--quiet"],
            cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ, "COLUMNS": "200"})
        try:
            net.wait_until(lambda: live.exists() and orjson.loads(live.read_bytes()).get("sent", 0) >= TPS,
                           "the generator sending for a second", timeout=120)
            os.kill(frozen.process.pid, signal.SIGSTOP)
            try:
                net.wait_until(lambda: (orjson.loads(live.read_bytes()) if live.exists() else {}).get("failovers"),
                               "the generator failing over", timeout=30, nodes=[net.nodes[0], net.nodes[2]])
                time.sleep(STOPPED_S)      # the fault's length, not a wait for a condition
            finally:
                os.kill(frozen.process.pid, signal.SIGCONT)
            output = generator.communicate(timeout=180)[0].decode(errors="replace")
        finally:
            if generator.poll() is None:
                generator.kill()
        assert generator.returncode == 0, output + net.logs()
        summary = orjson.loads((out / "summary.json").read_bytes())
        counts = summary["counts"]
        planned = TPS * DURATION_S
        assert counts["planned"] == planned
        assert (counts["committed"], counts["failed"], counts["lost"], counts["rejected_total"]) == \
            (planned, 0, 0, 0), (counts, output, net.logs())
        failover = summary["failover"]
        assert failover["failovers"] >= 1 and failover["failover_txs"] >= 1
        assert set(failover["node_failures"]) == {frozen.url}
        assert "failed over to another node" in output
        # Nothing committed twice, and the chain the nodes agree on holds every planned id.
        net.wait_until(lambda: len({tip for tip in net.tips() if tip}) == 1, "the nodes agreeing on a tip", 60)
        committed = net.committed_ids(net.nodes[0])
        assert len(committed) == len(set(committed))
        ids = [line.split(",")[1] for line in (out / "transactions.csv").read_text().splitlines()[1:]]
        assert set(ids) <= set(committed)
        print(f"generator failover, {frozen.name} stopped {STOPPED_S} s: {planned} planned, {counts['accepted']} "
              f"accepted, {counts['committed']} committed, {counts['lost']} lost, {counts['failed']} failed, "
              f"{failover['failovers']} batches ({failover['failover_txs']} txs) failed over")    # with -s
