"""The node's wire formats: binary frames for bulk traffic, JSON objects for people.

Binary batch (docs/api.md, "Binary batches"): the concatenation of records

    [u32 little-endian length][record bytes]

and nothing else (the container is qmemo.frames, shared with the files a node keeps at
a clean stop). A transaction batch (`POST /txs`, `POST /peer/txs`) carries canonical
transaction encodings; a block batch (`GET /peer/blocks`) carries block encodings
(qmemo.core.block). Peers only ever talk binary: JSON would cost more than the
signature check it wraps (hex doubles 1.8 KB of Falcon key and signature).

The JSON forms here are the node's answers, encoded from the values it returns
(qmemo.node.answers, qmemo.node.reporting) and from core objects through their public
fields and `to_json`: per-transaction results, transaction status, block summaries,
accounts, `/status` and `/metrics`. The documents readers decode are qmemo.api_schema's
classes (the reading side, qmemo.net.client, decodes with them); what is built here from
a block or an account is checked against them by tests/unit/test_api_schema.py. Nothing
here decides what is valid.

Pure: no I/O, no node state.
"""

from __future__ import annotations

import struct

from collections.abc import Callable, Sequence
from typing import Any

import orjson

from qmemo.core.block import Block, BlockIds
from qmemo.core.state import Account
from qmemo.core.transaction import Transaction
from qmemo.errors import DecodeError, Misuse, TooLarge
from qmemo.frames import decode_frames, encode_frames
from qmemo.api_schema import BlockSummary, TxStatus
from qmemo.node.answers import TX_STATUSES, Item, TxOutcome

# Blocks per `GET /peer/blocks` page: what a node serves and what its client asks for.
MAX_SYNC_BLOCKS = 100


# --- binary batches ----------------------------------------------------------------------

def encode_tx_batch(encodings: Sequence[bytes]) -> bytes:
    """A binary transaction batch: each canonical encoding with its u32 length."""
    return encode_frames(encodings)


def decode_tx_batch(body: bytes, max_count: int) -> list[bytes]:
    """The canonical encodings of a binary transaction batch (not yet decoded)."""
    return decode_frames(body, max_count, "transaction")


def encode_block_batch(blocks: Sequence[bytes]) -> bytes:
    return encode_frames(blocks)


def decode_block_batch(body: bytes, max_count: int) -> list[bytes]:
    """The block encodings of a binary block batch (not yet decoded)."""
    return decode_frames(body, max_count, "block")


# The answer of GET /peer/receipts: a first frame of (u32 the source's chain id, u64 the
# highest height the answer covers), then one frame per receipt bundle (qmemo.core.receipts).
_RECEIPTS_HEAD = struct.Struct("<IQ")
MAX_RECEIPT_BUNDLES = 10_000


def encode_receipt_batch(chain_id: int, covered: int, bundles: Sequence[bytes]) -> bytes:
    return encode_frames([_RECEIPTS_HEAD.pack(chain_id, covered), *bundles])


def decode_receipt_batch(body: bytes) -> tuple[int, int, list[bytes]]:
    """(chain id, covered height, bundle encodings) of a GET /peer/receipts answer."""
    frames = decode_frames(body, MAX_RECEIPT_BUNDLES + 1, "receipt bundle")
    if not frames or len(frames[0]) != _RECEIPTS_HEAD.size:
        raise DecodeError("a receipts answer starts with its chain id and covered height", code="malformed")
    chain_id, covered = _RECEIPTS_HEAD.unpack(frames[0])
    return chain_id, covered, frames[1:]


def receipt_statuses_json(ids: Sequence[bytes], statuses: Sequence[tuple[str, bool]]) -> dict[str, Any]:
    return {"receipts": [{"id": rid.hex(), "status": status, "final": final}
                         for rid, (status, final) in zip(ids, statuses)]}


# --- JSON in -----------------------------------------------------------------------------

def loads(body: bytes) -> Any:
    """JSON from a request body; DecodeError (400) if it is not JSON."""
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise DecodeError(f"the body is not valid JSON: {exc}", code="malformed_json") from None


