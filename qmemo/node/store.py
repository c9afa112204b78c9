"""The chain on disk: one SQLite database (WAL) per node.

Tables (docs/protocol.md, "Storage"):
- `metadata(key, value)`: the store format, the chain id and the genesis hash (a
  store is bound to one chain; opening it with another genesis is refused), and the
  validator's producer locks (`producer_locks`, written with the branch that set them);
- `block_encodings(height, hash, encoded)`: each stored block's encoding, one row, in
  the very bytes it is served and relayed in. A block above the final tip (still
  undoable by a branch switch) is written here before the node serves or relays it,
  and replaced on a branch switch (`keep_branch`); when it becomes final its row stays:
  the bytes of a block are written once, not again per transaction;
- `blocks(height, hash, header, ids)`: each final block's signed header and its
  transactions' ids in order (64 bytes each: the Merkle proofs of `transaction`);
- `tx_keys(key, height, position, offset, length)`: where each final transaction's
  encoding lies in its block's encoding (the transaction index), keyed by the first 8
  bytes of its id as an integer; `tx_key_clashes(id, ...)` the same for a transaction
  whose key an earlier one already holds (the full id, looked up when the key's row
  names another transaction);
- `accounts(address, balance, nonce)`: the state as of the final tip;
- `receipts(id, height)`: a shard's credited cross-shard receipts (qmemo.core.receipts),
  each with the final block that credited it: a receipt is credited once, restarts included.

Why one row per block (qmemo-store/2): format 1 wrote every transaction of a final
block again as its own row, ~1.9 KB each, after the block's encoding had been written
whole; writing the bytes once and indexing them by id cut the store's CPU per
transaction by about half (docs/methodology.md, "The node's hot path").

Why an 8-byte integer key (qmemo-store/3): format 2 keyed the index by the whole 64-byte
id. Ids are hashes, so each block's rows land all over the index, and a commit rewrites
every page it touched: once the index outgrew a block's rows, every block rewrote all of
it (64 KB pages, WAL), and the CPU per stored transaction grew with the chain: `append`
took 13-14 µs a transaction over 40 blocks of 8,000 and 20-21 over the last 10 of them,
against 3.3-4.2 for format 3 (`python -m qmemo.bench.node_store --blocks 40`), and the
`store` stage was 12 of a node's 35 CPU-seconds in a one-minute devnet stage at 5,859 TPS
(docs/methodology.md section 12 has both commands). An integer key makes a row ~20 bytes
instead of ~90 and the table SQLite's own rowid tree: 4-5x fewer pages to rewrite. Eight bytes of a hash are
not unique against someone grinding for a clash (2^32 work), so a clash is never
trusted: every look-up compares the full id in the block's id list, and a transaction
whose key is taken goes to `tx_key_clashes` under its full id. A format-2 store is
converted when it is opened (its index rewritten in the same SQL transaction).

Atomicity: `keep_branch` replaces the undoable blocks in one SQL transaction (a crash
leaves the old branch or the new one, never a mix). `append` writes a block, its transaction index and every account it changed in
one SQL transaction, so after a crash at any moment the database holds the state of
exactly the last committed block. WAL with synchronous=NORMAL survives a killed
process with nothing lost; after a power failure the last commits may be gone but the
chain and state stay consistent. The node opens its store with synchronous="FULL":
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
from collections.abc import Callable, Iterator, Mapping, Sequence
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
from qmemo.errors import ConfigError, StoreError

STORE_FORMAT = "qmemo-store/3"
FORMAT_2 = "qmemo-store/2"     # converted on open (`_convert_format_2`)
CONVERT_ROWS = 100_000          # index rows converted at a time: ~45 MB of Python tuples, not the whole index
PAGE_BYTES = 65536      # SQLite's largest page size (see ChainStore.__init__)
_U32 = struct.Struct("<I")
_KEY = struct.Struct("<q")
_SPAN = struct.Struct("<II")    # a transaction's (offset, length) among a block's framed transactions
_ACCOUNT = struct.Struct("<32sQQ")   # an account the block changed: address, balance, nonce      # an id's first 8 bytes as SQLite's signed 64-bit integer: the index key
# A stored producer lock: height, fork height, since (ms), the undone block's hash.
_LOCK = struct.Struct(f"<QQq{DIGEST_BYTES}s")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS metadata (key TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS blocks (
    height INTEGER PRIMARY KEY,
    hash   BLOB NOT NULL UNIQUE,
    header BLOB NOT NULL,
    ids    BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS tx_keys (
    key      INTEGER PRIMARY KEY,
    height   INTEGER NOT NULL,
    position INTEGER NOT NULL,
    offset   INTEGER NOT NULL,
    length   INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS tx_key_clashes (
    id       BLOB PRIMARY KEY,
    height   INTEGER NOT NULL,
    position INTEGER NOT NULL,
    offset   INTEGER NOT NULL,
    length   INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS block_encodings (
    height  INTEGER PRIMARY KEY,
    hash    BLOB NOT NULL,
    encoded BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS accounts (
    address BLOB PRIMARY KEY,
    balance INTEGER NOT NULL,
    nonce   INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS receipts (id BLOB PRIMARY KEY, height INTEGER NOT NULL) WITHOUT ROWID;
"""


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


