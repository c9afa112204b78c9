"""The chain store's transaction index (qmemo-store/4): a final block's rows, and the look-up.

The index is partitioned by time: `block_tx_keys(height, key, position)`, primary key
(height, key, position), holds one row per transaction of each final block, `key` being
the first 8 bytes of the transaction's id (little-endian, signed: SQLite's integer).
A block's rows are written in key order under its own height, so they land after every
earlier block's: each commit appends its pages and rewrites none.

Why not one tree keyed by the id (formats 2 and 3): ids are hashes, so each block's rows
land on every page of such a tree once it has more pages than a block has rows, and every
commit rewrites the whole index; the store's CPU per transaction would grow with the chain
(docs/methodology.md, "The store at append speed", has the runs).

The price is the look-up: an id names no height, so `CANDIDATES` probes each final block,
newest first, and the caller stops at the first whose full id matches (a client mostly
asks about recent transactions). A probe is one seek in SQLite; an id that is in no block
costs one probe per block, so its time grows with the number of final blocks, where one
tree keyed by id answers in one descent (`python -m qmemo.bench.node_store` prints it; the
figures are in docs/methodology.md, "The store at append speed").

Eight bytes of a hash are not unique against someone grinding for a clash (2^32 work), so a
key is never trusted: the caller compares the full id in the block's id list, and two
transactions of one block that share a key are both indexed (the position is part of the
primary key). A block holding one transaction twice is refused here (`duplicate_transaction`);
a transaction repeated in a later block is `apply_block`'s to refuse (its nonce is spent),
as the store cannot look every transaction up in every block.

`spans`: where each transaction lies in its block's encoding, `SPAN` (u32 offset, u32
length, little-endian) per position, stored with the block (`blocks.spans`), so an index
row needs no offset of its own. Per block in numpy, never per transaction in Python.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np
import orjson

from qmemo.core.hashing import DIGEST_BYTES
from qmemo.errors import StoreError

SPAN = struct.Struct("<II")     # a transaction's offset in its block's encoding, and its length
_LENGTH_PREFIX = 4              # each transaction in a block encoding follows a u32 length (docs/protocol.md)
_KEY_WORDS = DIGEST_BYTES // 8  # 8-byte words per id: the key is the first

TABLE = """CREATE TABLE IF NOT EXISTS block_tx_keys (
    height   INTEGER NOT NULL,
    key      INTEGER NOT NULL,
    position INTEGER NOT NULL,
    PRIMARY KEY (height, key, position)
) WITHOUT ROWID"""

# One statement for a block's rows: a JSON array of [key, position] pairs, in key order,
# unpacked by SQLite itself (json_each) - no Python object per row.
INSERT = ("INSERT INTO block_tx_keys (height, key, position) "
          "SELECT ?1, value ->> 0, value ->> 1 FROM json_each(?2)")

# (height, position) of each final transaction whose key is ?2, in the final blocks from ?1
# down to 1: newest first, one seek per height (CROSS JOIN keeps SQLite from scanning the
# index instead). Read lazily, so a hit in a recent block probes no older one.
CANDIDATES = ("WITH RECURSIVE heights(height) AS (SELECT ?1 WHERE ?1 > 0 "
              "UNION ALL SELECT height - 1 FROM heights WHERE height > 1) "
              "SELECT i.height, i.position FROM heights CROSS JOIN block_tx_keys i "
              "ON i.height = heights.height AND i.key = ?2")

_KEY = struct.Struct("<q")


def key_of(tx_id: bytes) -> int:
    """An id's index key: its first 8 bytes as SQLite's signed 64-bit integer."""
    return _KEY.unpack_from(tx_id)[0]


def keys_of(ids: bytes) -> np.ndarray:
    """`key_of` each id of a packed id list (n x 64 bytes), as one array."""
    return np.frombuffer(ids, dtype="<i8")[::_KEY_WORDS]


def index_rows(ids: bytes) -> bytes:
    """A block's index rows as `INSERT` takes them: [key, position] pairs in key order, from
    its ids (n x 64 bytes, block order). StoreError `duplicate_transaction` if an id is there twice."""
    keys = keys_of(ids)
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    clashes = np.flatnonzero(ordered[1:] == ordered[:-1])
    if clashes.size:
        _refuse_duplicates(ids, order, ordered, clashes)
    return orjson.dumps(np.stack((ordered, order.astype(np.int64)), axis=1), option=orjson.OPT_SERIALIZE_NUMPY)


def _refuse_duplicates(ids: bytes, order: np.ndarray, ordered: np.ndarray, clashes: np.ndarray) -> None:
    """Among positions whose keys are equal (a clash someone ground, or one id twice), refuse
    a block whose full ids repeat."""
    for key in {int(ordered[i]) for i in clashes}:
        positions = order[ordered == key].tolist()
        seen: dict[bytes, int] = {}
        for position in positions:
            tx_id = ids[position * DIGEST_BYTES:(position + 1) * DIGEST_BYTES]
            if tx_id in seen:
                raise StoreError(f"transaction {tx_id.hex()[:16]}.. is at positions {seen[tx_id]} and {position} of "
                                 "one block", code="duplicate_transaction")
            seen[tx_id] = position


def spans_of(header_bytes: int, lengths: Sequence[int]) -> bytes:
    """`SPAN` of each transaction of a block encoding whose header is `header_bytes` long and
    whose transactions are `lengths` long, in order: after the header, each is a u32 length
    and then its bytes."""
    sizes = np.asarray(lengths, dtype=np.int64)
    if sizes.size == 0:
        return b""
    ends = header_bytes + np.cumsum(sizes + _LENGTH_PREFIX)
    offsets = ends - sizes
    if int(ends[-1]) > 0xFFFF_FFFF:
        raise StoreError(f"a block encoding of {int(ends[-1])} bytes is past the 4 GiB a span can address",
                         code="block_too_large")
    return np.stack((offsets, sizes), axis=1).astype("<u4").tobytes()


def span_at(spans: bytes, position: int) -> tuple[int, int]:
    """(offset, length) of the transaction at `position` in its block's encoding."""
    return SPAN.unpack_from(spans, position * SPAN.size)
