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


async def test_a_node_reading_its_journal_back_answers_not_ready_not_internal(devnet: Devnet, tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch):
    """While `start` waits for the journal's read-back, the chain and admission exist but the
    journal, the queries and the sync do not: a client's batch or a status look-up then met
    them unset and was answered 500 `internal`, which a client takes as final (after a
    kill-all, every later nonce of its senders waited behind the gap). It is 503 `not_ready`,
    which every client sends again."""
    from qmemo.errors import NodeNotReady
    from qmemo.net.server import build_node
    from qmemo.node.config import load_config

    reading, release = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()
    read_back = Journal.read_back

    def slow_read_back(journal: Journal) -> list[bytes]:
        loop.call_soon_threadsafe(reading.set)
        asyncio.run_coroutine_threadsafe(release.wait(), loop).result(timeout=30)
        return read_back(journal)

    monkeypatch.setattr(Journal, "read_back", slow_read_back)
    tx = Wallet(devnet).transfer(0, 1)
    node = build_node(load_config(None, {"genesis": devnet.genesis, "key": devnet.validator_key(0),
                                         "data": tmp_path / "data", "port": 0, "verify_threads": 1}))
    node.attach_peers([])
    starting = asyncio.create_task(node.start())
    try:
        await asyncio.wait_for(reading.wait(), 30)
        assert node.admission is not None and node.sync is None       # the window this test is about
        with pytest.raises(NodeNotReady):
            await node.submit_body(encode_frames([tx.encoded]))
        with pytest.raises(NodeNotReady):
            await node.transaction_status(tx.id)
        release.set()
        await starting
        assert [o.status for o in (await node.submit_body(encode_frames([tx.encoded]))).outcomes()] == ["accepted"]
    finally:
        release.set()
        await asyncio.gather(starting, return_exceptions=True)
        await node.stop()


async def test_every_transaction_of_a_node_written_block_reads_back_by_id_from_its_store(devnet: Devnet,
                                                                                      tmp_path: Path):
    # The node stores a final block through `append_final` with the spans its ledger gives
    # (`BlockBody.spans(len(header))`), not the core's `spans_of`: each span must land on its
    # transaction's encoding in the stored block, payloads of differing lengths included.
    genesis_ms = orjson.loads(devnet.genesis.read_bytes())["genesis_time_ms"]
    clock = ManualClock(genesis_ms)
    wallet = Wallet(devnet)
    blocks = [[wallet.transfer(i % 4, (i + 1) % 4, payload=bytes([i]) * (i * 37)) for i in range(6)],
              [wallet.transfer(i % 4, (i + 2) % 4, payload=b"x" * (500 - i)) for i in range(5)]]
    data = tmp_path / "data"
    async with running_node(devnet, data, devnet.validator_key(0), finality_depth=1, clock=clock) as node:
        for height, txs in enumerate(blocks, start=1):
            assert [o.status for o in await node.submit(txs)] == ["accepted"] * len(txs)
            clock.advance(500)
            await _until(lambda height=height: node.height == height, f"block {height}")
        clock.advance(500)              # one more block makes the last one final
        await _until(lambda: node.height == len(blocks) + 1, "the block after")
        await _until(lambda: node.store.height >= len(blocks), "the blocks written to the store")
        for height, txs in enumerate(blocks, start=1):
            for tx in txs:
                found = node.store.transaction(tx.id)
                assert found is not None and found.height == height
                assert found.tx.encoded == tx.encoded
                assert node.store.block_ids(height).tx_ids[found.position] == tx.id


async def test_a_compaction_while_a_block_is_being_stored_keeps_that_blocks_transactions(
        devnet: Devnet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # A block leaves the pool when it is applied, but reaches the store only when its write
    # (`keep_branch`) returns. A compaction in between must keep its transactions: a SIGKILL
    # then would find them neither in the store nor in the journal.
    import threading

    from qmemo.node.store import ChainStore

    genesis_ms = orjson.loads(devnet.genesis.read_bytes())["genesis_time_ms"]
    clock = ManualClock(genesis_ms)
    tx = Wallet(devnet).transfer(0, 1)
    storing, release = threading.Event(), threading.Event()
    keep_branch = ChainStore.keep_branch

    def slow_keep_branch(store: ChainStore, *args, **kwargs) -> None:
        storing.set()
        release.wait(30)
        keep_branch(store, *args, **kwargs)

    compactions: list[int] = []
    compact = Journal.compact

    async def counted_compact(journal: Journal, frames: bytes, count: int) -> None:
        await compact(journal, frames, count)
        compactions.append(count)

    data = tmp_path / "data"
    async with running_node(devnet, data, devnet.validator_key(0), finality_depth=3, clock=clock) as node:
        assert [o.status for o in await node.submit([tx])] == ["accepted"]
        monkeypatch.setattr(ChainStore, "keep_branch", slow_keep_branch)
        monkeypatch.setattr(Journal, "compact", counted_compact)
        monkeypatch.setattr(Journal, "wants_compaction", lambda journal: True)
        try:
            clock.advance(500)                  # block 1 is built, applied, and held in its write
            await _until(lambda: node.chain.height == 1 and bool(compactions), "block 1 applied, a compaction")
            assert storing.is_set() and node.chain.durable_height == 0
            reader = Journal(data, "reader")
            try:
                assert reader.read_back() == [tx.encoded]   # what a SIGKILL now would leave
            finally:
                reader.close()
        finally:
            release.set()
        await _until(lambda: node.chain.durable_height == 1, "block 1 stored")


async def test_a_clients_duplicate_is_answered_once_the_first_copy_is_on_disk(
        devnet: Devnet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    # A peer's batch goes to the journal's next group commit without waiting; a client that
    # sends one of its transactions too hears "duplicate" - a promise like "accepted" - only
    # once that copy is written: a SIGKILL in between would lose what it was promised.
    import threading

    tx = Wallet(devnet).transfer(0, 1)
    writing, release = threading.Event(), threading.Event()
    write = Journal._write

    def held_write(journal: Journal, batch: list[bytes], count: int) -> None:
        writing.set()
        release.wait(30)
        write(journal, batch, count)

    async with running_node(devnet, tmp_path / "data", devnet.validator_key(0), finality_depth=3,
                            clock=ManualClock(orjson.loads(devnet.genesis.read_bytes())["genesis_time_ms"])) as node:
        monkeypatch.setattr(Journal, "_write", held_write)
        try:
            relayed = await node.submit_body(encode_frames([tx.encoded]), from_peer=True)
            assert [o.status for o in relayed.outcomes()] == ["accepted"]
            await _until(writing.is_set, "the peer's batch in its journal write")
            resent = asyncio.create_task(node.submit_body(encode_frames([tx.encoded])))
            await asyncio.sleep(0.2)
            assert not resent.done() and node.journal.records == 0
        finally:
            release.set()
        assert [o.status for o in (await resent).outcomes()] == ["duplicate"]
        assert node.journal.records == 1
