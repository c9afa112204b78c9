"""The persistence room, in-process: what a clean stop keeps beside the store comes back
at the next start, and a damaged kept file costs only what it held - the node starts.

The node's clock is driven by the test (`ManualClock`), so its producer makes exactly
the blocks the test asks for, when it asks."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import orjson
import pytest

from qmemo.crypto.verifier import load_genesis
from qmemo.frames import encode_frames
from qmemo.node.journal import Journal
from qmemo.node.persistence import PENDING_TXS_FILE, RECENT_BLOCKS_FILE
from tests.integration.nodes import Devnet, ManualClock, Wallet, make_devnet, running_node


@pytest.fixture(scope="module")
def devnet(tmp_path_factory: pytest.TempPathFactory) -> Devnet:
    """One validator: the in-process node produces every block."""
    return make_devnet(tmp_path_factory.mktemp("devnet"), validators=1, accounts=4)


async def _until(predicate, what: str, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout_s} s waiting for {what}"
        await asyncio.sleep(0.02)


async def test_undoable_blocks_are_stored_and_pending_transactions_kept_at_a_clean_stop(devnet: Devnet, tmp_path: Path):
    genesis_ms = orjson.loads(devnet.genesis.read_bytes())["genesis_time_ms"]
    clock = ManualClock(genesis_ms)             # before the first turn: nothing is produced yet
    wallet = Wallet(devnet)
    committed, pending = wallet.transfer(0, 1), wallet.transfer(1, 2)
    data = tmp_path / "data"
    # finality_depth 3: block 1 stays undoable in memory, so only the kept file can save it.
    async with running_node(devnet, data, devnet.validator_key(0), finality_depth=3, clock=clock) as node:
        assert [o.status for o in await node.submit([committed])] == ["accepted"]
        clock.advance(500)                      # the turn for height 1 opens
        await _until(lambda: node.height == 1, "block 1")
        assert [o.status for o in await node.submit([pending])] == ["accepted"]
        assert node.store.height == 0
    # The undoable block is in the store (written before it was served), not in a kept file.
    with sqlite3.connect(data / "chain.sqlite") as db:
        assert [h for (h,) in db.execute("SELECT height FROM block_encodings")] == [1]
    # The pending transaction is in the journal (written before it was answered "accepted").
    assert not (data / RECENT_BLOCKS_FILE).exists() and not (data / PENDING_TXS_FILE).exists()
    journal = Journal(data, "reader")
    try:
        assert journal.read_back() == [pending.encoded]
    finally:
        journal.close()
    async with running_node(devnet, data, devnet.validator_key(0), finality_depth=3, clock=clock) as node:
        assert node.height == 1 and node.store.height == 0
        assert (await node.transaction_status(committed.id)).status == "committed"
        assert (await node.transaction_status(pending.id)).status == "pending"
        assert not list(data.glob("*.restoring"))


async def test_a_damaged_kept_file_costs_what_it_held_and_the_node_starts(devnet: Devnet, tmp_path: Path):
    data = tmp_path / "data"
    data.mkdir()
    (data / RECENT_BLOCKS_FILE).write_bytes(b"\x10\x00\x00\x00not sixteen")      # a length past the end
    clock = ManualClock(orjson.loads(devnet.genesis.read_bytes())["genesis_time_ms"])
    async with running_node(devnet, data, devnet.validator_key(0), clock=clock) as node:
        assert node.ready and node.height == 0
    assert not (data / RECENT_BLOCKS_FILE).exists() and not list(data.glob("*.restoring"))


async def test_an_old_kept_blocks_file_is_applied_once_and_its_block_stored(devnet: Devnet, tmp_path: Path):
    genesis = load_genesis(devnet.genesis)
    clock = ManualClock(genesis.genesis_time_ms + 500)
    block = devnet.block(height=1, previous_hash=genesis.hash, timestamp_ms=clock.now_ms,
                         producer=0, transactions=Wallet(devnet).transfers(3))
    data = tmp_path / "data"
    data.mkdir()
    (data / RECENT_BLOCKS_FILE).write_bytes(encode_frames([block.encode()]))   # as earlier versions wrote it
    async with running_node(devnet, data, devnet.validator_key(0), finality_depth=3, clock=clock) as node:
        assert node.height == 1 and node.chain.tip_hash == block.hash
        assert not (data / RECENT_BLOCKS_FILE).exists() and not list(data.glob("*.restoring"))
    with sqlite3.connect(data / "chain.sqlite") as db:
        assert db.execute("SELECT hash FROM block_encodings WHERE height = 1").fetchone()[0] == block.hash
