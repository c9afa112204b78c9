"""Three real `qmemo node` processes on loopback: propagation, production, restarts, forks.

Each test makes its own devnet (500 ms blocks, 500 ms producer timeout), starts the nodes
as subprocesses on ephemeral ports, and waits for every outcome by polling a predicate
with a deadline; a failed wait names what it waited for and attaches each node's log.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from pathlib import Path

import orjson
import pytest

from tests.integration.nodes import Devnet, Network, NodeProcess, Wallet, http, make_devnet

pytestmark = pytest.mark.slow


@pytest.fixture
def devnet(tmp_path: Path) -> Devnet:
    return make_devnet(tmp_path / "devnet", validators=3, accounts=24)


def all_committed(net: Network, ids: set[str], nodes: list[NodeProcess] | None = None) -> bool:
    return all(ids <= set(net.committed_ids(node)) for node in nodes or net.nodes)


def same_tip(net: Network, nodes: list[NodeProcess] | None = None, at_least: int = 0) -> bool:
    tips = net.tips(nodes)
    return None not in tips and len(set(tips)) == 1 and tips[0][0] >= at_least


def submit(node: NodeProcess, transactions) -> set[str]:
    answer = node.post_txs(transactions)
    assert answer.status == 200, f"{node.name}: {answer.status} {answer.body[:300]!r}"
    document = answer.json()
    assert document["accepted"] == len(transactions), document
    return {tx.id.hex() for tx in transactions}


@pytest.mark.parametrize("event_loop", ["uvloop", "asyncio"])
def test_transactions_sent_to_one_node_are_committed_once_on_all(devnet, tmp_path, event_loop):
    """On either event loop (uvloop by default; asyncio's own with --event-loop asyncio)."""
    wallet = Wallet(devnet)
    with Network(devnet, tmp_path, extra=[] if event_loop == "uvloop" else ["--event-loop", "asyncio"]) as net:
        net.start()
        ids: set[str] = set()
        for _ in range(4):    # several requests, so they land in different blocks
            ids |= submit(net.nodes[0], wallet.transfers(30))
        net.wait_until(lambda: all_committed(net, ids), "every accepted transaction committed on every node")
        net.wait_until(lambda: same_tip(net, at_least=4), "identical tips, four blocks up")
        for node in net.nodes:
            counts = Counter(net.committed_ids(node))
            assert {tx_id: counts[tx_id] for tx_id in ids} == dict.fromkeys(ids, 1), f"{node.name}: not exactly once"
            metrics = node.get("/metrics")
            assert metrics["tx"]["accepted"] == len(ids), f"{node.name} admitted {metrics['tx']['accepted']}"
            assert metrics["tx"]["rejected"] == {} and metrics["tx"]["evicted"] == {}
            assert metrics["process"]["event_loop"] == event_loop
        # Every validator produces in its turn; one that missed a turn on a loaded machine (a
        # fallback validator fills it: docs/api.md, missed_slots) produces at its next one.
        net.wait_until(lambda: {b["producer"] for b in net.nodes[1].get("/blocks?from=1&limit=100&txs=none")["blocks"]}
                       == {0, 1, 2}, "every validator produced a block")
        receivers = [n.get("/metrics")["verify"]["cache"] for n in net.nodes]
        assert sum(c["hits"] for c in receivers) >= len(ids), "block validation reused admission's verifications"
        pushed = [n.get("/metrics")["blocks"]["pushed"]["ids"] for n in net.nodes]
        assert sum(pushed) >= 2 * 4, "blocks pushed to both peers as their ids"
        balances = [node.get(f"/account/{devnet.address(0).hex()}") for node in net.nodes]
        assert all(b == balances[0] for b in balances)


def test_killed_node_catches_up_and_stopped_node_resumes_from_its_store(devnet, tmp_path):
    wallet = Wallet(devnet)
    with Network(devnet, tmp_path) as net:
        net.start()
        node0, node1, node2 = net.nodes
        ids = submit(node0, wallet.transfers(20))
        net.wait_until(lambda: all_committed(net, ids), "first transactions committed everywhere")
        node2.kill()                                        # SIGKILL: no chance to flush anything
        ids |= submit(node0, wallet.transfers(20))
        height_when_killed = node0.height()
        net.wait_until(lambda: (node0.height() or 0) >= height_when_killed + 4, "the chain to move on without node-2",
                       nodes=[node0, node1])
        assert node1.stop() == 0, f"SIGTERM must exit 0\n{net.logs([node1])}"   # clean stop
        stopped_at = int(re.search(r"stopped at height (\d+)", node1.log_tail(3)).group(1))
        node2.start()
        node1.start()
        net.wait_until(lambda: all((n.try_get("/health") or {}).get("ready") for n in (node1, node2)),
                       "restarted nodes healthy")
        assert node1.get("/status")["height"] >= stopped_at, "node-1 resumed from where it stopped"
        ids |= submit(node0, wallet.transfers(20))
        net.wait_until(lambda: all_committed(net, ids), "all transactions committed on every node")
        net.wait_until(lambda: same_tip(net, at_least=height_when_killed + 4), "identical tips after the restarts")


def test_a_devnet_stopped_and_started_again_keeps_every_committed_transaction(devnet, tmp_path):
    wallet = Wallet(devnet)
    with Network(devnet, tmp_path) as net:
        net.start()
        ids = submit(net.nodes[0], wallet.transfers(30))
        net.wait_until(lambda: all_committed(net, ids), "transactions committed everywhere")
        tips = [node.height() for node in net.nodes]
        for node in net.nodes:
            assert node.stop() == 0, f"{node.name} did not stop cleanly\n{net.logs([node])}"
        net.start()
        assert all(node.height() >= tip for node, tip in zip(net.nodes, tips)), "no node lost a block"
        assert all_committed(net, ids), "every committed transaction is still in every chain"
        ids |= submit(net.nodes[1], wallet.transfers(10))
        net.wait_until(lambda: all_committed(net, ids) and same_tip(net), "the chain goes on after the restart")


def test_a_producer_that_is_down_does_not_stop_the_chain(devnet, tmp_path):
    wallet = Wallet(devnet)
    with Network(devnet, tmp_path) as net:
        net.start()
        down = net.nodes[1]
        down.stop()
        alive = [net.nodes[0], net.nodes[2]]
        start = alive[0].height() or 0
        ids = submit(alive[1], wallet.transfers(20))
        net.wait_until(lambda: (alive[0].height() or 0) >= start + 6, "six more blocks without validator 1",
                       nodes=alive)
        net.wait_until(lambda: all_committed(net, ids, alive), "transactions committed without validator 1",
                       nodes=alive)
        net.wait_until(lambda: same_tip(net, alive), "the two live nodes agree", nodes=alive)
        blocks = alive[0].get(f"/blocks?from={start + 1}&limit=6&txs=ids")["blocks"]
        assert 1 not in {b["producer"] for b in blocks}
        metrics = alive[0].get("/metrics")
        assert metrics["blocks"]["missed_slots"] >= 1


def _genesis(devnet: Devnet) -> tuple[int, bytes]:
    document = orjson.loads(devnet.genesis.read_bytes())
    from qmemo.crypto.verifier import load_genesis

    return document["genesis_time_ms"], load_genesis(devnet.genesis).hash


def push(node: NodeProcess, block) -> str:
    answer = http("POST", node.url + "/peer/block", block.encode(), "application/octet-stream")
    assert answer.status == 200, f"{node.name}: {answer.status} {answer.body!r}"
    return answer.json()["status"]


def test_equal_branches_converge_on_the_earlier_window(devnet, tmp_path):
    """Observers (nodes that never produce) fed two blocks for height 1: every node ends on
    the primary's (the earlier window), whichever it saw first."""
    genesis_ms, genesis_hash = _genesis(devnet)
    with Network(devnet, tmp_path, key=devnet.observer_key()) as net:
        net.start()
        n0, n1, n2 = net.nodes
        # Real time, on purpose: these nodes are `qmemo node` processes, and a clock cannot be
        # handed across a process boundary (in-process tests drive NodeConfig.clock instead,
        # test_node_api.py). A node refuses a block stamped past its own clock, so we wait,
        # by predicate, until the wall reaches the window: about a second after genesis.
        net.wait_until(lambda: time.time() * 1000 > genesis_ms + 1100, "validator 1's window for height 1")
        primary = devnet.block(height=1, previous_hash=genesis_hash, timestamp_ms=genesis_ms + 500, producer=0)
        fallback = devnet.block(height=1, previous_hash=genesis_hash, timestamp_ms=genesis_ms + 1000, producer=1)
        assert push(n2, fallback) == "accepted"
        for node in (n0, n1):
            assert push(node, primary) in ("accepted", "known")
        net.wait_until(lambda: net.tips() == [(1, primary.hash.hex())] * 3, "every node on the primary's block")
        assert sum(node.get("/metrics")["blocks"]["reorgs"] for node in net.nodes) >= 1, "someone switched"


def test_longer_branch_wins_on_every_node(devnet, tmp_path):
    """node-2 builds a two-block branch while the others hold a one-block one; once they can
    reach it, all three end on the longer branch."""
    genesis_ms, genesis_hash = _genesis(devnet)
    with Network(devnet, tmp_path, key=devnet.observer_key()) as net:
        n0, n1, n2 = net.nodes
        n2.peers = []                                   # node-2 does not sync from the others
        net.start([n0, n1])
        # Real time, as in the test above: subprocess nodes read the wall clock.
        net.wait_until(lambda: time.time() * 1000 > genesis_ms + 1600, "validator 1's window for height 2")
        primary = devnet.block(height=1, previous_hash=genesis_hash, timestamp_ms=genesis_ms + 500, producer=0)
        fallback = devnet.block(height=1, previous_hash=genesis_hash, timestamp_ms=genesis_ms + 1000, producer=1)
        child = devnet.block(height=2, previous_hash=fallback.hash, timestamp_ms=genesis_ms + 1500, producer=1)
        assert push(n0, primary) == "accepted"
        net.wait_until(lambda: net.tips([n0, n1]) == [(1, primary.hash.hex())] * 2, "node-1 synced the primary's block",
                       nodes=[n0, n1])
        net.start([n2])                                  # the others list it as a peer: now they reach it
        assert push(n2, fallback) == "accepted" and push(n2, child) == "accepted"
        net.wait_until(lambda: net.tips() == [(2, child.hash.hex())] * 3, "every node on the longer branch")
        assert n0.get("/metrics")["blocks"]["reorgs"] == 1 and n1.get("/metrics")["blocks"]["reorgs"] == 1
        assert n0.get("/metrics")["tx"]["committed"] == 0


def test_accepted_uncommitted_transactions_survive_a_clean_restart(devnet, tmp_path):
    """A transaction held for a nonce gap is accepted but in no block; after SIGTERM and a
    restart the node still has it, and commits it once the gap is filled."""
    wallet = Wallet(devnet)
    with Network(devnet, tmp_path, count=1) as net:
        net.start()
        node = net.nodes[0]
        first, second = wallet.transfer(3, 4, nonce=0), wallet.transfer(3, 4, nonce=1)
        held = submit(node, [second])                        # nonce 1 before nonce 0: held, not in a block
        assert node.get(f"/tx/{second.id.hex()}")["status"] == "held"
        assert node.stop() == 0, f"SIGTERM must exit 0\n{net.logs([node])}"
        net.start()
        assert node.get(f"/tx/{second.id.hex()}")["status"] == "held", net.logs([node])
        ids = held | submit(node, [first])
        net.wait_until(lambda: all_committed(net, ids), "both transactions committed after the restart")
