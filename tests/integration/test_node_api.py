"""One node's HTTP API, in-process (aiohttp test client, real liboqs, SQLite in a tmp dir).

The bad-request table: every way a client can get a transaction wrong, with the status
and reason code the node must answer - never a 500, never a stuck node - and each
rejection counted by reason in /metrics. Then the happy paths: batch results in input
order, accounts, blocks, transaction status with an inclusion proof, metrics in both
formats, and the block checks a peer's push goes through.
"""

from __future__ import annotations

import gc
import os
import time
import weakref
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from qmemo.api_schema import decode_metrics
from qmemo.core.block import Block, BlockIds
from qmemo.core.codec import U64_MAX
from qmemo.core.merkle import MerkleProof, verify_proof
from qmemo.core.transaction import Transaction
from qmemo.crypto.verifier import load_genesis
from qmemo.net import handlers
from qmemo.net.app import make_app
from qmemo.net.wire import decode_block_batch, encode_tx_batch
from qmemo.node.peers import PeerTip
from qmemo.node.stages import OTHER, STAGES
from tests.integration.nodes import Devnet, ManualClock, Wallet, make_devnet, running_node

BINARY = {"Content-Type": "application/octet-stream"}


@pytest.fixture(scope="module")
def devnet(tmp_path_factory: pytest.TempPathFactory) -> Devnet:
    """Three validators (500 ms blocks); the in-process node is validator 0 or an observer."""
    return make_devnet(tmp_path_factory.mktemp("devnet"), validators=3, accounts=12)


@pytest.fixture
async def producer(devnet: Devnet, tmp_path: Path, aiohttp_client):
    """Validator 0, alone: it produces in its own turns and, with the others absent, in theirs."""
    async with running_node(devnet, tmp_path / "data", devnet.validator_key(0),
                            max_batch_txs=8, max_body_bytes=64 * 1024, mempool_held_window=4) as node:
        yield node, await aiohttp_client(make_app(node))


@pytest.fixture
async def observer(devnet: Devnet, tmp_path: Path, aiohttp_client):
    """A node that validates blocks pushed to it but never produces: the test makes the chain.
    It keeps 3 blocks undoable, as a node with peers does (it has none). Its clock stands
    where the genesis's first producer windows (validator 0's and 1's) are open, so no
    test waits for real time to get there."""
    clock = ManualClock(_genesis_time_ms(devnet) + 1100)
    async with running_node(devnet, tmp_path / "data", devnet.observer_key(), finality_depth=3, clock=clock) as node:
        yield node, await aiohttp_client(make_app(node))


async def wait_for(predicate, what: str, timeout: float = 15.0):
    """Poll an async predicate until it is truthy, or fail naming `what`."""
    import asyncio

    deadline = time.monotonic() + timeout
    while True:
        value = await predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        await asyncio.sleep(0.05)


async def post_json(client, path: str, document) -> tuple[int, dict, dict]:
    response = await client.post(path, data=orjson.dumps(document), headers={"Content-Type": "application/json"})
    return response.status, await response.json(), dict(response.headers)


async def tx_status(client, tx: Transaction) -> str:
    return (await (await client.get(f"/tx/{tx.id.hex()}")).json())["status"]


# --- the bad-request table ------------------------------------------------------------------

def _resigned(wallet: Wallet, tx: Transaction, **changes) -> Transaction:
    """`tx` with fields changed, signed again by its sender (so only the change is wrong)."""
    account = next(i for i, key in enumerate(wallet.devnet.accounts) if key.public_key == tx.public_key)
    secret = wallet.devnet.accounts[account].secret_key
    return replace(tx, **changes).signed(lambda digest: wallet.scheme.sign(secret, digest))


def _bad_signature(tx: Transaction) -> Transaction:
    """`tx` with one bit of its signature flipped."""
    return replace(tx, signature=tx.signature[:-1] + bytes([tx.signature[-1] ^ 1]))


# (case, how to make the request body from a wallet, expected status, expected reason)
BAD_TX_CASES = [
    ("bad signature", lambda w: _bad_signature(w.transfer(0, 1)), 422, "bad_signature"),
    ("wrong key for the sender", lambda w: w.transfer(1, 2, signer=2), 422, "bad_signature"),
    ("nonce gap past the window", lambda w: w.transfer(2, 1, nonce=50), 422, "nonce_gap"),
    ("amount + fee overflows a u64", lambda w: w.transfer(3, 1, amount=U64_MAX, fee=1), 422, "amount_overflow"),
    ("insufficient balance", lambda w: w.transfer(4, 1, amount=10**12), 422, "insufficient_balance"),
    ("unknown scheme", lambda w: _resigned(w, w.transfer(5, 1), scheme_id=99), 422, "unknown_scheme"),
    ("scheme not allowed", lambda w: _resigned(w, w.transfer(6, 1), scheme_id=100), 422, "scheme_not_allowed"),
    ("another chain's id", lambda w: w.transfer(7, 1, chain_id=w.devnet.chain_id + 1), 422, "wrong_chain_id"),
]


