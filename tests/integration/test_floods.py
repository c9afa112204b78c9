"""Floods and limits a node must hold for free.

The held-nonce queue: every held transaction must pay the genesis's minimum fee and be
payable together with what its sender has pending and held, within per-sender and global
caps, so never-funded keys cannot fill it and lock a funded account's gap-1 transaction
out (docs/api.md, section 8, "Holding is not free", has the attack that showed it).

Peer and parser limits: relayed batches get the client caps; a pushed block's header is
judged before its body is decoded (a 32 MB garbage block is refused unread);
a long URL is answered in JSON; what aiohttp's parser refuses itself (a URL past its line
limit, a body running past its Content-Length) is one WARNING line, never a traceback;
the `/txs` envelope refuses unknown keys.

The node is an observer (it never produces), so the chain stands still and every answer
depends only on what the test sent.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path

import orjson
import pytest
from aiohttp import web

from qmemo.core.block import BlockHeader
from qmemo.core.transaction import Transaction
from qmemo.crypto.keys import load_keys
from qmemo.crypto.schemes import get_scheme
from qmemo.net.app import make_app
from qmemo.net.connections import NodeRunner
from qmemo.net.wire import encode_tx_batch
from tests.integration.nodes import Devnet, ManualClock, Wallet, make_devnet, running_node

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


def genesis_time_ms(devnet: Devnet) -> int:
    return orjson.loads(devnet.genesis.read_bytes())["genesis_time_ms"]


@pytest.fixture
async def observer(devnet: Devnet, tmp_path: Path, aiohttp_client):
    """Its clock stands where validator 0's window for block 1 is open."""
    clock = ManualClock(genesis_time_ms(devnet) + 600)
    async with running_node(devnet, tmp_path / "data", devnet.observer_key(), clock=clock) as node:
        yield node, await aiohttp_client(make_app(node))


@pytest.fixture
async def small(devnet: Devnet, tmp_path: Path, aiohttp_client):
    """An observer taking 8 transactions and 64 KiB per request."""
    async with running_node(devnet, tmp_path / "data", devnet.observer_key(), max_batch_txs=8,
                            max_body_bytes=64 * 1024) as node:
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
    assert node.ledger.sizes()[:2] == (0, 0)     # nothing pending, nothing held

    wallet = Wallet(devnet)
    gap_one = wallet.transfer(1, 2, nonce=1)            # a funded account, one nonce ahead
    assert await post_tx(client, gap_one) == (200, {"id": gap_one.id.hex(), "status": "accepted"})
    assert (await (await client.get(f"/tx/{gap_one.id.hex()}")).json())["status"] == "held"
    first = wallet.transfer(1, 2, nonce=0)              # fills the gap: both pending
    assert (await post_tx(client, first))[1]["status"] == "accepted"
    assert (await (await client.get(f"/tx/{gap_one.id.hex()}")).json())["status"] == "pending"
    print(f"held flood: {len(flood):,} sent from {FLOOD_KEYS} never-funded keys, {accepted} accepted "
          f"({codes}); the funded account's gap-1 transaction held, then pending")   # the figures, with -s


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
        assert node.ledger.sizes()[1] == 3         # held


# --- peer and parser limits ----------------------------------------------------------------------

def signed_header(devnet: Devnet, *, producer: int, tx_count: int, genesis_hash: bytes) -> BlockHeader:
    """A block-1 header for validator 0's slot, signed by `producer`, claiming `tx_count` transactions."""
    key = load_keys(devnet.validator_key(producer))[0]
    scheme = get_scheme(key.scheme)
    header = BlockHeader(1, devnet.chain_id, 1, genesis_hash, genesis_time_ms(devnet) + 500, producer, tx_count,
                         bytes(64))
    return header.signed(lambda digest: scheme.sign(key.secret_key, digest))


@pytest.mark.parametrize("producer, tx_count, body_bytes, code", [
    (0, 4000, 32 << 20, "block_too_large"),         # more bytes than 4,000 transactions can fill
    (0, 5000, 1 << 20, "too_many_transactions"),    # a count over the genesis limit
    (2, 4000, 1 << 20, "wrong_producer"),           # not validator 2's turn: its body is never read
])
async def test_a_pushed_block_is_judged_by_its_header_before_its_body_is_decoded(devnet, observer, producer,
                                                                                 tx_count, body_bytes, code):
    node, client = observer
    header = signed_header(devnet, producer=producer, tx_count=tx_count, genesis_hash=node.genesis.hash)
    garbage = bytes([0xA5]) * body_bytes
    response = await client.post("/peer/block", data=header.encoded + garbage, headers=BINARY)
    assert (response.status, (await response.json())["error"]) == (422, code)
    assert node.metrics.validation["decode"].count == 0      # the body was never decoded
    assert node.metrics.blocks_rejected == {code: 1} and node.chain.height == 0


async def test_relayed_batches_get_the_client_caps(devnet, small):
    _, client = small
    wallet = Wallet(devnet)
    nine = encode_tx_batch([t.encoded for t in wallet.transfers(9)])         # the node takes 8 per request
    response = await client.post("/peer/txs", data=nine, headers=BINARY)
    assert (response.status, (await response.json())["error"]) == (413, "batch_too_large")
    response = await client.post("/peer/txs", data=bytes(64 * 1024 + 1), headers=BINARY)
    assert (response.status, (await response.json())["error"]) == (413, "body_too_large")


