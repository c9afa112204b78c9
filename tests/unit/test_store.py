"""The SQLite store: blocks with their state changes, atomically; lookups; reopening
without replay; and a writer killed with SIGKILL mid-way leaves a consistent chain."""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from qmemo.core.block import Block, BlockIds
from qmemo.core.genesis import parse_genesis
from qmemo.core.merkle import verify_proof
from qmemo.core.state import Account, AppliedBlock, ChainState, apply_block
from qmemo.core.transaction import derive_address
from qmemo.core.verify_cache import VerifyCache
from qmemo.crypto.keys import NamedKey, save_keys
from qmemo.crypto.schemes import get_scheme
from qmemo.crypto.verifier import RegistryVerifier, load_genesis
from qmemo.errors import ConfigError, StoreError
from qmemo.node import store_index
from qmemo.node.store import ChainStore
from tests.conftest import REPO_ROOT
from tests.unit.chain_kit import Devnet, default_genesis, genesis_document, schemes


@pytest.fixture
def chain(tmp_path):
    """A devnet with three applied blocks, each appended to a store in tmp_path."""
    net = Devnet()
    store = ChainStore(tmp_path / "chain.sqlite", net.genesis)
    for _ in range(3):
        block = net.next_block([net.transfer(net.alice, net.bob, 3), net.transfer(net.carol, net.alice, 4)])
        store.append(net.apply(block))
    yield net, store
    store.close()


def test_new_store_starts_at_the_genesis(tmp_path):
    genesis = default_genesis()
    with ChainStore(tmp_path / "chain.sqlite", genesis) as store:
        state = store.load_state()
    assert (store.height, store.tip_hash) == (0, genesis.hash)
    assert state.accounts == ChainState.from_genesis(genesis).accounts
    assert state.tip_timestamp_ms == genesis.genesis_time_ms


def test_a_new_store_takes_large_pages(tmp_path):
    from qmemo.node.store import PAGE_BYTES
    net = Devnet()
    with ChainStore(tmp_path / "chain.db", net.genesis) as store:
        assert store._db.execute("PRAGMA page_size").fetchone()[0] == PAGE_BYTES == 65536


def test_reopening_restores_tip_and_state(chain, tmp_path):
    net, store = chain
    store.close()
    with ChainStore(tmp_path / "chain.sqlite", net.genesis) as reopened:
        state = reopened.load_state()
    assert (state.height, state.tip_hash, state.tip_timestamp_ms) == \
        (net.state.height, net.state.tip_hash, net.state.tip_timestamp_ms)
    assert state.accounts == net.state.accounts


def test_reopened_state_extends_the_chain(chain, tmp_path):
    net, store = chain
    store.close()
    with ChainStore(tmp_path / "chain.sqlite", net.genesis) as reopened:
        net.state = reopened.load_state()
        reopened.append(net.apply(net.next_block([net.transfer(net.bob, net.alice, 1)])))
        assert reopened.height == 4


def test_reopening_does_not_verify_signatures_again(chain, tmp_path, monkeypatch):
    net, store = chain
    store.close()
    monkeypatch.setattr(RegistryVerifier, "verify", lambda *args: pytest.fail("verified on reopen"))
    with ChainStore(tmp_path / "chain.sqlite", net.genesis) as reopened:
        assert reopened.load_state().height == 3


def test_blocks_by_height(chain):
    net, store = chain
    block = store.block(2)
    assert block is not None and block.height == 2
    assert block.hash == store.header(2).hash and store.block(1).hash == block.header.previous_hash
    assert store.block_bytes(2) == block.encode()
    assert store.header(2) == block.header
    assert store.block(4) is None and store.block_bytes(4) is None and store.header(0) is None


def test_transaction_by_id_with_a_proof_against_its_block(chain):
    net, store = chain
    block = store.block(3)
    tx = block.transactions[1]
    found = store.transaction(tx.id)
    assert found is not None and found.tx == tx and (found.height, found.position) == (3, 1)
    assert found.block_hash == block.hash and found.merkle_root == block.header.merkle_root
    assert verify_proof(block.header.merkle_root, tx.id, found.proof)
    assert store.transaction(bytes(64)) is None