@pytest.mark.parametrize("case, make, status, reason", BAD_TX_CASES, ids=[c[0] for c in BAD_TX_CASES])
async def test_bad_transaction_is_refused_with_its_reason(producer, devnet, case, make, status, reason):
    node, client = producer
    tx = make(Wallet(devnet))
    got_status, body, _ = await post_json(client, "/tx", tx.to_json())
    assert (got_status, body.get("error")) == (status, reason), body
    assert body["status"] == "rejected" and body["code"] == reason and body["detail"]
    metrics = await (await client.get("/metrics")).json()
    assert metrics["tx"]["rejected"][reason] == 1
    assert metrics["tx"]["accepted"] == 0


def _tx_json(devnet: Devnet) -> dict:
    return Wallet(devnet).transfer(0, 1).to_json()


# (case, method, path, content type, body maker, expected status, expected error code)
BAD_REQUEST_CASES = [
    ("malformed JSON", "/tx", "application/json", lambda d: b'{"chain_id": 1,', 400, "malformed_json"),
    ("not an object", "/tx", "application/json", lambda d: b"[1, 2]", 400, "malformed"),
    ("a field of the wrong type", "/tx", "application/json",
     lambda d: orjson.dumps({**_tx_json(d), "nonce": "0"}), 400, "malformed"),
    ("a missing field", "/tx", "application/json",
     lambda d: orjson.dumps({k: v for k, v in _tx_json(d).items() if k != "fee"}), 400, "malformed"),
    ("uppercase hex", "/tx", "application/json",
     lambda d: orjson.dumps({**_tx_json(d), "recipient": _tx_json(d)["recipient"].upper()}), 400, "malformed"),
    ("a negative amount", "/tx", "application/json",
     lambda d: orjson.dumps({**_tx_json(d), "amount": -1}), 400, "out_of_range"),
    ("oversized body", "/txs", "application/octet-stream", lambda d: bytes(65 * 1024), 413, "body_too_large"),
    ("batch over the limit", "/txs", "application/octet-stream",
     lambda d: encode_tx_batch([tx.encoded for tx in Wallet(d).transfers(9)]), 413, "batch_too_large"),
    ("JSON batch over the limit", "/txs", "application/json",
     lambda d: orjson.dumps({"transactions": [tx.to_json() for tx in Wallet(d).transfers(9)]}), 413,
     "batch_too_large"),
    ("truncated binary frame", "/txs", "application/octet-stream",
     lambda d: encode_tx_batch([Wallet(d).transfer(0, 1).encoded])[:-5], 400, "truncated"),
    ("JSON batch without a list", "/txs", "application/json", lambda d: b'{"transactions": 5}', 400, "malformed"),
]


@pytest.mark.parametrize("case, path, content_type, make, status, code", BAD_REQUEST_CASES,
                         ids=[c[0] for c in BAD_REQUEST_CASES])
async def test_bad_request_answers_status_and_code(producer, devnet, case, path, content_type, make, status, code):
    _, client = producer
    response = await client.post(path, data=make(devnet), headers={"Content-Type": content_type})
    body = await response.json()
    assert (response.status, body.get("error")) == (status, code), body
    assert body["detail"]
    assert (await client.get("/health")).status == 200     # and the node still serves


@pytest.mark.parametrize("path, status, code", [
    ("/tx/nothex", 400, "malformed"),
    ("/tx/" + "ab" * 10, 400, "out_of_range"),
    ("/blocks?from=x", 400, "malformed"),
    ("/blocks?from=1&limit=1000", 400, "out_of_range"),
    ("/blocks?from=1&txs=some", 400, "malformed"),
    ("/account/00", 400, "out_of_range"),
    ("/block/abc", 400, "malformed"),
    ("/block/999999", 404, "not_found"),
    ("/no/such/route", 404, "not_found"),
])
async def test_bad_query_answers_json_error(producer, path, status, code):
    _, client = producer
    response = await client.get(path)
    body = await response.json()
    assert (response.status, body["error"]) == (status, code), body


async def test_binary_batch_results_come_in_input_order(producer, devnet):
    _, client = producer
    wallet = Wallet(devnet)
    good = wallet.transfer(0, 1)
    bad = _bad_signature(wallet.transfer(1, 2))
    second = wallet.transfer(0, 1)
    body = encode_tx_batch([good.encoded, b"\x01garbage", bad.encoded, second.encoded, good.encoded])
    response = await client.post("/txs", data=body, headers=BINARY)
    document = await response.json()
    assert response.status == 200
    statuses = [(r["id"], r["status"], r.get("code")) for r in document["results"]]
    assert statuses == [(good.id.hex(), "accepted", None), (None, "rejected", "truncated"),
                        (bad.id.hex(), "rejected", "bad_signature"), (second.id.hex(), "accepted", None),
                        (good.id.hex(), "duplicate", None)]
    assert (document["accepted"], document["duplicate"], document["rejected"]) == (2, 1, 2)


async def test_inline_verification_judges_like_the_pool(devnet, tmp_path, aiohttp_client):
    """verify_threads = 0: signatures checked on the event loop, same answers."""
    async with running_node(devnet, tmp_path / "data", devnet.observer_key(), verify_threads=0) as node:
        client = await aiohttp_client(make_app(node))
        wallet = Wallet(devnet)
        good, bad = wallet.transfer(0, 1), _bad_signature(wallet.transfer(1, 2))
        response = await client.post("/txs", data=encode_tx_batch([good.encoded, bad.encoded]), headers=BINARY)
        results = (await response.json())["results"]
        assert [(r["status"], r.get("code")) for r in results] == [("accepted", None), ("rejected", "bad_signature")]
        assert (await (await client.get("/metrics")).json())["verify"]["count"]["admission"] == 2


