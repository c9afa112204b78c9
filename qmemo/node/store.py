"""The chain on disk: one SQLite database per node.

Tables (docs/protocol.md, "Storage"):
- `metadata(key, value)`: the store format, the chain id and the genesis hash (a
  store is bound to one chain; opening it with another genesis is refused), and the
  validator's producer locks (`producer_locks`, written with the branch that set them);
- `block_encodings(height, hash, encoded)`: each stored block's encoding, one row, in
  the very bytes it is served and relayed in. A block above the final tip (still
  undoable by a branch switch) is written here before the node serves or relays it,
  and replaced on a branch switch (`keep_branch`); when it becomes final its row stays:
  the bytes of a block are written once;
- `blocks(height, hash, header, ids, spans)`: each final block's signed header, its
  transactions' ids in order (64 bytes each: the Merkle proofs of `transaction`) and
  where each lies in its encoding (qmemo.node.store_index, `SPAN`);
- `block_tx_keys(height, key, position)`: the transaction index, partitioned by block
  (qmemo.node.store_index says why and what a look-up costs);
- `accounts(address, balance, nonce)`: the state as of the final tip;
- `receipts(id, height)`: a shard's credited cross-shard receipts (qmemo.core.receipts),
  each with the final block that credited it: a receipt is credited once, restarts included.

Why qmemo-store/4's layout: ids are hashes, so an index in one tree keyed by id (format
3's) has every commit rewrite nearly all of it once it outgrows a block, and a write-ahead
log writes every page twice (into the log, then into the database at a checkpoint), the
blocks' bytes included: the CPU per stored transaction would grow with the chain (format
3's did; the runs are in docs/methodology.md, "The store at append speed"). Format 4
appends each block's index rows after the last block's, and keeps a rollback journal
instead of the log: pages appended past the file's end need no journal (a rollback
truncates them), so a block's bytes and its index rows are written once, straight into
the database; only the few pages a commit changes in place (the tables' inner pages, the
last leaf of each) are copied to the journal first. A store of format 2 or 3 is converted
when it is opened (qmemo.node.store_convert); a store of format 1 is refused.

Atomicity: `keep_branch` replaces the undoable blocks in one SQL transaction (a crash
leaves the old branch or the new one, never a mix). `append_final` writes a block, its
index rows and every account it changed in one SQL transaction, so after a crash at any
moment the database holds the state of exactly the last committed block (SQLite rolls a
hot journal back when the store is next opened). A killed process loses nothing
committed, whatever `synchronous`; the node opens its store with synchronous="FULL":
every commit is fsync'd before it returns, so a block the node has served survives a
power failure too (docs/api.md, "Durability").

Reopening restores the tip and the state from these tables: no block is replayed and
no signature verified again (they were verified before they were appended).

The one I/O module of the chain: the rules live in qmemo.core; this module never
decides whether a block is valid (`apply_block` does, before `append`).
"""

from __future__ import annotations

import sqlite3
import struct
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from qmemo.core.block import Block, BlockHeader, BlockIds
from qmemo.core.fork_lock import ProducerLock
from qmemo.core.genesis import Genesis
from qmemo.core.hashing import DIGEST_BYTES, split_digests
from qmemo.core.merkle import MerkleProof, merkle_proof
from qmemo.core.state import Account, AppliedBlock, ChainState
from qmemo.core.transaction import Transaction
from qmemo.errors import ConfigError, DecodeError, StoreError
from qmemo.node import store_index
from qmemo.node.store_convert import OLD_FORMATS, convert

STORE_FORMAT = "qmemo-store/4"
PAGE_BYTES = 65536      # SQLite's largest page size (see ChainStore.__init__)
# A block's encoding goes into its row this much at a time (SQLite's incremental blob I/O):
# large enough that the calls cost nothing, small enough not to copy a whole block at once.
BLOB_CHUNK_BYTES = 1 << 20
# The look-up's reads through a memory map rather than read() calls: a probe touches a few
# bytes of a 64 KB page, which read() would copy whole, at several times the CPU per probe.
# SQLite caps the map at 2 GiB (SQLITE_MAX_MMAP_SIZE); pages past it are read as before.
MMAP_BYTES = 1 << 31
# A stored producer lock: height, fork height, since (ms), the undone block's hash.
ACCOUNT = struct.Struct("<32sQQ")    # an account a block changed: address, balance, nonce (after it)
_LOCK = struct.Struct(f"<QQq{DIGEST_BYTES}s")