# A final transaction's block (its encoding's row must be the final block's), then `more`;
# by key in `tx_keys` or by id in `tx_key_clashes`.
_PLACE_SQL = ("SELECT i.height, i.position, b.header{more} FROM {table} i JOIN blocks b ON b.height = i.height "
              "JOIN block_encodings e ON e.height = b.height AND e.hash = b.hash WHERE i.{column} = ?")
_INDEX_SQL = "INSERT INTO {table} ({column}, height, position, offset, length) VALUES (?, ?, ?, ?, ?)"


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
            # at creation): a block's encoding is megabytes (~15 MB for 8,000 Falcon-512
            # transactions), written as a chain of overflow pages, each a WAL frame; 64 KB
            # pages cut the CPU per stored transaction by about a third against 4 KB
            # (docs/methodology.md, "The node's hot path").
            self._db.execute(f"PRAGMA page_size={PAGE_BYTES}")
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={synchronous}")
            with self._transaction():
                for statement in _SCHEMA.split(";"):   # not executescript(): it would COMMIT first
                    if statement.strip():
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

    def append(self, applied: AppliedBlock) -> None:
        """Store a validated block (the core's form) and the accounts it changed, atomically."""
        block = applied.block
        spans = b"".join(_SPAN.pack(offset, length) for offset, length in _spans(block.transactions))
        accounts = b"".join(_ACCOUNT.pack(address, account.balance, account.nonce)
                            for address, account in applied.accounts.items())
        self.append_block(block.header, b"".join(tx.id for tx in block.transactions), spans, block.encode,
                          accounts, applied.credited)

    def append_block(self, header: BlockHeader, ids: bytes, spans: bytes, encoding: Callable[[], bytes],
                     accounts: bytes, receipt_ids: Sequence[bytes] = ()) -> None:
        """Store a validated block as plain values and the accounts it changed, atomically.

        `ids`: its transactions' ids laid end to end; `spans`: (u32 offset, u32 length) of each
        transaction's encoding inside the framed transactions that follow the header;
        `encoding`: makes the block encoding, called only if the store lacks its row; `accounts`:
        (address, u64 balance, u64 nonce) per account the block changed; `receipt_ids`: the
        cross-shard receipts it credited."""
        if header.height != self.height + 1 or header.previous_hash != self.tip_hash:
            raise StoreError(f"block {header.height} does not extend the stored tip {self.height}",
                             code="not_the_next_block")
        height = header.height
        with self._lock, self._transaction():
            self._db.execute("INSERT INTO blocks (height, hash, header, ids) VALUES (?, ?, ?, ?)",
                             (height, header.hash, header.encoded, ids))
            # Its encoding is normally there already (`keep_branch`, before it was served); a
            # block appended without it (or another block at its height) gets it written here.
            # Asked first: binding the encoding copies it (~15 MB for a full Falcon block) even
            # when the row is kept.
            stored = self._db.execute("SELECT hash FROM block_encodings WHERE height = ?", (height,)).fetchone()
            if stored is None or stored[0] != header.hash:
                self._db.execute("INSERT OR REPLACE INTO block_encodings (height, hash, encoded) VALUES (?, ?, ?)",
                                 (height, header.hash, encoding()))
            self._insert_index(sorted(_index_rows(height, len(header.encoded), ids, spans)))
            self._db.executemany(
                "INSERT INTO accounts (address, balance, nonce) VALUES (?, ?, ?) "
                "ON CONFLICT (address) DO UPDATE SET balance = excluded.balance, nonce = excluded.nonce",
                _ACCOUNT.iter_unpack(accounts))
            self._db.executemany("INSERT INTO receipts (id, height) VALUES (?, ?)", ((r, height) for r in receipt_ids))
        self.height, self.tip_hash = height, header.hash

    def accounts(self) -> Iterator[tuple[bytes, int, int]]:
        """(address, balance, nonce) of every account as of the stored tip (read at start)."""
        with self._lock:
            yield from self._db.execute("SELECT address, balance, nonce FROM accounts").fetchall()

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
            self._db.executemany("INSERT INTO block_encodings (height, hash, encoded) VALUES (?, ?, ?)", blocks)
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
        read from its block's row as a blob slice: `substr` over the row made SQLite read
        the whole encoding (~15 MB for 8,000 Falcon-512 transactions, 4-6 ms) per look-up."""
        with self._lock:
            row = self._find(tx_id, ", i.offset, i.length, b.ids")
            if row is None:
                return None
            height, position, header_bytes, offset, length, packed = row
            with self._db.blobopen("block_encodings", "encoded", height, readonly=True) as blob:
                blob.seek(offset)
                encoded = blob.read(length)
        ids = split_digests(packed)
        header = BlockHeader.decode_from(header_bytes)[0]
        return CommittedTransaction(Transaction.decode(encoded), height, position, header.hash,
                                    header.merkle_root, merkle_proof(ids, position))

    def place(self, tx_id: bytes) -> TxPlace | None:
        """Where a committed transaction is, without its bytes or a proof (POST /txs/status
        asks a thousand at a time: no block's encoding or id list is read for it)."""
        with self._lock:
            row = self._find(tx_id, "")
        if row is None:
            return None
        header = BlockHeader.decode_from(row[2])[0]
        return TxPlace(row[0], row[1], header.hash, header.merkle_root)

    # --- internals ------------------------------------------------------------------------

    def _insert_index(self, rows: list[tuple]) -> None:
        """Index rows (key, height, position, offset, length, id), best in key order: rows next
        to each other in the tree are then written together. A key some earlier transaction
        holds leaves the row out of `tx_keys` (SQLite counts no change for it); then each
        row whose key names another place goes to `tx_key_clashes` by its full id - unless
        its id is the one at that place, or already a clash: a transaction in the chain
        twice, which the store refuses (StoreError `duplicate_transaction`, nothing written)
        as format 2's unique ids did."""
        changes = self._db.total_changes
        self._db.executemany(_INDEX_SQL.format(table="tx_keys", column="key") + " ON CONFLICT (key) DO NOTHING",
                             [row[:5] for row in rows])
        if self._db.total_changes - changes == len(rows):
            return
        execute = self._db.execute
        for key, height, position, offset, length, tx_id in rows:
            holder = execute("SELECT height, position FROM tx_keys WHERE key = ?", (key,)).fetchone()
            if holder == (height, position):
                continue
            if self._id_at(*holder) == tx_id or \
                    execute("SELECT 1 FROM tx_key_clashes WHERE id = ?", (tx_id,)).fetchone() is not None:
                raise StoreError(f"transaction {tx_id.hex()[:16]}.. (block {height}, position {position}) is in the "
                                 "chain already", code="duplicate_transaction")
            execute(_INDEX_SQL.format(table="tx_key_clashes", column="id"), (tx_id, height, position, offset, length))

    def _find(self, tx_id: bytes, more: str) -> tuple | None:
        """A final transaction's `_PLACE_SQL` row (under the lock): its key's row if the id at
        that row's place is this one, else its row among the clashes."""
        if len(tx_id) != DIGEST_BYTES:
            return None
        row = self._db.execute(_PLACE_SQL.format(more=more, table="tx_keys", column="key"),
                               (_KEY.unpack_from(tx_id)[0],)).fetchone()
        if row is not None and self._id_at(row[0], row[1]) == tx_id:
            return row
        return self._db.execute(_PLACE_SQL.format(more=more, table="tx_key_clashes", column="id"),
                                (tx_id,)).fetchone()

    def _id_at(self, height: int, position: int) -> bytes:
        """The id at `position` in the final block's id list: 64 bytes read from the blob,
        not the list (~0.5 MB for 8,000 transactions)."""
        with self._db.blobopen("blocks", "ids", height, readonly=True) as blob:
            blob.seek(position * DIGEST_BYTES)
            return blob.read(DIGEST_BYTES)

    def _convert_format_2(self) -> None:
        """A `qmemo-store/2` store's index (keyed by whole ids) rewritten as `tx_keys` and
        `tx_key_clashes`, in the caller's SQL transaction, `CONVERT_ROWS` rows at a time (a
        soak's store holds millions); every other table is unchanged. The old table's pages
        go to SQLite's free list: the file does not shrink."""
        old = self._db.execute("SELECT id, height, position, offset, length FROM tx_index")
        while chunk := old.fetchmany(CONVERT_ROWS):
            self._insert_index(sorted((_KEY.unpack_from(tx_id)[0], height, position, offset, length, tx_id)
                                      for tx_id, height, position, offset, length in chunk))
        self._db.execute("DROP TABLE tx_index")
        self._db.execute("UPDATE metadata SET value = ? WHERE key = 'format'", (STORE_FORMAT,))

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

    def _write_accounts(self, accounts: Mapping[bytes, Account]) -> None:
        self._db.executemany(
            "INSERT INTO accounts (address, balance, nonce) VALUES (?, ?, ?) "
            "ON CONFLICT (address) DO UPDATE SET balance = excluded.balance, nonce = excluded.nonce",
            ((address, account.balance, account.nonce) for address, account in accounts.items()))

    def _bind_to_genesis(self) -> None:
        """A new store takes the genesis state; an existing one must belong to this genesis."""
        stored = dict(self._db.execute("SELECT key, value FROM metadata"))
        if not stored:
            self._db.executemany("INSERT INTO metadata (key, value) VALUES (?, ?)", [
                ("format", STORE_FORMAT), ("chain_id", self.genesis.chain_id),
                ("genesis_hash", self.genesis.hash)])
            self._write_accounts({address: Account(balance, 0) for address, balance in self.genesis.balances})
            return
        if stored.get("format") not in (STORE_FORMAT, FORMAT_2):
            raise StoreError(f"{self.path} is in format {stored.get('format')!r}, not {STORE_FORMAT!r}: start "
                             "the node on a new data folder (devnet.sh --reset)", code="store_format")
        if stored.get("genesis_hash") != self.genesis.hash:
            raise StoreError(f"{self.path} holds another chain (genesis {bytes(stored['genesis_hash']).hex()[:16]}.., "
                             f"this genesis is {self.genesis.hash.hex()[:16]}..)", code="wrong_chain")
        if stored["format"] == FORMAT_2:
            self._convert_format_2()

    def _read_tip(self) -> tuple[int, bytes]:
        row = self._db.execute("SELECT height, hash FROM blocks ORDER BY height DESC LIMIT 1").fetchone()
        return (row[0], row[1]) if row else (0, self.genesis.hash)


def _spans(transactions: Sequence[Transaction]) -> Iterator[tuple[int, int]]:
    """(offset, length) of each transaction's encoding among the framed transactions."""
    offset = 0
    for tx in transactions:
        length = len(tx.encoded)
        yield offset + _U32.size, length
        offset += _U32.size + length


def _index_rows(height: int, header_bytes: int, ids: bytes, spans: bytes) -> Iterator[tuple]:
    """(key, height, position, offset, length, id) of each transaction in its block's encoding
    (whose transactions start after the header)."""
    key = _KEY.unpack_from
    for position, (offset, length) in enumerate(_SPAN.iter_unpack(spans)):
        tx_id = ids[position * DIGEST_BYTES:(position + 1) * DIGEST_BYTES]
        yield key(tx_id)[0], height, position, header_bytes + offset, length, tx_id


def _encode_locks(locks: Sequence[ProducerLock]) -> bytes:
    return b"".join(_LOCK.pack(lock.height, lock.fork_height, lock.since_ms, lock.block_hash) for lock in locks)