async def test_resubmission_is_a_duplicate_and_a_new_use_of_a_nonce_a_replay(producer, devnet):
    _, client = producer
    wallet = Wallet(devnet)
    tx = wallet.transfer(0, 1)
    assert (await post_json(client, "/tx", tx.to_json()))[1]["status"] == "accepted"
    assert (await post_json(client, "/tx", tx.to_json()))[1]["status"] == "duplicate"     # pending
    await wait_for(lambda: _is(client, tx, "committed"), "the transaction to be committed")
    assert (await post_json(client, "/tx", tx.to_json()))[1]["status"] == "duplicate"     # committed
    replay = wallet.transfer(0, 2, nonce=tx.nonce)        # another transaction with the used nonce
    status, body, _ = await post_json(client, "/tx", replay.to_json())
    assert (status, body["code"]) == (422, "replayed_nonce")


async def _is(client, tx: Transaction, status: str) -> bool:
    return await tx_status(client, tx) == status


async def test_nonces_ahead_are_held_until_the_gap_fills(producer, devnet):
    _, client = producer
    wallet = Wallet(devnet)
    first, second, third = wallet.transfer(0, 1), wallet.transfer(0, 1), wallet.transfer(0, 1)
    for tx in (third, second):           # overtaken: arrive before the nonce they follow
        status, body, _ = await post_json(client, "/tx", tx.to_json())
        assert (status, body["status"]) == (200, "accepted")
        assert await tx_status(client, tx) == "held"
    assert (await post_json(client, "/tx", first.to_json()))[1]["status"] == "accepted"
    for tx in (first, second, third):
        await wait_for(lambda tx=tx: _is(client, tx, "committed"), f"nonce {tx.nonce} committed")
    account = await (await client.get(f"/account/{devnet.address(0).hex()}")).json()
    assert (account["nonce"], account["pending_nonce"]) == (3, 3)


async def test_mempool_full_answers_429_with_retry_after(devnet, tmp_path, aiohttp_client):
    async with running_node(devnet, tmp_path / "data", devnet.observer_key(), mempool_max_txs=3) as node:
        client = await aiohttp_client(make_app(node))
        wallet = Wallet(devnet)
        response = await client.post("/txs", data=encode_tx_batch([t.encoded for t in wallet.transfers(3)]),
                                     headers=BINARY)
        assert (await response.json())["accepted"] == 3
        status, body, headers = await post_json(client, "/tx", wallet.transfer(5, 1).to_json())
        assert (status, body["error"]) == (429, "mempool_full")
        assert int(headers["Retry-After"]) >= 1


async def test_a_sender_at_its_limit_answers_429_with_retry_after(devnet, tmp_path, aiohttp_client):
    async with running_node(devnet, tmp_path / "data", devnet.observer_key(), mempool_max_per_sender=2) as node:
        client = await aiohttp_client(make_app(node))
        wallet = Wallet(devnet)
        for _ in range(2):
            assert (await post_json(client, "/tx", wallet.transfer(0, 1).to_json()))[0] == 200
        status, body, headers = await post_json(client, "/tx", wallet.transfer(0, 1).to_json())
        assert (status, body["error"]) == (429, "sender_limit")
        assert int(headers["Retry-After"]) >= 1


async def test_a_rejected_request_is_freed_without_the_cycle_collector(devnet, tmp_path):
    """A rejection keeps its error as a value, not its traceback: the traceback would hold
    the admission frame whose `outcomes` holds the rejection - a cycle keeping the whole
    request alive until the cycle collector runs. With it off, each error must die with
    its outcome: one from the cheap checks (decode, nonce) and one from the mempool add."""
    async with running_node(devnet, tmp_path / "data", devnet.observer_key(), mempool_max_per_sender=1) as node:
        wallet = Wallet(devnet)
        items = [b"\x01garbage", wallet.transfer(2, 1, nonce=500).encoded,
                 wallet.transfer(0, 1).encoded, wallet.transfer(0, 1).encoded]
        gc.disable()
        try:
            outcomes = await node.submit(items)
            assert [(o.status, o.error and o.error.code) for o in outcomes] == [
                ("rejected", "truncated"), ("rejected", "nonce_gap"), ("accepted", None), ("rejected", "sender_limit")]
            errors = [weakref.ref(o.error) for o in outcomes if o.error is not None]
            del outcomes
            assert [error() for error in errors] == [None, None, None]
        finally:
            gc.enable()


