"""The node's HTTP API as one table of operations, and its OpenAPI 3.1 document.

`OPERATIONS` is the API: app.py routes each operation to the `Handlers` method it names,
and `openapi_document()` describes the same operations, their parameters, bodies and every
status each can answer, with the JSON schemas generated from qmemo.api_schema's
dataclasses (the documents' classes) and the envelopes below (lists, errors, request
bodies: the node writes them with qmemo.net.wire). A route cannot exist
without its description; tests/unit/test_openapi.py holds every writer's output to its
schema, and the fuzzer every answer a real node gives. The node serves the document at `GET /openapi.json`; the
schema-driven fuzzer (tests/integration/test_api_fuzz.py) drives every operation from it.

The few shapes that are the core's, not the API's (a transaction's and a block header's
JSON form, written by `Transaction.to_json` and `BlockHeader.to_json`) are written here by
hand; a test holds them to those methods' keys.

Pure: builds a document, does no I/O.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from dataclasses import dataclass, field
from typing import Any

from qmemo import __version__, api_schema
from qmemo.net import wire
from qmemo.node.answers import BlockAnswer
from qmemo.records import OMIT_NONE

OPENAPI_VERSION = "3.1.0"
JSON = "application/json"
BINARY = "application/octet-stream"
PROMETHEUS_TEXT = "text/plain"

HEX = {"type": "string", "pattern": "^([0-9a-f]{2})*$", "description": "bytes as lowercase hex"}
U64_MAX = 2**64 - 1
U32_MAX = 2**32 - 1


def hex_of(length: int) -> dict[str, Any]:
    return {"type": "string", "pattern": f"^[0-9a-f]{{{2 * length}}}$", "description": f"{length} bytes as lowercase hex"}


def integer(minimum: int, maximum: int) -> dict[str, Any]:
    return {"type": "integer", "minimum": minimum, "maximum": maximum}


# --- the envelopes: lists of qmemo.api_schema's values, errors, request bodies ---------------
# The answers' and requests' outer shapes, described here for this document only: qmemo.net.wire
# writes them, tests/unit/test_openapi.py holds what it writes to them.

@dataclass(frozen=True, slots=True)
class ErrorBody:
    """Every error answer (docs/api.md section 2); a busy door's says when to send again."""

    error: str
    detail: str
    retry_after_ms: int | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True, slots=True)
class TxRejection:
    """`POST /tx`'s answer to a rejected transaction: its result, and the `error` code every
    error body has."""

    id: bytes | None
    status: str
    code: str
    detail: str
    error: str


@dataclass(frozen=True, slots=True)
class TxsAnswer:
    """`POST /txs`: one result per transaction, in input order, and the totals."""

    results: tuple[api_schema.TxResult, ...]
    accepted: int
    duplicate: int
    rejected: int


@dataclass(frozen=True, slots=True)
class TxStatuses:
    statuses: tuple[api_schema.TxStatus, ...]


@dataclass(frozen=True, slots=True)
class ReceiptStatuses:
    receipts: tuple[api_schema.ReceiptStatus, ...]


@dataclass(frozen=True, slots=True)
class Accounts:
    accounts: tuple[api_schema.AccountState, ...]


@dataclass(frozen=True, slots=True)
class Blocks:
    blocks: tuple[api_schema.BlockSummary, ...]


@dataclass(frozen=True, slots=True)
class TxIdsRequest:
    """`POST /txs/status` and `POST /receipts/status`' body."""

    ids: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class AddressesRequest:
    """`POST /accounts`' body."""

    addresses: tuple[bytes, ...]


# --- the core's JSON forms (protocol.md section 5) ---------------------------------------------

TRANSACTION = {
    "type": "object", "additionalProperties": False,
    "required": ["chain_id", "scheme_id", "public_key", "nonce", "recipient", "amount", "fee", "payload", "signature"],
    "properties": {"chain_id": integer(0, U32_MAX), "scheme_id": integer(0, 255), "public_key": HEX,
                   "nonce": integer(0, U64_MAX), "recipient": hex_of(32), "amount": integer(0, U64_MAX),
                   "fee": integer(0, U64_MAX), "payload": HEX, "signature": HEX},
}
HEADER_KEYS = ("version", "chain_id", "height", "previous_hash", "timestamp_ms", "producer_index", "tx_count",
               "merkle_root", "signature")