_SCHEMA = ("CREATE TABLE IF NOT EXISTS metadata (key TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID",
           """CREATE TABLE IF NOT EXISTS blocks (
    height INTEGER PRIMARY KEY,
    hash   BLOB NOT NULL UNIQUE,
    header BLOB NOT NULL,
    ids    BLOB NOT NULL,
    spans  BLOB NOT NULL DEFAULT x''
)""", store_index.TABLE, """CREATE TABLE IF NOT EXISTS block_encodings (
    height  INTEGER PRIMARY KEY,
    hash    BLOB NOT NULL,
    encoded BLOB NOT NULL
)""", """CREATE TABLE IF NOT EXISTS accounts (
    address BLOB PRIMARY KEY,
    balance INTEGER NOT NULL,
    nonce   INTEGER NOT NULL
) WITHOUT ROWID""",
           "CREATE TABLE IF NOT EXISTS receipts (id BLOB PRIMARY KEY, height INTEGER NOT NULL) WITHOUT ROWID")


@dataclass(frozen=True, slots=True)
class CommittedTransaction:
    """A transaction found in the chain: where it is, and the proof that it is there."""

    tx: Transaction
    height: int
    position: int
    block_hash: bytes
    merkle_root: bytes
    proof: MerkleProof


@dataclass(frozen=True, slots=True)
class TxPlace:
    """Where a committed transaction is: its block and position (no proof)."""

    height: int
    position: int
    block_hash: bytes
    merkle_root: bytes


# A final block's header, then `more`, if its encoding's row is the final block's.
_FINAL_SQL = ("SELECT b.header{more} FROM blocks b JOIN block_encodings e ON e.height = b.height "
              "AND e.hash = b.hash WHERE b.height = ?")


