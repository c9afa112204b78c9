"""qmemo.net.client against a real `qmemo node` on loopback: each call answers with the
values of qmemo.api_schema, the same classes the node fills in; and each way a node can
fail a client - no answer, an error status, a document of another version - is the
error that names it."""

from __future__ import annotations

import asyncio
import time

import orjson
import pytest
from aiohttp import web

from qmemo.api_schema import COMMITTED, METRICS_SCHEMA, STATUS_SCHEMA, Health, TxCounts
from qmemo.core.merkle import verify_proof
from qmemo.errors import NodeApiError, NodeRefused, NodeUnreachable
from qmemo.net.client import base_url, open_clients
from qmemo.net.wire import encode_tx_batch
from tests.integration.nodes import Devnet, Network, Wallet, free_port, make_devnet


@pytest.fixture(scope="module")
def devnet(tmp_path_factory: pytest.TempPathFactory) -> Devnet:
    return make_devnet(tmp_path_factory.mktemp("devnet"), validators=1, accounts=4)


@pytest.fixture(scope="module")
def network(devnet: Devnet, tmp_path_factory: pytest.TempPathFactory):
    with Network(devnet, tmp_path_factory.mktemp("nodes")) as network:
        network.start()
        yield network


async def until(predicate, what: str, timeout_s: float = 20.0):
    deadline = time.monotonic() + timeout_s
    while not (value := await predicate()):
        assert time.monotonic() < deadline, f"timed out after {timeout_s} s waiting for {what}"
        await asyncio.sleep(0.1)
    return value


async def test_every_call_answers_the_schemas_values(devnet: Devnet, network: Network):
    node = network.nodes[0]
    wallet = Wallet(devnet)
    txs = wallet.transfers(4)
    async with open_clients([node.url]) as (client,):
        assert await client.health() == Health(True, node.name)
        status = await client.status()
        assert (status.schema, status.node, status.chain_id, status.validator) == \
            (STATUS_SCHEMA, node.name, devnet.chain_id, 0)
        answer = await client.post_txs(encode_tx_batch([tx.encoded for tx in txs]))
        assert (answer.status, answer.counts()) == (200, TxCounts(4, 0, 0))

        async def committed():
            statuses = await client.tx_statuses([tx.id for tx in txs])
            return statuses if all(s.status == COMMITTED for s in statuses) else None

        statuses = await until(committed, "the four transactions committed")
        assert [s.tx_id for s in statuses] == [tx.id for tx in txs] and statuses[0].proof is None
        one = await client.tx_status(txs[0].id)
        assert one.height == statuses[0].height and verify_proof(one.merkle_root, one.tx_id, one.proof)
        (block,) = await client.blocks(one.height, 1)
        assert (block.height, block.hash, txs[0].id in block.tx_ids) == (one.height, one.block_hash, True)
        (summary,) = await client.blocks(one.height, 1, txs="none")
        assert (summary.hash, summary.tx_ids) == (block.hash, None)
        latest = await client.latest_block(txs="none")
        assert latest.height >= block.height
        (account,) = await client.accounts([devnet.address(0)])
        assert (account.address, account.pending_nonce) == (devnet.address(0), 1)
        metrics = await client.metrics()
        assert (metrics.schema, metrics.node, metrics.tx.accepted) == (METRICS_SCHEMA, node.name, 4)
        assert metrics.height >= block.height and "verify" in metrics.stages.by_stage


async def test_an_error_status_is_refused_with_the_nodes_own_code(network: Network):
    async with open_clients([network.nodes[0].url]) as (client,):
        with pytest.raises(NodeRefused) as refused:
            await client.blocks(1, 1000)         # over the 100 blocks a request may ask
    assert (refused.value.node_status, refused.value.node_code) == (400, "out_of_range")
    assert f"{network.nodes[0].url}/blocks" in str(refused.value)


async def test_no_answer_is_unreachable_naming_the_node_and_the_transport():
    url = base_url("127.0.0.1", free_port())     # nothing listens there
    async with open_clients([url], timeout_s=2.0) as (client,):
        with pytest.raises(NodeUnreachable) as unreachable:
            await client.status()
    assert unreachable.value.transport == "ClientConnectorError" and f"GET {url}/status" in str(unreachable.value)


async def test_a_node_of_another_version_is_named_not_half_read(aiohttp_server):
    async def metrics(request: web.Request) -> web.Response:
        return web.Response(body=orjson.dumps({"schema": "qmemo-node-metrics/0", "node": "old"}),
                            content_type="application/json")

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    server = await aiohttp_server(app)
    async with open_clients([str(server.make_url(""))]) as (client,):
        with pytest.raises(NodeApiError) as unreadable:
            await client.metrics()
    assert unreadable.value.code == "unreadable"
    assert "schema 'qmemo-node-metrics/0', expected 'qmemo-node-metrics/3'" in str(unreadable.value)