SHARDED_HEADER_KEYS = ("receipt_count", "receipts_bytes", "receipts_root")
HEADER = {
    "type": "object", "additionalProperties": False, "required": list(HEADER_KEYS),
    "properties": {"version": integer(0, 255), "chain_id": integer(0, U32_MAX), "height": integer(0, U64_MAX),
                   "previous_hash": HEX, "timestamp_ms": integer(0, U64_MAX), "producer_index": integer(0, U32_MAX),
                   "tx_count": integer(0, U32_MAX), "merkle_root": HEX, "signature": HEX,
                   "receipt_count": integer(0, U32_MAX), "receipts_bytes": integer(0, U32_MAX), "receipts_root": HEX},
}


# --- dataclasses -> JSON Schema ----------------------------------------------------------------

# A field whose JSON key is not its Python name (TxStatus.tx_id is "id" on the wire).
JSON_NAMES = {(api_schema.TxStatus, "tx_id"): "id"}
# A block in `GET /blocks` and `GET /block/{height}`: its summary, and with `txs=full` its
# header and transactions instead of their ids (qmemo.net.wire.block_json); a sharded
# chain's block also carries its receipts section.
BLOCK_WHOLE = {"header": {"$ref": "#/components/schemas/BlockHeader"},
               "transactions": {"type": "array", "items": {"$ref": "#/components/schemas/Transaction"}},
               "receipts": HEX}
FIELD_SCHEMAS = {
    (Blocks, "blocks"): {"type": "array", "items": {"$ref": "#/components/schemas/Block"}},
    (TxIdsRequest, "ids"): {"type": "array", "items": hex_of(64)},
    (AddressesRequest, "addresses"): {"type": "array", "items": hex_of(32)},
}


class SchemaSet:
    """The components a document's schemas refer to, built from dataclasses on first use."""

    def __init__(self) -> None:
        self.components: dict[str, dict[str, Any]] = {"Transaction": TRANSACTION, "BlockHeader": HEADER}

    def block(self) -> dict[str, Any]:
        """The `Block` component: a BlockSummary's schema with BLOCK_WHOLE's keys besides."""
        if "Block" not in self.components:
            self.ref(api_schema.BlockSummary)
            summary = self.components["BlockSummary"]
            self.components["Block"] = {**summary, "properties": {**summary["properties"], **BLOCK_WHOLE},
                                        "description": "A block: its summary, then its ids, its whole "
                                                       "transactions, or nothing more (the `txs` parameter)."}
        return {"$ref": "#/components/schemas/Block"}

    def ref(self, cls: type) -> dict[str, Any]:
        name = cls.__name__
        if name not in self.components:
            self.components[name] = {}          # a placeholder: a dataclass may refer to itself
            self.components[name] = self.object_schema(cls)
        return {"$ref": f"#/components/schemas/{name}"}

    def object_schema(self, cls: type) -> dict[str, Any]:
        hints = typing.get_type_hints(cls)
        properties, required = {}, []
        for item in dataclasses.fields(cls):
            key = JSON_NAMES.get((cls, item.name), item.name)
            properties[key] = FIELD_SCHEMAS.get((cls, item.name)) or self.of(hints[item.name])
            has_default = item.default is not dataclasses.MISSING or item.default_factory is not dataclasses.MISSING
            if not has_default and not item.metadata.get("omit_none"):
                required.append(key)
        schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
        if required:
            schema["required"] = required
        if cls.__doc__ and not cls.__doc__.startswith(f"{cls.__name__}("):    # dataclass's own generated doc
            schema["description"] = " ".join(cls.__doc__.split())
        return schema

    def of(self, hint: Any) -> dict[str, Any]:
        """The JSON Schema of a field's type, as qmemo.records writes and reads it."""
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin in (typing.Union, types.UnionType):
            others = [arg for arg in args if arg is not type(None)]
            inner = self.of(others[0]) if len(others) == 1 else {"anyOf": [self.of(arg) for arg in others]}
            return {"anyOf": [inner, {"type": "null"}]} if len(others) < len(args) else inner
        if origin in (tuple, list):
            return {"type": "array", "items": self.of(args[0])}
        if origin is dict:
            return {"type": "object", "additionalProperties": self.of(args[1])}
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            return {"type": "string", "enum": [member.value for member in hint]}
        if dataclasses.is_dataclass(hint):
            return self.ref(hint)
        simple = {bool: {"type": "boolean"}, int: {"type": "integer"}, float: {"type": "number"},
                  str: {"type": "string"}, bytes: HEX}
        if hint in simple:
            return dict(simple[hint])
        raise TypeError(f"no JSON schema for {hint!r}")