async def test_a_chunked_body_is_read_whole_and_cut_off_at_the_cap(devnet, small):
    # No Content-Length: read_body joins the chunks itself and stops at the cap.
    _, client = small

    async def chunks(data: bytes, size: int = 1000):
        for start in range(0, len(data), size):
            yield data[start:start + size]
    batch = encode_tx_batch([t.encoded for t in Wallet(devnet).transfers(3)])
    response = await client.post("/txs", data=chunks(batch), headers=BINARY)
    assert response.status == 200 and (await response.json())["accepted"] == 3
    response = await client.post("/peer/txs", data=chunks(bytes(64 * 1024 + 1), 4096), headers=BINARY)
    assert (response.status, (await response.json())["error"]) == (413, "body_too_large")


async def test_txs_envelope_with_an_unknown_key_is_refused_naming_it(observer):
    _, client = observer
    response = await client.post("/txs", data=orjson.dumps({"transactions": [], "priority": "high"}),
                                 headers={"Content-Type": "application/json"})
    body = await response.json()
    assert (response.status, body["error"]) == (400, "malformed") and "'priority'" in body["detail"]


async def raw_exchange(port: int, request: bytes) -> bytes:
    """Send raw bytes, read until the server closes or goes quiet."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    received = b""
    try:
        while chunk := await asyncio.wait_for(reader.read(65536), 5):
            received += chunk
    except TimeoutError:
        pass
    writer.close()
    return received


def status_of(answer: bytes) -> int:
    """The status code of the first response in raw HTTP bytes."""
    return int(answer.split(b"\r\n", 1)[0].split(b" ")[1])


def tracebacks(records: list[logging.LogRecord]) -> list[str]:
    return [record.getMessage() for record in records if record.exc_info or "Traceback" in record.getMessage()]


async def test_a_long_url_is_answered_in_json_and_parser_faults_are_one_warning_without_traceback(
        observer, caplog):
    _, client = observer
    caplog.set_level(logging.DEBUG)
    response = await client.get("/tx/" + "ab" * 6 * 1024)                  # a 12 KB URL
    assert response.status == 414 and (await response.json())["error"] == "url_too_long"

    port = client.server.port
    for _ in range(3):      # past aiohttp's own line limit: its text/plain 400, logged once
        answer = await raw_exchange(port, b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        assert status_of(answer) == 400
    body = b'{"transactions": []}'
    past_its_length = (b"POST /txs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                       b"Content-Length: %d\r\n\r\n%s" % (len(body), body)) + b"\x00garbage past the body\r\n\r\n"
    answer = await raw_exchange(port, past_its_length)
    assert 400 <= status_of(answer) < 500
    assert tracebacks(caplog.records) == []
    faults = [r for r in caplog.records if "client fault" in r.getMessage()]
    assert faults and all(r.levelno == logging.WARNING for r in faults)
    assert len(faults) < 4           # rate-limited: not one line per bad request


PARSER_FAULTS = [   # (what, raw request, status, code): refused by aiohttp's parser or while the body is read
    ("URL past the parser's line limit", b"GET /" + b"a" * 100_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
     414, "url_too_long"),
    ("header past the parser's limit", b"GET /status HTTP/1.1\r\nHost: x\r\nX-A: " + b"a" * 100_000 + b"\r\n\r\n",
     431, "header_too_large"),
    ("body running past its Content-Length", b"POST /txs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
     b"Content-Length: 20\r\n\r\n{\"transactions\": []}\x00garbage past the body\r\n\r\n", 400, "bad_request_line"),
    ("bad chunk size", b"POST /txs HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
     400, "bad_http"),        # llhttp reports it as a generic parse error
    ("header without a colon", b"GET /status HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n", 400, "bad_http"),
    ("Content-Length not a number", b"POST /txs HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", 400, "bad_http"),
    ("body that does not decode as its Content-Encoding", b"POST /txs HTTP/1.1\r\nHost: x\r\n"
     b"Content-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: 10\r\n\r\n0123456789",
     400, "bad_body"),
    ("TLS on the HTTP port", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(40) + b"\r\n\r\n",
     400, "bad_request_line"),
]


@asynccontextmanager
async def served(node):
    """`node` behind the runner `qmemo node` uses (NodeRunner), on an ephemeral port."""
    runner = NodeRunner(make_app(node), access_log=None, max_connections=node.config.max_connections,
                        send_timeout_s=node.config.send_timeout_s)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield site._server.sockets[0].getsockname()[1]
    finally:
        await runner.cleanup()


async def test_parser_faults_are_answered_in_json_with_their_status_and_logged_as_one_warning(observer, caplog):
    node, _ = observer
    caplog.set_level(logging.DEBUG)
    async with served(node) as port:
        for what, request, status, code in PARSER_FAULTS:
            head, _, body = (await raw_exchange(port, request)).partition(b"\r\n\r\n")
            assert status_of(head) == status and b"content-type: application/json" in head.lower(), (what, head)
            assert orjson.loads(body)["error"] == code, (what, body)
        answer = await raw_exchange(port, b"GET /status HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        assert status_of(answer) == 200         # the node serves on
    assert tracebacks(caplog.records) == []
    faults = [r for r in caplog.records if "client fault" in r.getMessage()]
    assert faults and all(r.levelno == logging.WARNING and r.node == node.name for r in faults)
    assert len(faults) < len(PARSER_FAULTS)     # rate-limited: not one line per bad request
    print(f"parser faults: {len(PARSER_FAULTS)} bad requests (long URL, long header, body past its length, ...), "
          f"all JSON 4xx; {len(faults)} WARNING line(s), 0 tracebacks")                  # the figures, with -s