async def test_a_batch_of_items_and_the_same_binary_body_are_answered_alike(devnet, tmp_path):
    """The same mixed batch through `submit` (items, framed at the edge) on one fresh node
    and `submit_body` (a binary body) on another: the same outcomes, errors, counters,
    journal; the verdicts are in the ledger's verified set (a block with them would not
    verify them again); a rejection's error dies with its outcome, without the cycle collector."""
    from qmemo.frames import encode_frames

    wallet = Wallet(devnet)
    good = wallet.transfer(0, 1)
    items = [good.encoded, b"\x01garbage", _bad_signature(wallet.transfer(1, 2)).encoded,
             wallet.transfer(2, 1, nonce=500).encoded, wallet.transfer(0, 1).encoded, good.encoded,
             wallet.transfer(3, 1, chain_id=devnet.chain_id + 1).encoded,
             _resigned(wallet, wallet.transfer(4, 1), scheme_id=99).encoded,
             wallet.transfer(5, 1, nonce=1).encoded, wallet.transfer(5, 1, nonce=0).encoded]
    answers = []
    for path in ("python", "kernel"):
        async with running_node(devnet, tmp_path / path, devnet.observer_key()) as node:
            gc.disable()
            try:
                outcomes = await node.submit(items) if path == "python" else \
                    (await node.submit_body(encode_frames(items))).outcomes()
                answers.append([(o.tx_id, o.status, o.error and (o.error.code, o.error.detail, o.error.http_status))
                                for o in outcomes])
                errors = [weakref.ref(o.error) for o in outcomes if o.error is not None]
                accepted = [o.tx_id for o in outcomes if o.status == "accepted"]
                del outcomes
                assert all(error() is None for error in errors)
            finally:
                gc.enable()
            metrics = node.metrics
            answers.append((metrics.tx_received, metrics.tx_accepted, metrics.tx_duplicate,
                            dict(metrics.tx_rejected), metrics.verify.count["admission"], node.journal.records))
            if path == "kernel":
                assert all(node.ledger.is_verified(tx_id) for tx_id in accepted)
    assert answers[0] == answers[2] and answers[1] == answers[3]
    assert [status for _, status, _ in answers[0]] == [
        "accepted", "rejected", "rejected", "rejected", "accepted", "duplicate", "rejected", "rejected", "accepted",
        "accepted"]


async def test_bytes_in_counts_bytes_read_not_the_content_length_claimed(devnet, tmp_path, aiohttp_client):
    async with running_node(devnet, tmp_path / "data", devnet.observer_key()) as node:
        client = await aiohttp_client(make_app(node))
        before = node.metrics.bytes_in
        response = await client.post("/txs", data=b"x", headers={**BINARY, "Content-Length": str(10**15)},
                                     skip_auto_headers=())
        assert response.status in (400, 413)
        assert node.metrics.bytes_in - before < 10**6


async def test_committed_transaction_has_a_verifiable_inclusion_proof(producer, devnet):
    _, client = producer
    txs = Wallet(devnet).transfers(5)
    await _all_accepted(client, txs)
    for tx in txs:
        await wait_for(lambda tx=tx: _is(client, tx, "committed"), "commit")
        found = await (await client.get(f"/tx/{tx.id.hex()}")).json()
        proof = MerkleProof.from_json(found["proof"])
        assert verify_proof(bytes.fromhex(found["merkle_root"]), tx.id, proof)
        block = await (await client.get(f"/block/{found['height']}?txs=ids")).json()
        assert block["tx_ids"][found["position"]] == tx.id.hex()
        assert block["merkle_root"] == found["merkle_root"]
    assert (await (await client.get(f"/tx/{'00' * 64}")).json())["status"] == "unknown"


async def test_a_stored_blocks_ids_and_summary_agree_with_its_transactions(producer, devnet):
    # Read from the block's header and id list, not decoded (qmemo.core.block.BlockIds).
    node, client = producer
    txs = Wallet(devnet).transfers(4)
    await _all_accepted(client, txs)
    await wait_for(lambda: _is(client, txs[-1], "committed"), "commit")
    height = (await (await client.get(f"/tx/{txs[-1].id.hex()}")).json())["height"]

    async def only_in_store() -> bool:
        return node.chain.recent_block(height) is None
    await wait_for(only_in_store, "the block written and out of memory")
    full = (await (await client.get(f"/blocks?from={height}&limit=1")).json())["blocks"][0]
    ids = (await (await client.get(f"/blocks?from={height}&limit=1&txs=ids")).json())["blocks"][0]
    summary = await (await client.get(f"/block/{height}?txs=none")).json()
    assert ids["tx_ids"] == [Transaction.from_json(tx).id.hex() for tx in full["transactions"]]
    assert txs[-1].id.hex() in ids["tx_ids"]
    assert summary == {k: v for k, v in ids.items() if k != "tx_ids"} and summary["final"] is True


async def test_statuses_of_many_transactions_answer_like_one_get_each_in_order(producer, devnet, monkeypatch):
    _, client = producer
    txs = Wallet(devnet).transfers(3)
    await _all_accepted(client, txs)
    await wait_for(lambda: _is(client, txs[-1], "committed"), "commit")
    ids = [txs[2].id.hex(), "00" * 64, txs[0].id.hex()]
    status, document, _ = await post_json(client, "/txs/status", {"ids": ids})
    singles = [await (await client.get(f"/tx/{tx_id}")).json() for tx_id in ids]
    assert status == 200 and document == {"statuses": [{k: v for k, v in single.items() if k != "proof"}
                                                         for single in singles]}     # all but the proofs
    assert [s["status"] for s in singles] == ["committed", "unknown", "committed"]
    monkeypatch.setattr(handlers, "MAX_STATUS_IDS", 2)      # 1,000 ids would pass this node's 64 KiB body cap
    status, document, _ = await post_json(client, "/txs/status", {"ids": ids})
    assert (status, document["error"]) == (413, "batch_too_large")
    status, document, _ = await post_json(client, "/txs/status", {"ids": ["zz"]})
    assert status == 400