# --- the operations ------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Param:
    name: str
    where: str                  # "query" or "path"
    schema: dict[str, Any]
    required: bool = False
    description: str = ""


@dataclass(frozen=True, slots=True)
class Operation:
    method: str
    path: str
    handler: str                # the `Handlers` method that answers it
    summary: str
    params: tuple[Param, ...] = ()
    body: dict[str, Any] | None = None          # content type -> schema (a type or a JSON Schema)
    body_required: bool = True                  # False: no body is an empty batch
    answers: dict[int, Any] = dataclasses.field(default_factory=dict)   # status -> schema, or {type: schema}
    errors: tuple[int, ...] = ()                # statuses answered with an ErrorBody, beyond ALWAYS


# What any request can be answered: a query or body that does not decode (400), a URL over the
# limit (414), what aiohttp's parser refuses (400, 414, 431: docs/api.md section 2), and a node
# that is starting or stopping (503).
ALWAYS = (400, 414, 431, 503)
BODY_ERRORS = (408, 413)       # a POST's body too slow, or over its limit
TX_ID = Param("tx_id", "path", hex_of(64), True, "a transaction id")
TXS_VIEW = Param("txs", "query", {"type": "string", "enum": ["full", "ids", "none"]}, False,
                 "full transactions (default), their ids, or the summary alone")
BINARY_BODY = {"type": "string", "format": "binary"}
TX_ANSWER = {"anyOf": [{"$ref": "#/components/schemas/TxRejection"}, {"$ref": "#/components/schemas/ErrorBody"}]}

