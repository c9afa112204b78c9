"""The node API's client: what the tools that drive and watch nodes ask of a node, typed.

`NodeClient(url, session)` calls docs/api.md's routes and answers with qmemo.api_schema's
dataclasses - the classes the node itself fills in - so a field renamed on one side
fails at the decode, naming the key, not as a missing dictionary key in a report. It is
the one place outside the server (qmemo.net.app, qmemo.net.handlers) that knows the
node's paths; the generator, the dashboard, the scenario runner, the benchmarks and the
soak all ask through it.

Every call raises a `NodeApiError` (qmemo.errors) naming the node and the route:
`NodeUnreachable` for no answer (refused, reset, timed out: a node down, paused or behind
a cut link), `NodeRefused` for an error status (the node's own code kept), and the base
class with code "unreadable" for a 200 whose body is not the documented document (another
version: the message names the schema found). `post_txs` is the exception: a sender reads
every status itself (429 retry later, 503 another node), so it gets the status and the
body (`Answer`) and decodes what it needs.

Nothing here retries, waits or picks a node: callers decide (the generator fails over, the
dashboard shows a node down). The session is the caller's, shared by all its clients (one
connection pool), or opened with `open_clients`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp
import orjson
from yarl import URL

from qmemo import api_schema
from qmemo.api_schema import (AccountState, BlockSummary, Health, MetricsSnapshot, NodeStatus, ReceiptStatus, TxCounts,
                              TxResult, TxStatus)
from qmemo.errors import DecodeError, Misuse, NodeApiError, NodeRefused, NodeUnreachable
from qmemo.node.answers import BlockAnswer
from qmemo.records import from_json

JSON = {"Content-Type": "application/json"}
BINARY = {"Content-Type": "application/octet-stream"}
DEFAULT_TIMEOUT_S = 10.0
BLOCK_TXS = ("ids", "none")     # what a client asks blocks with: their ids, or the summaries alone

T = TypeVar("T")


def base_url(host: str, port: int) -> str:
    """A node's base URL (what `--nodes`, `--peers` and `NodeClient` take)."""
    return f"http://{host}:{port}"


@dataclass(frozen=True, slots=True)
class Answer:
    """An answer as sent, whatever its status: for a caller that reads every status itself."""

    status: int
    body: bytes

    def json(self) -> Any:
        """The body as JSON; DecodeError if it is not."""
        try:
            return orjson.loads(self.body)
        except orjson.JSONDecodeError as exc:
            raise DecodeError(f"the answer ({self.status}) is not JSON: {exc}") from None

    def counts(self) -> TxCounts:
        """How many were accepted, duplicate, rejected (a 200 `POST /txs` answer)."""
        return api_schema.decode_tx_counts(self.json())

    def results(self) -> list[TxResult]:
        """Each transaction's outcome, in input order (a 200 `POST /txs` answer)."""
        return api_schema.decode_tx_results(self.json())

    def block_answer(self) -> BlockAnswer:
        """What the node did with a pushed block (a 200 `POST /peer/block` answer)."""
        return from_json(BlockAnswer, self.json(), "/peer/block")

    def error(self) -> str | None:
        """The error code of an error answer (`{"error": code, "detail": ...}`), None if it has none."""
        try:
            document = self.json()
        except DecodeError:
            return None
        error = document.get("error") if isinstance(document, dict) else None
        return error if isinstance(error, str) else None


