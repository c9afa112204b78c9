"""Floods a node must survive for free: the held-nonce queue (issue 12, part 4).

Before: 320 never-funded keys sending zero-amount, zero-fee transactions with nonces 1-64
were all "accepted" into the held queue (20,000 of them), and for the next 30 s a funded
account's legitimate gap-1 transaction was refused with `nonce_gap`. Now every held
transaction must pay the genesis's minimum fee and be payable together with what its
sender has pending and held, within per-sender and global caps.

The node is an observer (it never produces), so the chain stands still and every answer
depends only on what the test sent.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson
import pytest

from qmemo.core.transaction import Transaction, derive_address
from qmemo.crypto.schemes import get_scheme
from qmemo.net.app import make_app
from qmemo.net.wire import encode_tx_batch
from tests.integration.nodes import Devnet, Wallet, make_devnet, running_node

BINARY = {"Content-Type": "application/octet-stream"}
FLOOD_KEYS = 320
FLOOD_NONCES = range(1, 65)
BALANCE = 10**9


@pytest.fixture(scope="module")
def devnet(tmp_path_factory: pytest.TempPathFactory) -> Devnet:
    return make_devnet(tmp_path_factory.mktemp("devnet"), validators=3, accounts=6, balance=BALANCE)


def unfunded_flood(devnet: Devnet, keys: int, fee: int) -> list[Transaction]:
    """`keys` fresh keys nobody funded, each signing zero-amount transfers with nonces 1-64."""
    scheme = get_scheme("Falcon-512")
    recipient = devnet.address(0)

    def one_key(_: int) -> list[Transaction]:
        key = scheme.keypair()
        return [Transaction(devnet.chain_id, devnet.scheme_id, key.public_key, nonce, recipient, 0, fee, b"")
                .signed(lambda digest: scheme.sign(key.secret_key, digest)) for nonce in FLOOD_NONCES]

    with ThreadPoolExecutor(2) as pool:
        return [tx for txs in pool.map(one_key, range(keys)) for tx in txs]


async def post_batches(client, transactions: list[Transaction], size: int = 1000) -> tuple[int, dict[str, int]]:
    """Send in binary batches: how many were accepted, and the rejections by code."""
    accepted, codes = 0, {}
    for first in range(0, len(transactions), size):
        response = await client.post("/txs", headers=BINARY,
                                     data=encode_tx_batch([t.encoded for t in transactions[first:first + size]]))
        assert response.status == 200, await response.text()
        body = await response.json()
        accepted += body["accepted"]
        for result in body["results"]:
            if result["status"] == "rejected":
                codes[result["code"]] = codes.get(result["code"], 0) + 1
    return accepted, codes


async def post_tx(client, tx: Transaction) -> tuple[int, dict]:
    response = await client.post("/tx", data=orjson.dumps(tx.to_json()), headers={"Content-Type": "application/json"})
    return response.status, await response.json()


@pytest.fixture
async def observer(devnet: Devnet, tmp_path: Path, aiohttp_client):
    async with running_node(devnet, tmp_path / "data", devnet.observer_key()) as node:
        yield node, await aiohttp_client(make_app(node))


@pytest.fixture
async def client(observer):
    return observer[1]


async def test_held_queue_flood_from_never_funded_keys_is_refused_and_a_funded_gap_is_still_held(devnet, observer):
    node, client = observer
    flood = unfunded_flood(devnet, FLOOD_KEYS, fee=0)
    assert len(flood) == 20_480
    accepted, codes = await post_batches(client, flood)
    assert (accepted, codes) == (0, {"fee_too_low": len(flood)})
    assert len(node.admission.future) == 0 and len(node.mempool) == 0

    wallet = Wallet(devnet)
    gap_one = wallet.transfer(1, 2, nonce=1)            # a funded account, one nonce ahead
    assert await post_tx(client, gap_one) == (200, {"id": gap_one.id.hex(), "status": "accepted"})
    assert (await (await client.get(f"/tx/{gap_one.id.hex()}")).json())["status"] == "queued"
    first = wallet.transfer(1, 2, nonce=0)              # fills the gap: both pending
    assert (await post_tx(client, first))[1]["status"] == "accepted"
    assert (await (await client.get(f"/tx/{gap_one.id.hex()}")).json())["status"] == "pending"


async def test_never_funded_keys_paying_the_minimum_fee_cannot_hold_anything(devnet, client):
    flood = unfunded_flood(devnet, 8, fee=1)
    accepted, codes = await post_batches(client, flood)
    assert (accepted, codes) == (0, {"insufficient_balance": len(flood)})


async def test_held_transactions_must_be_payable_together_with_the_pending_ones(devnet, client):
    wallet = Wallet(devnet)
    pending = wallet.transfer(3, 4, BALANCE // 2, nonce=0)
    held = [wallet.transfer(3, 4, BALANCE // 4, nonce=n) for n in (2, 3)]   # 1/2 + 1/4 + 1/4 + fees > balance
    assert (await post_tx(client, pending))[1]["status"] == "accepted"
    assert (await post_tx(client, held[0]))[1]["status"] == "accepted"
    status, body = await post_tx(client, held[1])
    assert (status, body["error"]) == (422, "insufficient_balance")
    # The same in one batch: the held ones after a candidate count what came before them.
    batch = [wallet.transfer(4, 3, BALANCE // 2, nonce=0)] + [wallet.transfer(4, 3, BALANCE // 4, nonce=n)
                                                              for n in (2, 3)]
    accepted, codes = await post_batches(client, batch)
    assert (accepted, codes) == (2, {"insufficient_balance": 1})


async def test_held_queue_caps_per_sender_and_in_all_answer_429(devnet, tmp_path, aiohttp_client):
    async with running_node(devnet, tmp_path / "data", devnet.observer_key(),
                            mempool_held_per_sender=2, mempool_held_max_txs=3) as node:
        client = await aiohttp_client(make_app(node))
        wallet = Wallet(devnet)
        for nonce in (1, 2):
            assert (await post_tx(client, wallet.transfer(0, 1, nonce=nonce)))[1]["status"] == "accepted"
        status, body = await post_tx(client, wallet.transfer(0, 1, nonce=3))
        assert (status, body["error"]) == (429, "held_sender_limit")
        assert (await post_tx(client, wallet.transfer(1, 0, nonce=1)))[1]["status"] == "accepted"
        status, body = await post_tx(client, wallet.transfer(2, 0, nonce=1))
        assert (status, body["error"]) == (429, "held_full")
        assert len(node.admission.future) == 3
