"""A real node's door (qmemo.node.door): past what its next block carries it refuses a
client's batch 503 `busy`, before reading it, with how long to wait; /metrics shows the
bound and the refusal; once a block has taken the pool the same batch is accepted."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.nodes import Network, NodeProcess, Wallet, make_devnet

BLOCK_TXS = 20


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    root = tmp_path_factory.mktemp("door")
    # One validator, a block every 3 s of at most 20 transactions: the door's pool bound is 20.
    devnet = make_devnet(root / "devnet", validators=1, accounts=4, block_interval_ms=3000,
                         producer_timeout_ms=3000, max_block_transactions=BLOCK_TXS)
    with Network(devnet, root) as network:
        network.start()
        yield network.nodes[0]


def test_past_one_block_of_pool_a_batch_is_refused_busy_unread_then_taken_after_the_block(node: NodeProcess):
    wallet = Wallet(node.devnet)
    height = node.get("/status")["height"]
    while node.get("/status")["height"] == height:       # just after a block: ~3 s before the next
        time.sleep(0.05)
    first = node.post_txs(wallet.transfers(BLOCK_TXS, senders=[0, 1]))
    assert first.status == 200 and first.json()["accepted"] == BLOCK_TXS
    late = wallet.transfers(2, senders=[2, 3])
    refused = node.post_txs(late)
    assert refused.status == 503, refused.body
    document = refused.json()
    assert document["error"] == "busy" and 0 < document["retry_after_ms"] <= 3000
    assert "the next block carries" in document["detail"] and refused.headers.get("Retry-After")
    door = node.get("/metrics")["door"]
    assert door["pool_limit"] == BLOCK_TXS and door["refused"]["pool"] == 1
    assert node.get("/metrics")["tx"]["received"] == BLOCK_TXS       # the refused batch was never read
    time.sleep(document["retry_after_ms"] / 1000 + 0.5)              # the next block takes the pool
    again = node.post_txs(late)
    assert again.status == 200 and again.json()["accepted"] == 2