def expect_key(document: Any, key: str, kind: type, what: str) -> Any:
    """`document[key]`, which must exist, be of `kind` and be the object's only key (a
    misspelt option is refused, not silently ignored); DecodeError otherwise."""
    if not isinstance(document, dict):
        raise DecodeError(f"{what} must be a JSON object", code="malformed")
    value = document.get(key)
    if type(value) is not kind:
        raise DecodeError(f"{what}.{key} must be a JSON {kind.__name__}", code="malformed")
    if len(document) != 1:
        unknown = sorted(name for name in document if name != key)
        shape = "[...]" if kind is list else kind.__name__
        raise DecodeError(f"{what} has unknown keys {unknown}; it is {{\"{key}\": {shape}}}", code="malformed")
    return value


def decode_tx_items(body: bytes, *, binary: bool, max_count: int) -> list[Item]:
    """A `POST /txs` body as admission's items: a binary batch's encodings as they are, or
    `{"transactions": [...]}` decoded, where an element that does not decode is that
    element's rejection (its DecodeError), not the whole request's."""
    if binary:
        return decode_tx_batch(body, max_count)
    document = loads(body)
    entries = expect_key(document, "transactions", list, "the body")
    if len(entries) > max_count:
        raise TooLarge(f"{len(entries)} transactions in one batch, the limit is {max_count}", code="batch_too_large")
    items: list[Item] = []
    for entry in entries:
        try:
            items.append(Transaction.from_json(entry))
        except DecodeError as exc:
            items.append(exc.detached())    # a value now: its traceback would hold `items`
    return items


# --- JSON out ----------------------------------------------------------------------------

def _default(value: Any) -> Any:
    """What orjson cannot encode itself in the node's values: bytes go as hex."""
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    raise TypeError(f"{type(value).__name__} is not part of the wire format")


def dumps(document: Any) -> bytes:
    """JSON of a document or of the node's frozen values (dataclasses by field name,
    bytes as hex)."""
    return orjson.dumps(document, default=_default)


def error_json(code: str, detail: str) -> dict[str, str]:
    """Every error body: `{"error": code, "detail": sentence}` (QmemoError.to_json's shape,
    for errors that are not ours: aiohttp's, and bugs)."""
    return {"error": code, "detail": detail}


def tx_result(outcome: TxOutcome) -> dict[str, Any]:
    """One entry of a `/txs` answer; `code` and `detail` only for rejections (id null if
    the transaction did not even decode)."""
    tx_id = outcome.tx_id
    result: dict[str, Any] = {"id": tx_id.hex() if tx_id is not None else None, "status": outcome.status}
    error = outcome.error
    if error is not None:
        result["code"] = error.code
        result["detail"] = error.detail
    return result


def tx_answer(outcome: TxOutcome) -> dict[str, Any]:
    """The `POST /tx` answer: its one result, and for a rejection also the `error` code every
    error body has (the HTTP status is the error's own)."""
    document = tx_result(outcome)
    if outcome.error is not None:
        document["error"] = outcome.error.code
    return document


def tx_counts(outcomes: Sequence[TxOutcome]) -> dict[str, int]:
    """How many of each status (`POST /peer/txs`' answer, and the totals of `POST /txs`')."""
    counts = dict.fromkeys(TX_STATUSES, 0)
    for outcome in outcomes:
        counts[outcome.status] += 1
    return counts


def encode_tx_results(outcomes: Sequence[TxOutcome]) -> bytes:
    """The `POST /txs` answer: one result per transaction, in input order, and the totals."""
    return dumps({"results": [tx_result(outcome) for outcome in outcomes], **tx_counts(outcomes)})


def tx_status_json(status: TxStatus) -> dict[str, Any]:
    """`GET /tx/{id}`: the status, with where and the proof once committed, or why evicted."""
    document: dict[str, Any] = {"id": status.tx_id.hex(), "status": status.status}
    if status.height is not None:     # committed; the proof is left out of a batch's answers
        document.update(height=status.height, position=status.position, block_hash=status.block_hash.hex(),
                        merkle_root=status.merkle_root.hex(), confirmations=status.confirmations, final=status.final)
        if status.proof is not None:
            document["proof"] = status.proof.to_json()
    if status.reason is not None:
        document["reason"] = status.reason
    return document