def test_a_final_block_is_kept_as_one_encoding_that_a_branch_switch_never_replaces(tmp_path):
    net = Devnet()
    with ChainStore(tmp_path / "chain.sqlite", net.genesis) as store:
        first = net.next_block([net.transfer(net.alice, net.bob, 3)])
        applied = net.apply(first)
        store.keep_branch(0, [(1, first.hash, first.encode())])
        assert store.block_bytes(1) is None and store.recent_blocks() == [first.encode()]   # undoable: not served from here
        store.append(applied)
        assert store.block_bytes(1) == first.encode() and store.recent_blocks() == []
        assert store.transaction(first.transactions[0].id).tx == first.transactions[0]
        second = net.next_block([net.transfer(net.carol, net.alice, 4)])
        store.keep_branch(0, [(2, second.hash, second.encode())])      # a fork height below the final tip
        assert store.block_bytes(1) == first.encode() and store.recent_blocks() == [second.encode()]
        rows = store._db.execute("SELECT height, hash FROM block_encodings ORDER BY height").fetchall()
        assert rows == [(1, first.hash), (2, second.hash)]


def test_appending_a_block_another_branch_left_at_its_height_stores_the_final_one(tmp_path):
    net = Devnet()
    with ChainStore(tmp_path / "chain.sqlite", net.genesis) as store:
        block = net.next_block([net.transfer(net.alice, net.bob, 3)])
        other = replace(block, header=replace(block.header, timestamp_ms=block.header.timestamp_ms + 1))
        store.keep_branch(0, [(1, other.hash, other.encode())])
        store.append(net.apply(block))
        assert store.block_bytes(1) == block.encode() and store.block(1) == block


def test_only_the_next_block_may_be_appended(chain):
    net, store = chain
    block = store.block(3)
    with pytest.raises(StoreError) as refused:
        store.append(AppliedBlock(block, {}, 0))
    assert refused.value.code == "not_the_next_block"


class _AccountsFail(sqlite3.Connection):
    """A connection whose accounts write fails (the last statement of an append)."""

    fail = False

    def executemany(self, sql, rows):   # type: ignore[override]
        if self.fail and sql.startswith("INSERT INTO accounts"):
            raise sqlite3.OperationalError("disk I/O error (simulated)")
        return super().executemany(sql, rows)


def test_a_failed_append_writes_nothing(tmp_path):
    net = Devnet()
    store = ChainStore(tmp_path / "chain.sqlite", net.genesis, connection=_AccountsFail)
    store.append(net.apply(net.next_block([net.transfer(net.alice, net.bob, 1)])))
    before = store.load_state()
    block = net.next_block([net.transfer(net.alice, net.bob, 1)])
    applied = net.apply(block)
    # The last write, the accounts, fails after the block's row and its index were written.
    store._db.fail = True
    with pytest.raises(sqlite3.OperationalError):
        store.append(applied)
    store._db.fail = False
    after = store.load_state()
    assert (after.height, after.tip_hash, after.accounts) == (before.height, before.tip_hash, before.accounts)
    assert store.block(2) is None and store.transaction(block.transactions[0].id) is None
    store.append(applied)       # and the block itself still goes in
    assert store.transaction(block.transactions[0].id).height == 2
    store.close()


def test_a_block_holding_a_transaction_twice_is_refused_and_nothing_written(chain):
    # apply_block refuses it first (the second copy's nonce is spent); the store does not take
    # it either. A copy of a transaction of an earlier block is apply_block's alone to refuse:
    # the index is partitioned by block, and looking every transaction up in every block
    # would cost more than storing it (qmemo.node.store_index).
    net, store = chain
    before = store.load_state()
    fresh = net.transfer(net.alice, net.bob, 1)
    block = net.next_block([fresh, net.transfer(net.carol, net.bob, 2), fresh])
    with pytest.raises(StoreError) as refused:
        store.append(AppliedBlock(block, {}, 0))
    assert refused.value.code == "duplicate_transaction"
    after = store.load_state()
    assert (after.height, after.tip_hash, after.accounts) == (before.height, before.tip_hash, before.accounts)
    assert store.block(4) is None and store.transaction(fresh.id) is None