class NodeClient:
    """One node's API over a shared `aiohttp.ClientSession`."""

    def __init__(self, url: str, session: aiohttp.ClientSession, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.url = url.rstrip("/")
        self._session = session
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._urls: dict[str, URL] = {}

    def __repr__(self) -> str:
        return f"NodeClient({self.url!r})"

    def with_timeout(self, timeout_s: float) -> NodeClient:
        """The same node over the same session, its calls given `timeout_s` each."""
        return NodeClient(self.url, self._session, timeout_s)

    # --- node ---------------------------------------------------------------------------------

    async def health(self) -> Health:
        """Whether the node serves: its 503 while starting or stopping is an answer too."""
        return await self._get("/health", api_schema.decode_health, ok=(200, 503))

    async def status(self) -> NodeStatus:
        return await self._get("/status", api_schema.decode_status)

    async def metrics(self) -> MetricsSnapshot:
        return await self._get("/metrics", api_schema.decode_metrics)

    # --- blocks -------------------------------------------------------------------------------

    async def blocks(self, from_height: int, limit: int, *, txs: str = "ids") -> list[BlockSummary]:
        """Up to `limit` blocks from `from_height` up, with their transaction ids (`txs="ids"`)
        or as summaries alone (`txs="none"`)."""
        _check_txs(txs)
        return await self._get(f"/blocks?from={from_height}&limit={limit}&txs={txs}", api_schema.decode_blocks)

    async def latest_block(self, *, txs: str = "ids") -> BlockSummary:
        """The tip's block (NodeRefused 404 before the first block)."""
        _check_txs(txs)
        return await self._get(f"/block/latest?txs={txs}", api_schema.decode_block)

    # --- transactions and accounts ----------------------------------------------------------

    async def post_txs(self, body: bytes, *, timeout_s: float | None = None) -> Answer:
        """`POST /txs` with a binary batch (qmemo.net.wire.encode_tx_batch): the answer, any status."""
        return await self._answer("POST", "/txs", body, BINARY, timeout_s)

    async def post_peer_block(self, encoded: bytes) -> Answer:
        """`POST /peer/block` with one block encoding, as a peer pushes it: the answer, any status."""
        return await self._answer("POST", "/peer/block", encoded, BINARY, None)

    async def tx_status(self, tx_id: bytes) -> TxStatus:
        return await self._get(f"/tx/{tx_id.hex()}", api_schema.decode_tx_status)

    async def tx_statuses(self, tx_ids: Sequence[bytes]) -> list[TxStatus]:
        """One status per id, in order, without proofs (at most 1,000 ids: docs/api.md)."""
        body = orjson.dumps({"ids": [tx_id.hex() for tx_id in tx_ids]})
        return await self._call("POST", "/txs/status", body,
                                lambda document: api_schema.decode_tx_statuses(document, len(tx_ids)))

    async def receipt_statuses(self, receipt_ids: Sequence[bytes]) -> list[ReceiptStatus]:
        """Where each cross-shard receipt is on this shard's node, in order (at most 1,000)."""
        body = orjson.dumps({"ids": [rid.hex() for rid in receipt_ids]})
        return await self._call("POST", "/receipts/status", body,
                                lambda document: api_schema.decode_receipt_statuses(document, len(receipt_ids)))

    async def accounts(self, addresses: Sequence[bytes]) -> list[AccountState]:
        """Each address's balance and nonces, in order (at most 10,000: docs/api.md)."""
        body = orjson.dumps({"addresses": [address.hex() for address in addresses]})
        accounts = await self._call("POST", "/accounts", body, api_schema.decode_accounts)
        if len(accounts) != len(addresses):
            raise NodeApiError(f"{self.url}/accounts answered {len(accounts)} accounts for {len(addresses)}",
                               code="unreadable")
        return accounts

    # --- the calls ------------------------------------------------------------------------------

    async def _get(self, path: str, decode: Callable[[Any], T], ok: tuple[int, ...] = (200,)) -> T:
        return await self._call("GET", path, None, decode, ok)

    async def _call(self, method: str, path: str, body: bytes | None, decode: Callable[[Any], T],
                    ok: tuple[int, ...] = (200,)) -> T:
        answer = await self._answer(method, path, body, JSON if body is not None else None, None)
        where = f"{method} {self.url}{path}"
        if answer.status not in ok:
            raise _refused(where, answer)
        try:
            return decode(answer.json())
        except DecodeError as exc:
            raise NodeApiError(f"{where}: {exc}", code="unreadable") from None

    async def _answer(self, method: str, path: str, body: bytes | None, headers: dict[str, str] | None,
                      timeout_s: float | None) -> Answer:
        timeout = self._timeout if timeout_s is None else aiohttp.ClientTimeout(total=timeout_s)
        url = self._urls.get(path)
        if url is None:     # parsed once per path, not per request (the generator posts ~50 a second)
            url = self._urls[path] = URL(self.url + path)
        try:
            async with self._session.request(method, url, data=body, headers=headers,
                                             timeout=timeout) as response:
                return Answer(response.status, await response.read())
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            raise NodeUnreachable(f"{method} {self.url}{path}: {type(exc).__name__}: {exc}",
                                  transport=type(exc).__name__,
                                  request_left=not isinstance(exc, aiohttp.ClientConnectorError)) from None


@asynccontextmanager
async def open_clients(urls: Sequence[str], timeout_s: float = DEFAULT_TIMEOUT_S) -> AsyncIterator[list[NodeClient]]:
    """A client per URL, in order, sharing one session that closes on leaving."""
    async with aiohttp.ClientSession() as session:
        yield [NodeClient(url, session, timeout_s) for url in urls]


def _refused(where: str, answer: Answer) -> NodeRefused:
    """The node's error answer, in its own words (`{"error", "detail"}`, or the body's start)."""
    code = answer.error()
    detail = str(answer.json().get("detail")) if code is not None else repr(answer.body[:200])
    code = code or f"http_{answer.status}"
    return NodeRefused(f"{where} answered {answer.status} {code}: {detail}", node_code=code,
                       node_status=answer.status)


def _check_txs(txs: str) -> None:
    if txs not in BLOCK_TXS:
        raise Misuse(f"txs must be one of {BLOCK_TXS}, got {txs!r}", code="bad_block_txs")
