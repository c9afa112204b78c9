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

from qmemo.core.block import BlockIds
from qmemo.core.genesis import parse_genesis
from qmemo.core.merkle import verify_proof
from qmemo.core.state import Account, AppliedBlock, ChainState, apply_block
from qmemo.core.transaction import derive_address
from qmemo.core.verify_cache import VerifyCache
from qmemo.crypto.keys import NamedKey, save_keys
from qmemo.crypto.schemes import get_scheme
from qmemo.crypto.verifier import RegistryVerifier, load_genesis
from qmemo.errors import ConfigError, StoreError
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


@pytest.mark.parametrize("where", ["in an earlier block", "twice in the block"])
def test_a_block_holding_a_committed_transaction_again_is_refused_and_nothing_written(chain, where):
    # apply_block refuses it first; the store does not take it either (format 2's unique ids
    # did; format 3's index would have filed the copy as a key clash).
    net, store = chain
    before = store.load_state()
    fresh = net.transfer(net.alice, net.bob, 1)
    again = store.block(1).transactions[0] if where == "in an earlier block" else fresh
    block = replace(net.next_block([fresh]), transactions=(fresh, again))
    with pytest.raises(StoreError) as refused:
        store.append(AppliedBlock(block, {}, 0))
    assert refused.value.code == "duplicate_transaction"
    after = store.load_state()
    assert (after.height, after.tip_hash, after.accounts) == (before.height, before.tip_hash, before.accounts)
    assert store.block(4) is None and store.transaction(fresh.id) is None


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


class _OneKey:
    """Every id's index key is 0: each transaction after the first clashes."""

    @staticmethod
    def unpack_from(data: bytes) -> tuple[int]:
        return (0,)


def test_transactions_whose_index_keys_clash_are_found_by_their_full_ids(tmp_path, monkeypatch):
    # Eight bytes of a hash can be ground to a clash (2^32 work): a key's row is never
    # trusted without the full id, and a clashing transaction is indexed under its id.
    import qmemo.node.store as store_module
    monkeypatch.setattr(store_module, "_KEY", _OneKey)
    net = Devnet()
    with ChainStore(tmp_path / "chain.sqlite", net.genesis) as store:
        for _ in range(3):
            store.append(net.apply(net.next_block([net.transfer(net.alice, net.bob, 3),
                                                   net.transfer(net.carol, net.alice, 4)])))
        blocks = [store.block(height) for height in (1, 2, 3)]
        assert store._db.execute("SELECT count(*) FROM tx_key_clashes").fetchone()[0] == 5
        for block in blocks:
            for position, tx in enumerate(block.transactions):
                found, place = store.transaction(tx.id), store.place(tx.id)
                assert (found.tx, found.height, found.position) == (tx, block.header.height, position)
                assert verify_proof(block.header.merkle_root, tx.id, found.proof)
                assert (place.height, place.position) == (block.header.height, position)
        assert store.transaction(bytes(64)) is None and store.place(bytes(64)) is None
        assert store.place(b"short") is None        # not an id at all


@pytest.mark.parametrize("keys", ["ids' own", "all clashing"])
def test_a_store_of_format_2_is_converted_when_opened(chain, tmp_path, monkeypatch, keys):
    # qmemo-store/2 indexed transactions by their whole ids; its chain stays, its index is
    # rewritten as keys (in rows of CONVERT_ROWS), and every transaction is found again.
    import qmemo.node.store as store_module
    net, store = chain
    monkeypatch.setattr(store_module, "CONVERT_ROWS", 4)
    blocks = [store.block(height) for height in (1, 2, 3)]
    expected = {tx.id: store.transaction(tx.id) for block in blocks for tx in block.transactions}
    rows = []
    for block in blocks:
        for position, tx in enumerate(block.transactions):
            row = store._db.execute("SELECT offset, length FROM tx_keys WHERE height = ? AND position = ?",
                                    (block.header.height, position)).fetchone()
            rows.append((tx.id, block.header.height, position, *row))
    db = store._db
    db.execute("BEGIN")
    db.execute("CREATE TABLE tx_index (id BLOB PRIMARY KEY, height INTEGER NOT NULL, position INTEGER NOT NULL, "
               "offset INTEGER NOT NULL, length INTEGER NOT NULL) WITHOUT ROWID")
    db.executemany("INSERT INTO tx_index VALUES (?, ?, ?, ?, ?)", rows)
    db.execute("DROP TABLE tx_keys")
    db.execute("DROP TABLE tx_key_clashes")
    db.execute("UPDATE metadata SET value = 'qmemo-store/2' WHERE key = 'format'")
    db.execute("COMMIT")
    store.close()
    if keys == "all clashing":
        monkeypatch.setattr(store_module, "_KEY", _OneKey)
    with ChainStore(tmp_path / "chain.sqlite", net.genesis) as reopened:
        assert {tx_id: reopened.transaction(tx_id) for tx_id in expected} == expected
        clashes = reopened._db.execute("SELECT count(*) FROM tx_key_clashes").fetchone()[0]
        assert clashes == (len(expected) - 1 if keys == "all clashing" else 0)
        tables = {name for (name,) in reopened._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "tx_index" not in tables
        assert reopened._db.execute("SELECT value FROM metadata WHERE key = 'format'").fetchone()[0] == \
            "qmemo-store/3"