OPERATIONS: tuple[Operation, ...] = (
    Operation("POST", "/tx", "post_tx", "Submit one transaction as JSON",
              body={JSON: {"$ref": "#/components/schemas/Transaction"}},
              answers={200: api_schema.TxResult, 422: TX_ANSWER, 429: TX_ANSWER, 503: TX_ANSWER}, errors=BODY_ERRORS),
    Operation("POST", "/txs", "post_txs", "Submit a batch: binary records, or {\"transactions\": [...]}",
              body={BINARY: BINARY_BODY,
                    JSON: {"type": "object", "additionalProperties": False, "required": ["transactions"],
                           "properties": {"transactions": {"type": "array",
                                                           "items": {"$ref": "#/components/schemas/Transaction"}}}}},
              body_required=False, answers={200: TxsAnswer}, errors=(*BODY_ERRORS, 429)),
    Operation("GET", "/tx/{tx_id}", "get_tx", "Where a transaction is", params=(TX_ID,),
              answers={200: api_schema.TxStatus}),
    Operation("POST", "/txs/status", "post_txs_status", "Where each of many transactions is",
              body={JSON: TxIdsRequest}, answers={200: TxStatuses}, errors=BODY_ERRORS),
    Operation("POST", "/receipts/status", "post_receipts_status", "Where each cross-shard receipt is on this shard",
              body={JSON: TxIdsRequest}, answers={200: ReceiptStatuses},
              errors=(*BODY_ERRORS, 404)),     # 404: an unsharded chain has no receipts
    Operation("GET", "/blocks", "get_blocks", "Blocks from a height, ascending",
              params=(Param("from", "query", integer(0, U64_MAX), True),
                      Param("limit", "query", integer(1, 100), False, "at most 10 with txs=full"), TXS_VIEW),
              answers={200: Blocks}),
    Operation("GET", "/block/{height}", "get_block", "One block, by height or 'latest'",
              params=(Param("height", "path", {"type": "string", "pattern": "^([0-9]{1,20}|latest)$"}, True), TXS_VIEW),
              answers={200: {JSON: {"$ref": "#/components/schemas/Block"}}}, errors=(404,)),
    Operation("GET", "/account/{address}", "get_account", "An account's balance and nonces",
              params=(Param("address", "path", hex_of(32), True),), answers={200: api_schema.AccountState}),
    Operation("POST", "/accounts", "post_accounts", "Many accounts at once",
              body={JSON: AddressesRequest}, answers={200: Accounts}, errors=BODY_ERRORS),
    Operation("GET", "/status", "get_status", "Who the node is, where its chain is, whom it sees",
              answers={200: api_schema.NodeStatus}),
    Operation("GET", "/health", "get_health", "200 when ready, 503 while starting or stopping",
              answers={200: api_schema.Health, 503: {JSON: {"anyOf": [{"$ref": "#/components/schemas/Health"},
                                                                      {"$ref": "#/components/schemas/ErrorBody"}]}}}),
    Operation("GET", "/metrics", "get_metrics", "Counters and recent percentiles (Prometheus text if Accept asks)",
              answers={200: {JSON: api_schema.MetricsSnapshot, PROMETHEUS_TEXT: {"type": "string"}}}),
    Operation("GET", "/metrics/prometheus", "get_prometheus", "The metrics in Prometheus's text format",
              answers={200: {PROMETHEUS_TEXT: {"type": "string"}}}),
    Operation("GET", "/openapi.json", "get_openapi", "This document", answers={200: {JSON: {"type": "object"}}}),
    Operation("POST", "/peer/txs", "peer_txs", "A peer relays a binary batch (admitted like any other)",
              body={BINARY: BINARY_BODY}, body_required=False, answers={200: api_schema.TxCounts},
              errors=(*BODY_ERRORS, 429)),
    Operation("POST", "/peer/block", "peer_block", "A peer pushes a block encoding",
              body={BINARY: BINARY_BODY}, answers={200: BlockAnswer}, errors=(*BODY_ERRORS, 422)),
    Operation("POST", "/peer/block_ids", "peer_block_ids", "A peer pushes a block as its header and transaction ids",
              body={BINARY: BINARY_BODY}, answers={200: BlockAnswer}, errors=(*BODY_ERRORS, 422)),
    Operation("GET", "/peer/blocks", "peer_blocks", "Block encodings from a height (sync)",
              params=(Param("from", "query", integer(1, U64_MAX), True),
                      Param("limit", "query", integer(1, wire.MAX_SYNC_BLOCKS))),
              answers={200: {BINARY: BINARY_BODY}}),
    Operation("GET", "/peer/receipts", "peer_receipts", "A shard's final receipt bundles for another shard (long poll)",
              params=(Param("shard", "query", integer(0, 0xFFFF), True), Param("from", "query", integer(1, U64_MAX), True),
                      Param("limit", "query", integer(0, wire.MAX_SYNC_BLOCKS)),
                      Param("wait_ms", "query", integer(0, 30_000), False, "how long to wait for a new final block")),
              answers={200: {BINARY: BINARY_BODY}}, errors=(404, 422)),
)


@functools.cache
def openapi_document() -> dict[str, Any]:
    """The OpenAPI 3.1 document of `OPERATIONS` (built once: it does not change while a node runs)."""
    schemas = SchemaSet()

    def content(schema: Any) -> dict[str, Any]:
        by_type = schema if isinstance(schema, dict) and all("/" in key for key in schema) else {JSON: schema}
        return {kind: {"schema": schemas.of(s) if not isinstance(s, dict) else s} for kind, s in by_type.items()}

    error = content(ErrorBody)
    schemas.ref(TxRejection)         # named only inside the JSON Schemas above
    schemas.block()
    paths: dict[str, dict[str, Any]] = {}
    for op in OPERATIONS:
        responses = {str(status): {"description": f"{status}", "content": content(schema)}
                     for status, schema in op.answers.items()}
        for status in (*ALWAYS, 405, *op.errors):
            responses.setdefault(str(status), {"description": f"{status}: an error body", "content": error})
        entry: dict[str, Any] = {"operationId": op.handler, "summary": op.summary, "responses": responses}
        if op.params:
            entry["parameters"] = [{"name": p.name, "in": p.where, "required": p.required, "schema": p.schema,
                                    **({"description": p.description} if p.description else {})} for p in op.params]
        if op.body is not None:
            entry["requestBody"] = {"required": op.body_required, "content": content(op.body)}
        paths.setdefault(op.path, {})[op.method.lower()] = entry
    return {
        "openapi": OPENAPI_VERSION,
        "info": {"title": "qMEMO node", "version": __version__,
                 "description": "A qMEMO devnet node's HTTP API; docs/api.md explains every operation."},
        "paths": paths,
        "components": {"schemas": schemas.components},
    }