@pytest.mark.parametrize("mutation", ["a transaction more than its header counts", "an id short",
                                      "a span short", "another block's hash", "a header that does not decode"])
def test_a_block_whose_parts_disagree_is_refused_and_nothing_written(chain, mutation):
    net, store = chain
    block = net.next_block([net.transfer(net.alice, net.bob, 1), net.transfer(net.carol, net.bob, 2)])
    header = block.header
    ids = b"".join(tx.id for tx in block.transactions)
    spans = store_index.spans_of(len(header.encoded), [len(tx.encoded) for tx in block.transactions])
    parts = [4, header.hash, header.encoded, ids, spans, block.encode, b""]
    if mutation == "a transaction more than its header counts":
        parts[3], parts[4] = ids + ids[:64], spans + spans[:8]
    elif mutation == "an id short":
        parts[3] = ids[:-64]
    elif mutation == "a span short":
        parts[4] = spans[:-8]
    elif mutation == "another block's hash":
        parts[1] = store.header(3).hash
    else:
        parts[2] = header.encoded[:100]
    with pytest.raises(StoreError) as refused:
        store.append_final(*parts)
    assert refused.value.code == "bad_block_parts"
    assert store.height == 3 and store.block(4) is None and store.block_ids(4) is None


def test_a_store_of_another_chain_is_refused(chain, tmp_path):
    net, store = chain
    store.close()
    other = parse_genesis(genesis_document(chain_id=99), schemes())
    with pytest.raises(StoreError) as refused:
        ChainStore(tmp_path / "chain.sqlite", other)
    assert refused.value.code == "wrong_chain"


def test_a_store_of_another_format_is_refused(tmp_path):
    with ChainStore(tmp_path / "chain.sqlite", default_genesis()):
        pass
    with sqlite3.connect(tmp_path / "chain.sqlite") as db:
        db.execute("UPDATE metadata SET value = 'qmemo-store/0' WHERE key = 'format'")
    with pytest.raises(StoreError) as refused:
        ChainStore(tmp_path / "chain.sqlite", default_genesis())
    assert refused.value.code == "store_format"


def test_a_file_that_is_not_a_database_is_refused(tmp_path):
    (tmp_path / "chain.sqlite").write_bytes(b"not a database at all" * 100)
    with pytest.raises(StoreError) as refused:
        ChainStore(tmp_path / "chain.sqlite", default_genesis())
    assert refused.value.code == "store_unreadable"


# --- crash safety -----------------------------------------------------------------------------

def write_crash_devnet(directory: Path, accounts: int = 20) -> None:
    """One Ed25519 validator and funded Ed25519 accounts (fast to sign), on disk."""
    scheme = get_scheme("Ed25519")
    keys = [NamedKey.from_keypair(f"key-{i}", scheme.keypair()) for i in range(accounts + 1)]
    save_keys(directory / "keys.json", keys)
    document = genesis_document(
        tx_schemes=["Ed25519"], max_block_transactions=1000,
        validators=[{"name": "validator-0", "scheme": "Ed25519", "public_key": keys[0].public_key.hex()}],
        accounts=[{"address": derive_address(scheme.info.scheme_id, k.public_key).hex(), "balance": 10**12}
                  for k in keys[1:]])
    (directory / "genesis.json").write_bytes(orjson.dumps(document))