class ChainStore:
    """A node's chain in SQLite. Thread-safe: one connection, used under a lock."""

    def __init__(self, path: Path, genesis: Genesis, *, synchronous: str = "NORMAL",
                 connection: type[sqlite3.Connection] = sqlite3.Connection) -> None:
        """`connection`: the class of the store's one connection (a subclass that times each
        statement or sets a pragma: `qmemo.bench.node_store --statements`, `--pragma`)."""
        if synchronous not in ("NORMAL", "FULL"):
            raise ConfigError(f"synchronous must be NORMAL or FULL, not {synchronous!r}")
        self.path = Path(path)
        self.genesis = genesis
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Autocommit mode: every write below opens its own explicit transaction.
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, factory=connection)
        self._lock = threading.Lock()
        try:
            # Large pages for a new store (an existing one keeps its own: SQLite fixes the size
            # at creation): a block's encoding is megabytes (~76 MB for 40,000 Falcon-512
            # transactions), a chain of overflow pages; 64 KB pages take less CPU per stored
            # transaction than 4 KB (docs/methodology.md, section 12, "The node's hot path").
            self._db.execute(f"PRAGMA page_size={PAGE_BYTES}")
            # A rollback journal, not the write-ahead log (see the module's docstring). A
            # store of format 3 was in WAL mode: this converts it, and fails while another
            # connection has it open.
            try:
                mode = self._db.execute("PRAGMA journal_mode=TRUNCATE").fetchone()[0]
            except sqlite3.OperationalError as exc:     # locked by another connection
                mode = str(exc)
            if mode != "truncate":
                raise StoreError(f"{self.path} cannot leave its journal mode ({mode}): another process has it open",
                                 code="store_busy")
            self._db.execute(f"PRAGMA synchronous={synchronous}")
            self._db.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
            # A block's pages stay in memory until its commit writes each once: with spilling,
            # the empty pages of `_write_encoding`'s row would go to disk and come back to be
            # filled (the trial: docs/methodology.md section 13). The cost: one block's encoding
            # in memory while it is written.
            self._db.execute("PRAGMA cache_spill=OFF")
            with self._transaction():
                for statement in _SCHEMA:
                    self._db.execute(statement)
                self._bind_to_genesis()
            self.height, self.tip_hash = self._read_tip()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise StoreError(f"{self.path} is not a usable chain store: {exc}", code="store_unreadable") from None
        except StoreError:
            self._db.close()
            raise

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> ChainStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- writing ------------------------------------------------------------------------

    def append_final(self, height: int, block_hash: bytes, header: bytes, ids: bytes, spans: bytes,
                     encoding: Callable[[], bytes], accounts: bytes, receipt_ids: Sequence[bytes] = ()) -> None:
        """Store a validated final block, atomically, from values a block gives cheaply: its
        signed `header` encoding, `ids` (its transactions' ids, 64 bytes each, in order),
        `spans` (`store_index.SPAN` per transaction: where it lies in the block's encoding),
        `encoding` (makes its encoding; called only if `keep_branch` did not store it) and
        `accounts` (`ACCOUNT` per account it changed, after it) and `receipt_ids` (the
        cross-shard receipts it credited). StoreError if it does not extend the stored tip
        (`not_the_next_block`), if its parts disagree (`bad_block_parts`), or if it holds a
        transaction twice (`duplicate_transaction`); nothing is written then."""
        try:
            parsed = BlockHeader.decode_from(header)[0]
        except DecodeError as exc:
            raise StoreError(f"block {height}'s header does not decode: {exc}", code="bad_block_parts") from None
        if height != self.height + 1 or parsed.previous_hash != self.tip_hash:
            raise StoreError(f"block {height} does not extend the stored tip {self.height}",
                             code="not_the_next_block")
        count = parsed.tx_count
        if (parsed.height, parsed.hash) != (height, block_hash) or len(ids) != count * DIGEST_BYTES or \
                len(spans) != count * store_index.SPAN.size:
            raise StoreError(f"block {height}'s header, hash, {len(ids)} bytes of ids and {len(spans)} bytes of "
                             f"spans do not describe one block of {count} transactions", code="bad_block_parts")
        rows = store_index.index_rows(ids)
        with self._lock, self._transaction():
            self._db.execute("INSERT INTO blocks (height, hash, header, ids, spans) VALUES (?, ?, ?, ?, ?)",
                             (height, block_hash, header, ids, spans))
            # Its encoding is normally there already (`keep_branch`, before it was served); a
            # block appended without it (or another block at its height) gets it written here.
            stored = self._db.execute("SELECT hash FROM block_encodings WHERE height = ?", (height,)).fetchone()
            if stored is None or stored[0] != block_hash:
                self._write_encoding(height, block_hash, encoding())
            self._db.execute(store_index.INSERT, (height, rows))
            self._write_accounts(accounts)
            self._db.executemany("INSERT INTO receipts (id, height) VALUES (?, ?)", ((r, height) for r in receipt_ids))
        self.height, self.tip_hash = height, block_hash

    def append(self, applied: AppliedBlock) -> None:
        """`append_final` for a validated block and the accounts it changed (today's callers)."""
        block = applied.block
        header = block.header
        transactions = block.transactions
        self.append_final(header.height, header.hash, header.encoded, b"".join(tx.id for tx in transactions),
                          store_index.spans_of(len(header.encoded), [len(tx.encoded) for tx in transactions]),
                          block.encode, b"".join(ACCOUNT.pack(address, account.balance, account.nonce)
                                                 for address, account in applied.accounts.items()),
                          applied.credited)

    def credited_receipts(self) -> set[bytes]:
        """Every receipt id the final blocks credited (read at start)."""
        return {receipt for (receipt,) in self._all("SELECT id FROM receipts")}

    def keep_branch(self, fork_height: int, blocks: list[tuple[int, bytes, bytes]],
                    locks: Sequence[ProducerLock] | None = None) -> None:
        """Make the undoable blocks above `fork_height` exactly `blocks` ((height, hash,
        encoding), ascending), atomically: the node's branch above its final tip. `locks`
        (None: unchanged) become the stored producer locks in the same SQL transaction: a
        switch that undid our block is never stored without the lock it set."""
        with self._lock, self._transaction():
            # Never a final block's row: a branch cannot fork below the final tip.
            self._db.execute("DELETE FROM block_encodings WHERE height > ?", (max(fork_height, self.height),))
            for height, block_hash, encoding in blocks:
                self._write_encoding(height, block_hash, encoding)
            if locks is not None:
                self._db.execute("INSERT INTO metadata (key, value) VALUES ('producer_locks', ?) ON CONFLICT (key) "
                                 "DO UPDATE SET value = excluded.value", (_encode_locks(locks),))

    def producer_locks(self) -> list[ProducerLock]:
        """The producer locks stored by the last `keep_branch` that had them (qmemo.core.fork_lock):
        a validator restarted after a switch keeps obeying its locks until they end."""
        row = self._one("SELECT value FROM metadata WHERE key = 'producer_locks'")
        data = bytes(row[0]) if row else b""
        return [ProducerLock(height, block_hash, fork_height, since_ms)
                for height, fork_height, since_ms, block_hash in _LOCK.iter_unpack(data)]

    # --- reading ------------------------------------------------------------------------

    def load_state(self) -> ChainState:
        """The state as of the stored tip, read back without replaying any block."""
        with self._lock:
            accounts = {address: Account(balance, nonce) for address, balance, nonce
                        in self._db.execute("SELECT address, balance, nonce FROM accounts")}
        header = self.header(self.height)
        timestamp_ms = header.timestamp_ms if header else self.genesis.genesis_time_ms
        return ChainState(self.genesis, accounts, self.height, self.tip_hash, timestamp_ms)

    def accounts(self) -> list[tuple[bytes, int, int]]:
        """(address, balance, nonce) of every account as of the stored tip (read at start)."""
        return self._all("SELECT address, balance, nonce FROM accounts")

    def recent_blocks(self) -> list[bytes]:
        """The encodings of the stored undoable blocks above the final tip, ascending."""
        return [encoded for (encoded,) in self._all(
            "SELECT encoded FROM block_encodings WHERE height > ? ORDER BY height", self.height)]

    def header(self, height: int) -> BlockHeader | None:
        row = self._one("SELECT header FROM blocks WHERE height = ?", height)
        return BlockHeader.decode_from(row[0])[0] if row else None

    def block_bytes(self, height: int) -> bytes | None:
        """The final block's encoding at `height` (what peers sync), as stored: one row."""
        row = self._one("SELECT e.encoded FROM blocks b JOIN block_encodings e ON e.height = b.height "
                        "AND e.hash = b.hash WHERE b.height = ?", height)
        return row[0] if row else None

    def block(self, height: int) -> Block | None:
        data = self.block_bytes(height)
        return Block.decode(data) if data is not None else None

    def block_ids(self, height: int, *, with_ids: bool = True) -> BlockIds | None:
        """The final block's header and id list (`with_ids`) from its `blocks` row: nothing
        decoded but the header, nor any transaction's bytes read."""
        row = self._one(f"SELECT header{', ids' if with_ids else ''} FROM blocks WHERE height = ?", height)
        if row is None:
            return None
        return BlockIds(BlockHeader.decode_from(row[0])[0], split_digests(row[1]) if with_ids else None)

    def transaction(self, tx_id: bytes) -> CommittedTransaction | None:
        """A committed transaction with its block and Merkle inclusion proof. Its bytes are
        read from its block's row as a blob slice: `substr` over the row would make SQLite
        read the whole encoding (~15 MB for 8,000 Falcon-512 transactions) per look-up."""
        with self._lock:
            place = self._find(tx_id)
            if place is None:
                return None
            height, position = place
            row = self._db.execute(_FINAL_SQL.format(more=", b.ids, b.spans"), (height,)).fetchone()
            if row is None:
                return None
            header_bytes, packed, spans = row
            offset, length = store_index.span_at(spans, position)
            with self._db.blobopen("block_encodings", "encoded", height, readonly=True) as blob:
                blob.seek(offset)
                encoded = blob.read(length)
        header = BlockHeader.decode_from(header_bytes)[0]
        return CommittedTransaction(Transaction.decode(encoded), height, position, header.hash,
                                    header.merkle_root, merkle_proof(split_digests(packed), position))

    def place(self, tx_id: bytes) -> TxPlace | None:
        """Where a committed transaction is, without its bytes or a proof (POST /txs/status
        asks a thousand at a time: no block's encoding or id list is read for it)."""
        with self._lock:
            place = self._find(tx_id)
            row = self._db.execute(_FINAL_SQL.format(more=""), (place[0],)).fetchone() if place else None
        if row is None:
            return None
        header = BlockHeader.decode_from(row[0])[0]
        return TxPlace(place[0], place[1], header.hash, header.merkle_root)

    # --- internals ------------------------------------------------------------------------

    def _find(self, tx_id: bytes) -> tuple[int, int] | None:
        """(height, position) of a final transaction (under the lock): the newest index row
        with its key whose place holds exactly this id."""
        if len(tx_id) != DIGEST_BYTES:
            return None
        for height, position in self._db.execute(store_index.CANDIDATES, (self.height, store_index.key_of(tx_id))):
            if self._id_at(height, position) == tx_id:
                return height, position
        return None

    def _id_at(self, height: int, position: int) -> bytes:
        """The id at `position` in the final block's id list: 64 bytes read from the blob,
        not the list (~2.5 MB for 40,000 transactions)."""
        with self._db.blobopen("blocks", "ids", height, readonly=True) as blob:
            blob.seek(position * DIGEST_BYTES)
            return blob.read(DIGEST_BYTES)

    def _write_encoding(self, height: int, block_hash: bytes, encoding: bytes) -> None:
        """A block's encoding into its row (inside the caller's SQL transaction): the row made
        with room for it, then filled through SQLite's incremental blob I/O. Binding the bytes
        instead makes SQLite copy them whole first (the trial: docs/methodology.md section 13)."""
        self._db.execute("INSERT OR REPLACE INTO block_encodings (height, hash, encoded) VALUES (?, ?, zeroblob(?))",
                         (height, block_hash, len(encoding)))
        view = memoryview(encoding)
        with self._db.blobopen("block_encodings", "encoded", height) as blob:
            for start in range(0, len(view), BLOB_CHUNK_BYTES):
                blob.write(view[start:start + BLOB_CHUNK_BYTES])

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    def _one(self, sql: str, *args: object) -> tuple | None:
        with self._lock:
            return self._db.execute(sql, args).fetchone()

    def _all(self, sql: str, *args: object) -> list[tuple]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def _write_accounts(self, accounts: bytes) -> None:
        """`ACCOUNT` rows, packed, over the stored ones (inside the caller's SQL transaction)."""
        self._db.executemany(
            "INSERT INTO accounts (address, balance, nonce) VALUES (?, ?, ?) "
            "ON CONFLICT (address) DO UPDATE SET balance = excluded.balance, nonce = excluded.nonce",
            ACCOUNT.iter_unpack(accounts))

    def _bind_to_genesis(self) -> None:
        """A new store takes the genesis state; an existing one must belong to this genesis
        (one of an older format is converted: qmemo.node.store_convert)."""
        stored = dict(self._db.execute("SELECT key, value FROM metadata"))
        if not stored:
            self._db.executemany("INSERT INTO metadata (key, value) VALUES (?, ?)", [
                ("format", STORE_FORMAT), ("chain_id", self.genesis.chain_id),
                ("genesis_hash", self.genesis.hash)])
            self._write_accounts(b"".join(ACCOUNT.pack(address, balance, 0)
                                          for address, balance in self.genesis.balances))
            return
        if stored.get("format") not in (STORE_FORMAT, *OLD_FORMATS):
            raise StoreError(f"{self.path} is in format {stored.get('format')!r}, not {STORE_FORMAT!r}: start "
                             "the node on a new data folder (devnet.sh --reset)", code="store_format")
        if stored.get("genesis_hash") != self.genesis.hash:
            raise StoreError(f"{self.path} holds another chain (genesis {bytes(stored['genesis_hash']).hex()[:16]}.., "
                             f"this genesis is {self.genesis.hash.hex()[:16]}..)", code="wrong_chain")
        if stored["format"] != STORE_FORMAT:
            convert(self._db, stored["format"])
            self._db.execute("UPDATE metadata SET value = ? WHERE key = 'format'", (STORE_FORMAT,))

    def _read_tip(self) -> tuple[int, bytes]:
        row = self._db.execute("SELECT height, hash FROM blocks ORDER BY height DESC LIMIT 1").fetchone()
        return (row[0], row[1]) if row else (0, self.genesis.hash)


def _encode_locks(locks: Sequence[ProducerLock]) -> bytes:
    return b"".join(_LOCK.pack(lock.height, lock.fork_height, lock.since_ms, lock.block_hash) for lock in locks)
