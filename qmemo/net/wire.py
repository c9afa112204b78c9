"""The node's wire formats: binary frames for bulk traffic, JSON objects for people.

Binary batch (docs/api.md, "Binary batches"): the concatenation of records

    [u32 little-endian length][record bytes]

and nothing else (the framing itself is qmemo.node.frames: the node keeps blocks on disk
in it too). A transaction batch (`POST /txs`, `POST /peer/txs`) carries canonical
transaction encodings; a block batch (`GET /peer/blocks`) carries block encodings
(qmemo.core.block). Peers only ever talk binary: JSON would cost more than the
signature check it wraps (hex doubles 1.8 KB of Falcon key and signature).

The JSON forms here are the answers clients read: per-transaction results, block
summaries and accounts. They are built from core objects through their public
fields and `to_json`; nothing here decides what is valid.

Pure: no I/O, no node state.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from qmemo.core.block import Block
from qmemo.errors import DecodeError
from qmemo.node.frames import decode_frames, encode_frames

# A peer's relay batch may hold at most this many transactions (the protocol's limit;
# a node's own relay_max_batch_txs must not exceed it).
MAX_PEER_BATCH_TXS = 10_000


# --- binary batches ----------------------------------------------------------------------

def encode_tx_batch(encodings: Sequence[bytes]) -> bytes:
    """A binary transaction batch: each canonical encoding with its u32 length."""
    return encode_frames(encodings)


def decode_tx_batch(body: bytes, max_count: int) -> list[bytes]:
    """The canonical encodings of a binary transaction batch (not yet decoded)."""
    return decode_frames(body, max_count, "transaction")


def encode_block_batch(blocks: Sequence[bytes]) -> bytes:
    return encode_frames(blocks)


def decode_block_batch(body: bytes, max_count: int) -> list[Block]:
    return [Block.decode(record) for record in decode_frames(body, max_count, "block")]


# --- JSON ----------------------------------------------------------------------------------

def dumps(document: Any) -> bytes:
    return orjson.dumps(document)


def loads(body: bytes) -> Any:
    """JSON from a request body; DecodeError (400) if it is not JSON."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise DecodeError(f"the body is not valid JSON: {exc}", code="malformed_json") from None


def expect_key(document: Any, key: str, kind: type, what: str) -> Any:
    """`document[key]`, which must exist and be of `kind`; DecodeError otherwise."""
    if not isinstance(document, dict):
        raise DecodeError(f"{what} must be a JSON object", code="malformed")
    value = document.get(key)
    if type(value) is not kind:
        raise DecodeError(f"{what}.{key} must be a JSON {kind.__name__}", code="malformed")
    return value


def block_json(block: Block, validator_names: Sequence[str], *, tx_ids_only: bool) -> dict[str, Any]:
    """A block for `/block*` answers: a summary, then transaction ids or full transactions."""
    header = block.header
    document: dict[str, Any] = {
        "height": header.height,
        "hash": header.hash.hex(),
        "previous_hash": header.previous_hash.hex(),
        "timestamp_ms": header.timestamp_ms,
        "producer": header.producer_index,
        "producer_name": validator_names[header.producer_index]
        if header.producer_index < len(validator_names) else None,
        "tx_count": header.tx_count,
        "merkle_root": header.merkle_root.hex(),
    }
    if tx_ids_only:
        document["tx_ids"] = [tx.id.hex() for tx in block.transactions]
    else:
        document["header"] = header.to_json()
        document["transactions"] = [tx.to_json() for tx in block.transactions]
    return document


def tx_result(tx_id: bytes | None, status: str, code: str | None = None,
              detail: str | None = None) -> dict[str, Any]:
    """One entry of a `/txs` answer; `code` and `detail` only for rejections (id null if
    the transaction did not even decode)."""
    result: dict[str, Any] = {"id": tx_id.hex() if tx_id is not None else None, "status": status}
    if code is not None:
        result["code"] = code
        result["detail"] = detail
    return result