async def test_blocks_and_accounts_answer_the_documented_shapes(producer, devnet):
    node, client = producer
    await wait_for(lambda: _height_at_least(client, 2), "two blocks")
    blocks = (await (await client.get("/blocks?from=1&limit=2&txs=ids")).json())["blocks"]
    assert [b["height"] for b in blocks] == [1, 2]
    assert set(blocks[0]) >= {"height", "hash", "timestamp_ms", "producer", "tx_count", "tx_ids"}
    full = (await (await client.get("/blocks?from=1&limit=1")).json())["blocks"][0]
    assert Block.from_json({"header": full["header"], "transactions": full["transactions"]}).hash.hex() == full["hash"]
    assert (await (await client.get("/blocks?from=100000")).json()) == {"blocks": []}
    summaries = (await (await client.get("/blocks?from=1&limit=2&txs=none")).json())["blocks"]
    assert summaries == [{k: v for k, v in b.items() if k not in ("tx_ids", "confirmations", "final")}
                         | {"confirmations": s["confirmations"], "final": s["final"]}
                         for b, s in zip(blocks, summaries)]
    assert (await client.get("/block/1?txs=none")).status == 200
    assert (await client.get("/blocks?from=1&txs=some")).status == 400
    latest = await (await client.get("/block/latest")).json()
    assert latest["height"] >= 2
    addresses = [devnet.address(i).hex() for i in range(3)]
    accounts = (await post_json(client, "/accounts", {"addresses": addresses}))[1]["accounts"]
    assert [a["address"] for a in accounts] == addresses
    assert all(a["balance"] == 10**9 and a["nonce"] == 0 == a["pending_nonce"] for a in accounts)


async def _all_accepted(client, txs: list[Transaction]) -> None:
    """POST `txs` as JSON; every one must be accepted."""
    response = await client.post("/txs", data=orjson.dumps({"transactions": [t.to_json() for t in txs]}),
                                 headers={"Content-Type": "application/json"})
    assert (await response.json())["accepted"] == len(txs)


async def _height_at_least(client, height: int) -> bool:
    return (await (await client.get("/status")).json())["height"] >= height


async def test_status_metrics_and_health_documents(producer):
    node, client = producer
    status = await (await client.get("/status")).json()
    assert set(status) >= {"node", "chain_id", "height", "tip_hash", "tip_age_s", "mempool", "peers", "scheme",
                           "uptime_s", "version"}
    assert status["node"] == "node-0" and status["scheme"] == "Falcon-512"
    metrics = await (await client.get("/metrics")).json()
    assert metrics["schema"] == "qmemo-node-metrics/3"
    for key in ("mempool", "tx", "verify", "blocks", "process", "event_loop_lag_ms", "net", "stages"):
        assert key in metrics
    assert list(metrics["stages"]["by_stage"]) == [*STAGES, OTHER]
    assert metrics["stages"]["accounted_cpu_s"] <= metrics["stages"]["process_cpu_s"]
    assert set(metrics["verify"]["count"]) == {"admission", "block"}
    process = metrics["process"]
    assert process["cpu_seconds"] > 0 and process["rss_bytes"] > 0
    assert process["event_loop"] == "asyncio"      # in-process: pytest's loop
    assert process["open_fds"] >= 3 and process["pid"] == os.getpid()        # stdio at least; in-process: ours
    assert 0 < process["started_at_s"] <= metrics["time_s"]                   # both on the node's clock
    assert 0 < process["rss_anon_bytes"] < process["rss_bytes"]               # less the mapped libraries, at least
    assert decode_metrics(metrics).process.open_fds == process["open_fds"]     # what every reader decodes with
    text = await (await client.get("/metrics/prometheus")).text()
    assert "# TYPE qmemo_signature_verify_duration_seconds histogram" in text
    assert 'qmemo_signature_verify_duration_seconds_bucket{path="admission",le="+Inf"}' in text
    assert "process_cpu_seconds_total " in text
    assert "\nprocess_open_fds " in text
    assert 'qmemo_event_loop_info{loop="asyncio"} 1' in text
    assert "# TYPE qmemo_stage_cpu_seconds_total counter" in text and 'stage="decode_hash"' in text
    assert (await client.get("/health")).status == 200
    await node.stop()
    assert (await client.get("/health")).status == 503


