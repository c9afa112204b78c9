"""Stores of an older format, converted to qmemo-store/4 when they are opened.

Formats 2 and 3 hold everything format 4 does, in another index: format 2 one row per
transaction keyed by its whole id (`tx_index`), format 3 by 8 bytes of it (`tx_keys`,
and `tx_key_clashes` by whole id for a transaction whose key was taken); each row says
where the transaction lies in its block's encoding. Converting writes each final block's
spans (`blocks.spans`) and index rows (`block_tx_keys`) from those rows, block by block,
then drops the old tables, all in the caller's SQL transaction: a crash mid-way leaves
the old store as it was. The blocks' encodings, headers, ids and the accounts are kept
as they are. The old tables' pages go to SQLite's free list (the file does not shrink;
later blocks reuse them). A format-1 store (one row per transaction's bytes) is refused
by the caller: its data folder is started anew.

Never decides anything about a block: it moves rows.
"""

from __future__ import annotations

import sqlite3

from qmemo.core.hashing import DIGEST_BYTES
from qmemo.errors import StoreError
from qmemo.node import store_index

FORMAT_2 = "qmemo-store/2"
FORMAT_3 = "qmemo-store/3"
OLD_FORMATS = (FORMAT_2, FORMAT_3)
CONVERT_ROWS = 100_000          # old index rows read at a time: a few blocks, never the whole index

# Every old index row: (height, position, offset, length, key or NULL, id or NULL), block by block.
_OLD_ROWS = {
    FORMAT_2: "SELECT height, position, offset, length, NULL, id FROM tx_index ORDER BY height, position",
    FORMAT_3: "SELECT height, position, offset, length, key, NULL FROM tx_keys UNION ALL "
              "SELECT height, position, offset, length, NULL, id FROM tx_key_clashes ORDER BY height, position",
}
_OLD_TABLES = {FORMAT_2: ("tx_index",), FORMAT_3: ("tx_keys", "tx_key_clashes")}


def convert(db: sqlite3.Connection, old_format: str) -> None:
    """Rewrite the index of a store in `old_format` as format 4's (in the caller's SQL
    transaction). StoreError `store_damaged` if its rows do not cover each block exactly."""
    columns = {name for _, name, *_ in db.execute("PRAGMA table_info(blocks)")}
    if "spans" not in columns:
        db.execute("ALTER TABLE blocks ADD COLUMN spans BLOB NOT NULL DEFAULT x''")
    rows = db.execute(_OLD_ROWS[old_format])
    height, block_rows = None, []
    while chunk := rows.fetchmany(CONVERT_ROWS):
        for row in chunk:
            if row[0] != height and block_rows:
                _convert_block(db, height, block_rows)
                block_rows = []
            height = row[0]
            block_rows.append(row)
    if block_rows:
        _convert_block(db, height, block_rows)
    uncovered = db.execute("SELECT count(*) FROM blocks WHERE length(spans) * ? != length(ids) * ?",
                           (DIGEST_BYTES, store_index.SPAN.size)).fetchone()[0]
    if uncovered:
        raise StoreError(f"{uncovered} block(s) of this {old_format} store lack index rows for some of their "
                         "transactions: start the node on a new data folder", code="store_damaged")
    for table in _OLD_TABLES[old_format]:
        db.execute(f"DROP TABLE {table}")


def _convert_block(db: sqlite3.Connection, height: int, rows: list[tuple]) -> None:
    """One block's spans and index rows from its old rows (in position order)."""
    if [row[1] for row in rows] != list(range(len(rows))):
        raise StoreError(f"block {height}'s old index rows do not number its transactions 0..{len(rows) - 1}",
                         code="store_damaged")
    spans = b"".join(store_index.SPAN.pack(offset, length) for _, _, offset, length, _, _ in rows)
    keys = sorted((key if key is not None else store_index.key_of(tx_id), position) for _, position, _, _, key, tx_id in rows)
    db.execute("UPDATE blocks SET spans = ? WHERE height = ?", (spans, height))
    db.executemany("INSERT INTO block_tx_keys (height, key, position) VALUES (?, ?, ?)",
                   ((height, key, position) for key, position in keys))
