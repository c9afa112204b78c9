"""A shard node's receipts room and store: bundles checked into the pool, taken whole by the
producer, dropped once credited; credited ids kept across a restart; the pull's wire form.

Real parts: the native ledger, the admission kernel's verify path (inline: no threads),
SQLite in a temporary folder. The bundles are built by the reference (tests/unit/shard_kit.py).
"""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from qmemo.core.receipts import decode_section, receipt_id
from qmemo.crypto.admit_kernel import AdmitKernel
from qmemo.net.wire import decode_receipt_batch, encode_receipt_batch
from qmemo.node.chain import Chain
from qmemo.node.ledger import PoolLimits, new_ledger
from qmemo.node.metrics import VerifyMetrics
from qmemo.node.receipts import ReceiptRoom
from qmemo.node.store import ChainStore
from qmemo.node.verify_pool import VerifyPool
from tests.unit.shard_kit import CHAIN_IDS, ShardChain, account, sharded_genesis, validators
from qmemo.crypto.verifier import signer


def room_on(path) -> ReceiptRoom:
    view = sharded_genesis().view(1)
    store = ChainStore(path / "chain.sqlite", view)
    ledger = new_ledger(view, PoolLimits())
    chain = Chain(store, ledger, quorum=2)
    metrics = VerifyMetrics(threads=0)
    metrics.add_path("receipt")
    pool = VerifyPool(0, metrics, AdmitKernel(view.chain_id, ["Falcon-512"], verifier="fast"), ledger,
                      verifier="fast")
    return ReceiptRoom(view, chain, pool, ledger, logging.LoggerAdapter(logging.getLogger("test"), {}))


def final_bundle(amount: int = 7):
    source = ShardChain(0)
    source.extend([source.transfer(account(0), account(1), amount)])
    source.extend()
    return source.bundles_of(1)[1]


async def test_a_valid_bundle_is_pooled_once_and_selected_whole(tmp_path):
    room = room_on(tmp_path)
    bundle = final_bundle()
    assert await room.admit([bundle.encode()]) == 1
    assert await room.admit([bundle.encode()]) == 0 and room.counters.bundles_known == 1
    count, section = room.select(50)
    assert count == 1 and decode_section(section)[0].receipt_ids() == bundle.receipt_ids()
    assert room.statuses([bundle.receipt_ids()[0], bytes(64)]) == [("pooled", False), ("unknown", False)]
    assert room.verify_pool.metrics.count["receipt"] == 1      # verified again, on its own path


async def test_a_forged_bundle_is_refused_and_counted_by_its_rule(tmp_path):
    room = room_on(tmp_path)
    bundle = final_bundle()
    impostor = account(0)
    forged = replace(bundle, header=bundle.header.signed(signer(impostor.scheme, impostor.secret_key)))
    assert await room.admit([forged.encode(), b"\x01\x02"]) == 0
    assert room.counters.rejected == {"forged_header": 1, "truncated": 1}
    assert room.select(50) == (0, b"\x00\x00")


async def test_the_producer_takes_no_more_receipts_than_a_block_may_credit(tmp_path):
    room = room_on(tmp_path)
    await room.admit([final_bundle(3).encode()])
    assert room.select(0) == (0, b"\x00\x00")


def test_credited_receipts_survive_a_restart_of_the_store(tmp_path):
    view = sharded_genesis().view(1)
    destination = ShardChain(1)
    bundle = final_bundle()
    block = destination.extend(bundles=[bundle])
    credited = receipt_id(CHAIN_IDS[0], bundle.entries[0].tx.id)
    with ChainStore(tmp_path / "chain.sqlite", view) as store:
        store.append(replace(_applied(destination, block), credited=(credited,)))
    with ChainStore(tmp_path / "chain.sqlite", view) as store:
        assert store.credited_receipts() == {credited}
        chain = Chain(store, new_ledger(view, PoolLimits()), quorum=2)
        assert credited in chain.credited


def _applied(chain: ShardChain, block):
    from qmemo.core.state import AppliedBlock
    return AppliedBlock(block, dict(chain.state.accounts), 0)


def test_the_pull_answer_round_trips():
    assert decode_receipt_batch(encode_receipt_batch(7, 12, [b"a", b"bc"])) == (7, 12, [b"a", b"bc"])
    with pytest.raises(Exception):
        decode_receipt_batch(encode_receipt_batch(7, 12, [])[:-1])


def test_a_validator_key_picks_its_shard_and_a_wrong_shard_is_refused(tmp_path):
    from qmemo.crypto.verifier import load_shard_genesis
    from qmemo.errors import ConfigError
    import orjson
    from tests.unit.shard_kit import sharded_genesis_document

    path = tmp_path / "genesis.json"
    path.write_bytes(orjson.dumps(sharded_genesis_document()))
    assert load_shard_genesis(path, validators(1)[0].public_key).chain_id == CHAIN_IDS[1]
    assert load_shard_genesis(path, account(0).public_key, 0).chain_id == CHAIN_IDS[0]
    with pytest.raises(ConfigError, match="validates none"):
        load_shard_genesis(path, account(0).public_key)
    with pytest.raises(ConfigError, match="not of shard 0"):
        load_shard_genesis(path, validators(1)[0].public_key, 0)