@pytest.mark.parametrize("verifier", ["fast", "liboqs"])
async def test_metrics_name_the_falcon_verifier_and_the_fast_ones_key_cache(devnet, tmp_path, aiohttp_client,
                                                                              verifier):
    async with running_node(devnet, tmp_path / "data", devnet.validator_key(0), verifier=verifier) as node:
        client = await aiohttp_client(make_app(node))
        wallet = Wallet(devnet)
        for tx in (wallet.transfer(0, 1), wallet.transfer(0, 2, nonce=1)):   # one sender: its key twice
            assert (await post_json(client, "/tx", tx.to_json()))[1]["status"] == "accepted"
        verify = (await (await client.get("/metrics")).json())["verify"]
        text = await (await client.get("/metrics/prometheus")).text()
    assert verify["verifier"] == verifier
    assert f'qmemo_signature_verifier_info{{verifier="{verifier}"}} 1' in text
    if verifier == "liboqs":
        assert verify["key_cache"] is None and verify["key_caches"] == {}
        assert "# TYPE qmemo_key_cache_keys gauge" in text and "qmemo_key_cache_keys{" not in text
        return
    cache = verify["key_cache"]
    assert cache["size"] >= 1 and cache["hits"] >= 1 and 0 < cache["hit_rate"] <= 1
    # which variants' caches the figures sum (this test process may have used others too)
    assert "Falcon-512" in cache["schemes"]
    own = verify["key_caches"]["Falcon-512"]      # per scheme, as Prometheus gets them
    assert own["capacity"] >= own["size"] >= 1 and own["schemes"] == ["Falcon-512"]
    assert f'qmemo_key_cache_hits_total{{scheme="Falcon-512"}} {own["hits"]}' in text


# --- blocks pushed by a peer ------------------------------------------------------------------------

async def _tip(client) -> tuple[int, bytes, int]:
    status = await (await client.get("/status")).json()
    block = await (await client.get("/block/latest")).json() if status["height"] else None
    return status["height"], bytes.fromhex(status["tip_hash"]), block["timestamp_ms"] if block else 0


async def _push(client, block: Block) -> tuple[int, dict]:
    response = await client.post("/peer/block", data=block.encode(), headers=BINARY)
    return response.status, await response.json()


def _genesis_time_ms(devnet: Devnet) -> int:
    return orjson.loads(devnet.genesis.read_bytes())["genesis_time_ms"]


async def test_block_from_an_unscheduled_validator_is_rejected(observer, devnet):
    node, client = observer
    slot_ms = _genesis_time_ms(devnet) + 500                  # validator 0's turn for height 1
    block = devnet.block(height=1, previous_hash=node.genesis.hash, timestamp_ms=slot_ms, producer=2)
    status, body = await _push(client, block)
    assert (status, body["error"]) == (422, "wrong_producer")
    forged = devnet.block(height=1, previous_hash=node.genesis.hash, timestamp_ms=slot_ms, producer=0, signed_by=1)
    status, body = await _push(client, forged)
    assert (status, body["error"]) == (422, "bad_header_signature")
    metrics = await (await client.get("/metrics")).json()
    assert metrics["blocks"]["rejected_by_reason"] == {"wrong_producer": 1, "bad_header_signature": 1}
    assert metrics["height"] == 0


async def test_a_block_ahead_of_the_nodes_clock_waits_for_the_clock(devnet, tmp_path, aiohttp_client):
    """Chain time is the node's injected clock: a block past its drift allowance is refused
    until the clock, not the wall, moves; the tip's age is read from the same clock."""
    genesis_ms = _genesis_time_ms(devnet)
    drift_ms = orjson.loads(devnet.genesis.read_bytes())["max_clock_drift_ms"]
    clock = ManualClock(genesis_ms + 1100)
    async with running_node(devnet, tmp_path / "data", devnet.observer_key(), clock=clock) as node:
        client = await aiohttp_client(make_app(node))
        early = devnet.block(height=1, previous_hash=node.genesis.hash, timestamp_ms=clock() + drift_ms + 1, producer=1)
        status, body = await _push(client, early)
        assert (status, body["error"]) == (422, "timestamp_in_future"), body
        clock.advance(1)
        assert await _push(client, early) == (200, {"status": "accepted", "height": 1})
        clock.advance(drift_ms + 2000)
        assert (await (await client.get("/status")).json())["tip_age_s"] == 2.0


@pytest.mark.parametrize("tamper, reason", [
    ("amount changed, header left as signed", "wrong_merkle_root"),
    ("amount changed, Merkle root and header signature redone", "bad_signature"),
])
async def test_block_with_a_tampered_transaction_is_rejected(observer, devnet, tamper, reason):
    node, client = observer
    wallet = Wallet(devnet)
    txs = [wallet.transfer(0, 1), wallet.transfer(1, 2)]
    slot_ms = _genesis_time_ms(devnet) + 500
    tampered_tx = replace(txs[1], amount=txs[1].amount + 1000)   # the signature no longer covers it
    if reason == "wrong_merkle_root":
        honest = devnet.block(height=1, previous_hash=node.genesis.hash, timestamp_ms=slot_ms, producer=0,
                              transactions=txs)
        block = Block(honest.header, (txs[0], tampered_tx))
    else:
        block = devnet.block(height=1, previous_hash=node.genesis.hash, timestamp_ms=slot_ms, producer=0,
                             transactions=[txs[0], tampered_tx])
    status, body = await _push(client, block)
    assert (status, body["error"]) == (422, reason), body
    assert (await (await client.get("/status")).json())["height"] == 0
    good = devnet.block(height=1, previous_hash=node.genesis.hash, timestamp_ms=slot_ms, producer=0,
                        transactions=txs)
    assert await _push(client, good) == (200, {"status": "accepted", "height": 1})
    metrics = await (await client.get("/metrics")).json()
    assert metrics["tx"]["committed"] == 2 and metrics["blocks"]["received"] == 1
    # the refused block spent block_validate's CPU but validated none of its transactions
    assert metrics["stages"]["by_stage"]["block_validate"]["txs"] == 2