def run_writer_and_kill(directory: Path, kill_after_height: int) -> int:
    """Start the writer, SIGKILL it at a random moment after `kill_after_height`;
    return the last height it reported committed."""
    writer = subprocess.Popen([sys.executable, "-m", "tests.unit.store_crash_writer", str(directory)],
                              cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    last = 0
    deadline = time.monotonic() + 60
    try:
        while last < kill_after_height:
            line = writer.stdout.readline()
            assert line, f"writer exited early: {writer.stderr.read()}"
            last = int(line)
            assert time.monotonic() < deadline, "writer too slow"
        time.sleep(random.uniform(0, 0.05))   # land anywhere: signing, validating or mid-commit
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait(timeout=10)
        for line in writer.stdout.read().split():   # heights committed before the kill landed
            last = int(line)
    finally:
        if writer.poll() is None:
            writer.kill()
        writer.stdout.close()
        writer.stderr.close()
    assert writer.returncode == -signal.SIGKILL
    return last


def replayed_state(store: ChainStore) -> ChainState:
    """The state obtained by validating every stored block again from the genesis."""
    state = ChainState.from_genesis(store.genesis)
    cache = VerifyCache(RegistryVerifier())
    for height in range(1, store.height + 1):
        block = store.block(height)
        apply_block(state, block, cache, block.header.timestamp_ms)
    return state


@pytest.mark.slow
def test_writer_killed_mid_way_leaves_the_last_committed_block_and_its_state(tmp_path):
    write_crash_devnet(tmp_path)
    genesis = load_genesis(tmp_path / "genesis.json")
    for kill_after in (2, 4, 6, 8):   # each run resumes from what the last one left
        reported = run_writer_and_kill(tmp_path, kill_after)
        with ChainStore(tmp_path / "chain.sqlite", genesis) as store:
            state = store.load_state()
            # Every reported commit survived; at most the one in flight is missing.
            assert reported <= store.height <= reported + 1
            assert state.height == store.height and state.tip_hash == store.block(store.height).hash
            assert store._db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
            # killed between a block's two commits: its encoding is kept, undoable, on the tip
            assert [Block.decode(encoded).header.previous_hash for encoded in store.recent_blocks()] in \
                ([], [state.tip_hash])
            for height in range(1, store.height + 1):       # every final transaction is found
                block = store.block(height)
                assert [store.place(tx.id).position for tx in block.transactions] == \
                    list(range(len(block.transactions)))
            replayed = replayed_state(store)
        assert (replayed.height, replayed.tip_hash) == (state.height, state.tip_hash)
        assert replayed.accounts == state.accounts
        assert sum(a.balance for a in state.accounts.values()) == 20 * 10**12


def _deny_reading_block_encodings(store: ChainStore) -> None:
    """No SQL statement may read a block's whole encoding column from now on (a blob slice
    is not a statement: `blobopen` reads only the pages it asks for)."""
    def authorize(action, table, column, *_):
        denied = action == sqlite3.SQLITE_READ and (table, column) == ("block_encodings", "encoded")
        return sqlite3.SQLITE_DENY if denied else sqlite3.SQLITE_OK
    store._db.set_authorizer(authorize)


def test_a_transaction_look_up_reads_its_bytes_not_its_whole_block(chain):
    # substr() over the row made SQLite read the whole encoding, ~15 MB for a full block,
    # on every GET /tx (4-6 ms each, with the store's lock held).
    _, store = chain
    ids = [tx.id for height in (1, 2, 3) for tx in store.block(height).transactions]
    expected = [store.transaction(tx_id) for tx_id in ids]
    assert all(found is not None and found.tx.id == tx_id for found, tx_id in zip(expected, ids))
    _deny_reading_block_encodings(store)
    assert [store.transaction(tx_id) for tx_id in ids] == expected


def test_a_blocks_ids_come_from_its_header_and_id_list_without_reading_its_encoding(chain):
    # GET /blocks?txs=ids|none: decoding a stored 10,000-transaction block for them cost the
    # followed devnet node ~120 ms of CPU per block (`python -m qmemo.bench.node_store`).
    _, store = chain
    expected = [BlockIds.of(store.block(height)) for height in (1, 2, 3)]
    _deny_reading_block_encodings(store)
    assert [store.block_ids(height) for height in (1, 2, 3)] == expected
    assert all(len(ids.tx_ids) == 2 for ids in expected)
    assert [store.block_ids(height, with_ids=False) for height in (1, 2, 3)] == \
        [BlockIds(ids.header, None) for ids in expected]
    assert store.block_ids(4) is None and store.block_ids(0, with_ids=False) is None


def test_a_transaction_place_is_where_the_look_up_finds_it_without_a_proof(chain, monkeypatch):
    import qmemo.node.store as store_module
    _, store = chain
    blocks = [store.block(height) for height in (1, 2, 3)]
    _deny_reading_block_encodings(store)
    monkeypatch.setattr(store_module, "merkle_proof", None)    # a proof is never made for a place
    for block in blocks:
        for position, tx in enumerate(block.transactions):
            place = store.place(tx.id)
            assert (place.height, place.position, place.block_hash, place.merkle_root) == \
                (block.header.height, position, block.hash, block.header.merkle_root)
    assert store.place(bytes(64)) is None


def _one_key(monkeypatch) -> None:
    """Every id's index key is 0 from now on: each transaction after the first clashes."""
    import numpy as np
    monkeypatch.setattr(store_index, "key_of", lambda tx_id: 0)
    monkeypatch.setattr(store_index, "keys_of", lambda ids: np.zeros(len(ids) // 64, dtype=np.int64))


def test_transactions_whose_index_keys_clash_are_found_by_their_full_ids(tmp_path, monkeypatch):
    # Eight bytes of a hash can be ground to a clash (2^32 work): a key's row is never
    # trusted without the full id, in the same block or another.
    _one_key(monkeypatch)
    net = Devnet()
    with ChainStore(tmp_path / "chain.sqlite", net.genesis) as store:
        for _ in range(3):
            store.append(net.apply(net.next_block([net.transfer(net.alice, net.bob, 3),
                                                   net.transfer(net.carol, net.alice, 4)])))
        blocks = [store.block(height) for height in (1, 2, 3)]
        assert store._db.execute("SELECT count(DISTINCT key), count(*) FROM block_tx_keys").fetchone() == (1, 6)
        for block in blocks:
            for position, tx in enumerate(block.transactions):
                found, place = store.transaction(tx.id), store.place(tx.id)
                assert (found.tx, found.height, found.position) == (tx, block.header.height, position)
                assert verify_proof(block.header.merkle_root, tx.id, found.proof)
                assert (place.height, place.position) == (block.header.height, position)
        assert store.transaction(bytes(64)) is None and store.place(bytes(64)) is None
        assert store.place(b"short") is None        # not an id at all


def test_a_look_up_probes_the_blocks_newest_first_and_stops_at_the_first_that_holds_the_id(chain):
    net, store = chain
    probed: list[str] = []
    store._db.set_trace_callback(probed.append)
    newest = store.block(3).transactions[0]
    assert store.place(newest.id).height == 3
    reads_for_newest = sum("block_tx_keys" in sql for sql in probed)
    assert reads_for_newest == 1
    ids_read = []
    original = store._id_at
    store._id_at = lambda height, position: ids_read.append(height) or original(height, position)
    assert store.place(store.block(1).transactions[1].id).height == 1
    assert store.place(bytes(64)) is None
    assert ids_read == [1]          # only the candidate whose key matched was checked


def test_the_index_appends_each_block_after_the_last(chain):
    # What keeps a commit's cost flat: a block's rows sort after every earlier block's.
    net, store = chain
    rows = store._db.execute("SELECT height, key, position FROM block_tx_keys").fetchall()
    assert rows == sorted(rows) and [height for height, *_ in rows] == [1, 1, 2, 2, 3, 3]
    for height in (1, 2, 3):
        block = store.block(height)
        keys = {store_index.key_of(tx.id): position for position, tx in enumerate(block.transactions)}
        assert {key: position for h, key, position in rows if h == height} == keys


def test_a_store_in_the_write_ahead_log_is_moved_to_a_rollback_journal(tmp_path):
    # format 3 used WAL; format 4 writes a block's pages once, into the database
    net = Devnet()
    path = tmp_path / "chain.sqlite"
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA journal_mode=WAL")
    with ChainStore(path, net.genesis) as store:
        assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "truncate"
        store.append(net.apply(net.next_block([net.transfer(net.alice, net.bob, 3)])))
    assert not (tmp_path / "chain.sqlite-wal").exists()


def test_a_store_another_process_holds_in_the_write_ahead_log_is_refused(tmp_path):
    path = tmp_path / "chain.sqlite"
    holder = sqlite3.connect(path)
    try:
        holder.execute("PRAGMA journal_mode=WAL")
        holder.execute("CREATE TABLE t (x)")
        holder.execute("BEGIN")
        holder.execute("SELECT * FROM t").fetchall()
        with pytest.raises(StoreError) as refused:
            ChainStore(path, default_genesis())
        assert refused.value.code == "store_busy"
    finally:
        holder.close()


def _old_index_rows(store: ChainStore) -> list[tuple]:
    """(id, height, position, offset, length) of every final transaction, from format 4."""
    rows = []
    for height in range(1, store.height + 1):
        ids, spans = store._db.execute("SELECT ids, spans FROM blocks WHERE height = ?", (height,)).fetchone()
        for position in range(len(ids) // 64):
            rows.append((ids[position * 64:(position + 1) * 64], height, position,
                         *store_index.span_at(spans, position)))
    return rows


def _make_old_format(store: ChainStore, old_format: str, clashing: bool) -> None:
    """Rewrite a format-4 store's index as `old_format` had it (format 3: keys, the clashes by id)."""
    rows = _old_index_rows(store)
    db = store._db
    db.execute("BEGIN")
    if old_format == "qmemo-store/2":
        db.execute("CREATE TABLE tx_index (id BLOB PRIMARY KEY, height INTEGER NOT NULL, position INTEGER NOT NULL, "
                   "offset INTEGER NOT NULL, length INTEGER NOT NULL) WITHOUT ROWID")
        db.executemany("INSERT INTO tx_index VALUES (?, ?, ?, ?, ?)", rows)
    else:
        db.execute("CREATE TABLE tx_keys (key INTEGER PRIMARY KEY, height INTEGER NOT NULL, position INTEGER NOT NULL, "
                   "offset INTEGER NOT NULL, length INTEGER NOT NULL)")
        db.execute("CREATE TABLE tx_key_clashes (id BLOB PRIMARY KEY, height INTEGER NOT NULL, position INTEGER NOT "
                   "NULL, offset INTEGER NOT NULL, length INTEGER NOT NULL) WITHOUT ROWID")
        # `clashing`: as if every later id's key were the first's (filed by full id)
        keyed, clashes = (rows[:1], rows[1:]) if clashing else (rows, [])
        db.executemany("INSERT INTO tx_keys VALUES (?, ?, ?, ?, ?)",
                       [(store_index.key_of(tx_id), *place) for tx_id, *place in keyed])
        db.executemany("INSERT INTO tx_key_clashes VALUES (?, ?, ?, ?, ?)", clashes)
    db.execute("DROP TABLE block_tx_keys")
    db.execute("ALTER TABLE blocks DROP COLUMN spans")
    db.execute("UPDATE metadata SET value = ? WHERE key = 'format'", (old_format,))
    db.execute("COMMIT")
    db.execute("PRAGMA journal_mode=WAL")


@pytest.mark.parametrize(("old_format", "clashing"), [("qmemo-store/2", False), ("qmemo-store/3", False),
                                                      ("qmemo-store/3", True)])
def test_a_store_of_format_2_or_3_is_converted_when_opened(chain, tmp_path, monkeypatch, old_format, clashing):
    # Their chain stays; their index becomes spans and per-block keys (read CONVERT_ROWS
    # rows at a time), and every transaction is found again, with its proof.
    import qmemo.node.store_convert as store_convert
    net, store = chain
    monkeypatch.setattr(store_convert, "CONVERT_ROWS", 4)
    blocks = [store.block(height) for height in (1, 2, 3)]
    expected = {tx.id: store.transaction(tx.id) for block in blocks for tx in block.transactions}
    spans = store._db.execute("SELECT spans FROM blocks ORDER BY height").fetchall()
    _make_old_format(store, old_format, clashing)
    store.close()
    with ChainStore(tmp_path / "chain.sqlite", net.genesis) as reopened:
        assert {tx_id: reopened.transaction(tx_id) for tx_id in expected} == expected
        assert reopened._db.execute("SELECT spans FROM blocks ORDER BY height").fetchall() == spans
        tables = {name for (name,) in reopened._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert not tables & {"tx_index", "tx_keys", "tx_key_clashes"}
        assert reopened._db.execute("SELECT value FROM metadata WHERE key = 'format'").fetchone()[0] == \
            "qmemo-store/4"
        assert reopened._db.execute("PRAGMA journal_mode").fetchone()[0] == "truncate"
        reopened.append(net.apply(net.next_block([net.transfer(net.bob, net.alice, 1)])))
        assert reopened.height == 4


def test_a_converted_store_whose_old_index_misses_a_transaction_is_refused_unchanged(chain, tmp_path):
    net, store = chain
    _make_old_format(store, "qmemo-store/3", False)
    store._db.execute("DELETE FROM tx_keys WHERE height = 2 AND position = 1")
    store.close()
    with pytest.raises(StoreError) as refused:
        ChainStore(tmp_path / "chain.sqlite", net.genesis)
    assert refused.value.code == "store_damaged"
    with sqlite3.connect(tmp_path / "chain.sqlite") as db:      # the conversion rolled back whole
        assert db.execute("SELECT value FROM metadata WHERE key = 'format'").fetchone()[0] == "qmemo-store/3"
        assert db.execute("SELECT count(*) FROM tx_keys").fetchone()[0] == 5


_KEEP_LOOP = """
import sys
from pathlib import Path
from qmemo.crypto.verifier import load_genesis
from qmemo.node.store import ChainStore
directory = Path(sys.argv[1])
with ChainStore(directory / "chain.sqlite", load_genesis(directory / "genesis.json"), synchronous="FULL") as store:
    for height in range(1, 7):      # each a new undoable block: the file grows by its encoding
        store.keep_branch(height - 1, [(height, bytes([height]) * 64, bytes([height]) * (24 << 20))])
        print(height, flush=True)
"""


@pytest.mark.slow
def test_a_writer_killed_inside_a_large_commit_leaves_the_branch_before_or_after_it(tmp_path):
    # A block's encoding is written past the file's end with no journal copy; a kill inside
    # that commit must leave the store as before it (the hot journal truncates the file
    # back when the store is next opened), or as after it, never a torn row.
    write_crash_devnet(tmp_path)
    genesis = load_genesis(tmp_path / "genesis.json")
    ChainStore(tmp_path / "chain.sqlite", genesis).close()
    writer = subprocess.Popen([sys.executable, "-c", _KEEP_LOOP, str(tmp_path)], cwd=REPO_ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    journal = tmp_path / "chain.sqlite-journal"
    try:
        assert writer.stdout.readline().strip() == "1"
        deadline = time.monotonic() + 60
        while not (journal.exists() and journal.stat().st_size > 0):     # inside the next commit
            assert writer.poll() is None and time.monotonic() < deadline, "no commit seen under way"
            time.sleep(0.0005)
        os.kill(writer.pid, signal.SIGKILL)
        writer.wait(timeout=10)
        reported = [1, *(int(line) for line in writer.stdout.read().split())]
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait(timeout=10)
        writer.stdout.close()
        writer.stderr.close()
    assert writer.returncode == -signal.SIGKILL and reported[-1] < 6
    with ChainStore(tmp_path / "chain.sqlite", genesis) as store:
        assert store._db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        kept = store.recent_blocks()
        assert store.height == 0 and len(kept) in (reported[-1], reported[-1] + 1)
        assert kept == [bytes([height]) * (24 << 20) for height in range(1, len(kept) + 1)]
        assert store.path.stat().st_size < (len(kept) + 1) * (24 << 20)    # a torn commit's pages: cut off