def account_json(address: bytes, account: Account, pending_nonce: int) -> dict[str, Any]:
    return {"address": address.hex(), "balance": account.balance, "nonce": account.nonce,
            "pending_nonce": pending_nonce}


def accounts_json(accounts: Sequence[tuple[bytes, Account, int]]) -> dict[str, Any]:
    """`POST /accounts`: each (address, account, pending nonce) as `GET /account` gives it, in order."""
    return {"accounts": [account_json(*entry) for entry in accounts]}


def health_json(ready: bool, node: str) -> dict[str, Any]:
    """`GET /health` (its status is 200 when ready, else 503)."""
    return {"ready": ready, "node": node}


def blocks_json(blocks: Sequence[Block | BlockIds], validator_names: Sequence[str], *, tx_ids_only: bool,
                depth_of: Callable[[int], tuple[int, bool]] | None = None,
                summary_only: bool = False) -> dict[str, Any]:
    """`GET /blocks`: each block as `block_json` gives it, ascending (with its depth
    from `depth_of(height)` when given)."""
    return {"blocks": [block_json(block, validator_names, tx_ids_only=tx_ids_only,
                                  depth=depth_of(block.height) if depth_of else None,
                                  summary_only=summary_only) for block in blocks]}


def block_json(block: Block | BlockIds, validator_names: Sequence[str], *, tx_ids_only: bool,
               depth: tuple[int, bool] | None = None, summary_only: bool = False) -> dict[str, Any]:
    """A block for `/block*` answers: its summary (`block_summary`), then transaction ids or
    full transactions - or nothing more with `summary_only` (`txs=none`): a client asking
    whether a block it read is final yet needs its hash and `final`, not its thousands of
    ids again. A `BlockIds` serves the summary and the ids (it holds no transactions)."""
    if summary_only or tx_ids_only:
        return block_summary_json(block_summary(block, validator_names, depth=depth, with_ids=not summary_only))
    if isinstance(block, BlockIds):
        raise Misuse(f"block {block.header.height}: full transactions asked of its ids alone", code="no_transactions")
    document = block_summary_json(block_summary(block, validator_names, depth=depth, with_ids=False))
    document["header"] = block.header.to_json()
    document["transactions"] = [tx.to_json() for tx in block.transactions]
    return document


def block_summary(block: Block | BlockIds, validator_names: Sequence[str], *, depth: tuple[int, bool] | None,
                  with_ids: bool) -> BlockSummary:
    """The summary readers decode (qmemo.api_schema.BlockSummary): with `confirmations` and
    `final` when `depth` is given, with the transaction ids when `with_ids`."""
    header = block.header
    ids = None
    if with_ids:
        ids = block.tx_ids if isinstance(block, BlockIds) else [tx.id for tx in block.transactions]
        if ids is None:
            raise Misuse(f"block {header.height}'s ids were not read", code="ids_not_read")
    confirmations, final = depth if depth is not None else (None, None)
    return BlockSummary(header.height, header.hash, header.previous_hash, header.timestamp_ms, header.producer_index,
                        validator_names[header.producer_index] if header.producer_index < len(validator_names) else None,
                        header.tx_count, header.merkle_root, confirmations, final,
                        None if ids is None else tuple(ids))


def block_summary_json(summary: BlockSummary) -> dict[str, Any]:
    document: dict[str, Any] = {
        "height": summary.height,
        "hash": summary.hash.hex(),
        "previous_hash": summary.previous_hash.hex(),
        "timestamp_ms": summary.timestamp_ms,
        "producer": summary.producer,
        "producer_name": summary.producer_name,
        "tx_count": summary.tx_count,
        "merkle_root": summary.merkle_root.hex(),
    }
    if summary.confirmations is not None:
        document["confirmations"], document["final"] = summary.confirmations, summary.final
    if summary.tx_ids is not None:
        document["tx_ids"] = [tx_id.hex() for tx_id in summary.tx_ids]
    return document