async def _push_ids(client, block: Block) -> tuple[int, dict]:
    response = await client.post("/peer/block_ids", data=BlockIds.of(block).encode(), headers=BINARY)
    return response.status, await response.json()


async def test_a_block_pushed_as_its_ids_is_rebuilt_from_the_pool_or_asked_for_whole(observer, devnet):
    node, client = observer
    wallet = Wallet(devnet)
    pending = [wallet.transfer(0, 1), wallet.transfer(1, 2), wallet.transfer(0, 2)]
    await _all_accepted(client, pending)
    genesis_ms = _genesis_time_ms(devnet)
    first = devnet.block(height=1, previous_hash=node.genesis.hash, timestamp_ms=genesis_ms + 500, producer=0,
                         transactions=pending)
    assert await _push_ids(client, first) == (200, {"status": "accepted", "height": 1})
    response = await client.get("/peer/blocks?from=1&limit=1")
    assert decode_block_batch(await response.read(), 1) == [first.encode()]     # stored whole, byte for byte
    # A transaction this node never saw: the ids are not enough, the whole block is.
    unseen = wallet.transfer(3, 1)
    second = devnet.block(height=2, previous_hash=first.hash, timestamp_ms=genesis_ms + 1000, producer=1,
                          transactions=[unseen])
    assert await _push_ids(client, second) == (200, {"status": "missing", "height": 2})
    assert (await _tip(client))[0] == 1
    assert await _push(client, second) == (200, {"status": "accepted", "height": 2})
    assert await _push_ids(client, second) == (200, {"status": "known", "height": 2})
    metrics = await (await client.get("/metrics")).json()
    assert metrics["tx"]["committed"] == 4 and metrics["blocks"]["received"] == 2


async def test_block_ids_that_do_not_match_their_header_are_refused(observer, devnet):
    node, client = observer
    wallet = Wallet(devnet)
    txs = [wallet.transfer(0, 1), wallet.transfer(1, 2)]
    await _all_accepted(client, txs)
    block = devnet.block(height=1, previous_hash=node.genesis.hash, timestamp_ms=_genesis_time_ms(devnet) + 500,
                         producer=0, transactions=txs)
    encoded = BlockIds.of(block).encode()
    header_bytes = len(block.header.encoded)
    swapped = encoded[:header_bytes] + encoded[header_bytes + 64:] + encoded[header_bytes:header_bytes + 64]
    longest = BlockIds.max_bytes(node.genesis.max_block_transactions)
    for body, (status, code) in ((swapped, (422, "wrong_merkle_root")),       # the ids in another order
                                 (encoded + bytes(64), (400, "trailing_bytes")),
                                 (encoded[:-1], (400, "truncated")),
                                 (encoded + bytes(longest), (413, "body_too_large"))):
        response = await client.post("/peer/block_ids", data=body, headers=BINARY)
        assert (response.status, (await response.json())["error"]) == (status, code)
    assert (await _tip(client))[0] == 0
    unscheduled = devnet.block(height=1, previous_hash=node.genesis.hash,
                               timestamp_ms=_genesis_time_ms(devnet) + 500, producer=2, transactions=txs)
    status, body = await _push_ids(client, unscheduled)         # judged on its header first, as a whole block
    assert (status, body["error"]) == (422, "wrong_producer")
    assert await _push_ids(client, block) == (200, {"status": "accepted", "height": 1})


class _PeerLackingTransactions:
    """A stand-in peer (qmemo.node.peers.PeerLink) that answers "missing" to a block's ids
    and takes it whole; it records what it was sent."""

    url = "http://peer.invalid"

    def __init__(self, genesis_hash: bytes) -> None:
        self.genesis_hash = genesis_hash
        self.ids: list[bytes] = []
        self.whole: list[bytes] = []

    async def send_txs(self, encodings) -> None:
        pass

    async def send_block_ids(self, encoded_ids: bytes) -> str:
        self.ids.append(encoded_ids)
        return "missing"

    async def send_block(self, encoded: bytes) -> str:
        self.whole.append(encoded)
        return "accepted"

    async def tip(self) -> PeerTip:
        return PeerTip(0, self.genesis_hash)

    async def block_encodings(self, from_height: int, limit: int) -> list[bytes]:
        return []


async def test_a_produced_block_goes_whole_to_a_peer_that_lacks_a_transaction(devnet, tmp_path):
    """Whole after a "missing", and whole at once for the next WHOLE_HEIGHTS_AFTER_MISSING
    heights (validator 0 alone produces at every height here: each height is one of its blocks)."""
    from qmemo.node.producer import WHOLE_HEIGHTS_AFTER_MISSING

    peer = _PeerLackingTransactions(load_genesis(devnet.genesis).hash)

    async def pushed_twice_as_ids() -> bool:
        return len(peer.ids) >= 2
    async with running_node(devnet, tmp_path / "data", devnet.validator_key(0), peers=[peer]) as node:
        await wait_for(pushed_twice_as_ids, "a second block pushed as its ids", timeout=30)
        whole = [Block.decode(encoded) for encoded in peer.whole]
        by_height = {block.height: block for block in whole}
        ids_heights = [BlockIds.decode(encoded_ids).height for encoded_ids in peer.ids]
        assert ids_heights[1] == ids_heights[0] + 1 + WHOLE_HEIGHTS_AFTER_MISSING
        assert [block.height for block in whole][:WHOLE_HEIGHTS_AFTER_MISSING + 1] == \
            list(range(ids_heights[0], ids_heights[1]))       # every block reached the peer whole
        assert peer.ids[0] == BlockIds.of(by_height[ids_heights[0]]).encode()
        pushed = node.metrics.blocks_pushed
        assert pushed["ids"] == pushed["missing"] == len(peer.ids) and pushed["whole"] == len(peer.whole)


async def test_competing_block_for_the_tip_is_chosen_by_the_fork_rule(observer, devnet):
    """Two valid blocks for height 1: the primary's (earlier window) wins whichever came first."""
    node, client = observer
    genesis_ms = _genesis_time_ms(devnet)
    primary = devnet.block(height=1, previous_hash=node.genesis.hash, timestamp_ms=genesis_ms + 500, producer=0)
    fallback = devnet.block(height=1, previous_hash=node.genesis.hash, timestamp_ms=genesis_ms + 1000, producer=1)
    assert await _push(client, fallback) == (200, {"status": "accepted", "height": 1})
    assert await _push(client, primary) == (200, {"status": "accepted", "height": 1})
    assert (await _tip(client))[1] == primary.hash
    assert await _push(client, fallback) == (200, {"status": "kept_ours", "height": 1})
    child = devnet.block(height=2, previous_hash=fallback.hash, timestamp_ms=genesis_ms + 1500, producer=1)
    status, body = await _push(client, child)   # a longer branch from the fallback: fetched through sync
    assert status == 200 and body["status"] == "sync"
    metrics = await (await client.get("/metrics")).json()
    assert metrics["blocks"]["reorgs"] == 1



async def test_a_peer_refusing_our_block_is_the_peers_word_not_a_local_invalid_block(observer, devnet):
    """The peer client turns a peer's 422/400 into PeerRefused (a PeerError carrying the
    peer's code and status beside its own code): never InvalidBlock/DecodeError, which mean
    *we* got a bad block."""
    import aiohttp

    from qmemo.errors import DecodeError, InvalidBlock, PeerError, PeerRefused
    from qmemo.net.lean_post import LeanPosts
    from qmemo.net.peer_client import HttpPeer

    node, client = observer
    unscheduled = devnet.block(height=1, previous_hash=node.genesis.hash,
                               timestamp_ms=_genesis_time_ms(devnet) + 500, producer=2)
    async with aiohttp.ClientSession() as session:
        peer = HttpPeer(str(client.make_url("")), session, node.metrics, origin="http://us", posts=LeanPosts(2))
        with pytest.raises(PeerRefused) as refused:
            await peer.send_block(unscheduled.encode())
        assert (refused.value.peer_code, refused.value.peer_status) == ("wrong_producer", 422)
        # Our code and status stay ours: the peer's code never poses as one of our rules.
        assert (refused.value.code, refused.value.http_status) == ("peer_refused", 502)
        with pytest.raises(PeerRefused) as garbled:
            await peer.send_block(b"not a block")
        assert (garbled.value.code, garbled.value.peer_status) == ("peer_refused", 400)
        with pytest.raises(PeerRefused) as refused_ids:
            await peer.send_block_ids(BlockIds.of(unscheduled).encode())
        assert (refused_ids.value.peer_code, refused_ids.value.peer_status) == ("wrong_producer", 422)
    for error in (refused.value, garbled.value):
        assert isinstance(error, PeerError) and not isinstance(error, (InvalidBlock, DecodeError))


async def test_a_peer_without_the_block_ids_call_is_sent_the_whole_block(devnet, aiohttp_client):
    """A node of an earlier version answers 404 to POST /peer/block_ids: the peer client
    reads it as "missing", and the producer sends the block whole (qmemo.node.producer)."""
    import aiohttp
    from aiohttp import web

    from qmemo.errors import PeerError
    from qmemo.net.lean_post import LeanPosts
    from qmemo.net.peer_client import HttpPeer
    from qmemo.node.metrics import NodeMetrics, VerifyMetrics

    server = await aiohttp_client(web.Application())
    async with aiohttp.ClientSession() as session:
        peer = HttpPeer(str(server.make_url("")), session, NodeMetrics(VerifyMetrics(threads=1)), origin="http://us",
                        posts=LeanPosts(2))
        assert await peer.send_block_ids(b"ids") == "missing"
        with pytest.raises(PeerError):          # the whole block's call is never taken for "missing"
            await peer.send_block(b"block")


async def test_our_own_misuse_answers_500_with_its_code_and_is_logged(observer, devnet, monkeypatch, caplog):
    """A Misuse is our bug: the client gets a 500 naming it (not a 4xx blaming its request),
    and the node's log keeps the traceback."""
    from qmemo.errors import Misuse

    node, client = observer

    def misused(address: bytes):
        raise Misuse("no leaf 5 among 5", code="no_such_leaf")

    monkeypatch.setattr(node, "account", misused)
    response = await client.get(f"/account/{devnet.address(0).hex()}")
    assert response.status == 500
    assert await response.json() == {"error": "no_such_leaf", "detail": "no leaf 5 among 5"}
    assert "internal misuse in GET /account/" in caplog.text
