"""HTTP handlers: decode the request -> call the node -> encode the answer. Nothing else.

Every rule lives in the core or the node; a handler only parses what the client sent
into core objects (or raises the `DecodeError` that becomes a 400), calls one node
method, and writes its result as JSON (or binary for peers). Errors are turned into
`{"error": code, "detail": sentence}` with the error's own status by the middleware
in app.py. docs/api.md documents every route.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from aiohttp import web

from qmemo.core.block import Block, BlockIds
from qmemo.core.codec import U64_MAX, parse_hex
from qmemo.core.hashing import DIGEST_BYTES
from qmemo.core.transaction import ADDRESS_BYTES, Transaction
from qmemo.errors import DecodeError, NotFound, SlowBody, TooLarge
from qmemo.net import prometheus, wire
from qmemo.net.openapi import openapi_document
from qmemo.node.service import Node
from qmemo.node.stages import HTTP, thread_cpu_ns

JSON_TYPE = "application/json"
BINARY_TYPE = "application/octet-stream"
MAX_BLOCKS_WITH_TXS = 10        # full transactions as JSON: ~3.7 KB each, 4,000 per block
MAX_BLOCKS_IDS = 100            # ids only: what the load generator's follower asks for
MAX_ACCOUNTS = 10_000           # per POST /accounts
MAX_STATUS_IDS = 1_000          # per POST /txs/status: like a /txs batch
DEFAULT_SYNC_PAGE = 20          # GET /peer/blocks without a limit
MAX_RECEIPT_WAIT_MS = 30_000    # GET /peer/receipts' long poll at most

OPENAPI_JSON = wire.dumps(openapi_document())

# Where read_body notes how many bytes it really read (the metrics count those, not the
# Content-Length header a client may lie in).
BODY_BYTES_KEY = web.RequestKey("qmemo_body_bytes", int)


async def read_body(request: web.Request, max_bytes: int, timeout_s: float) -> bytes:
    """The request body, or TooLarge (413) past `max_bytes` - checked before reading when
    the client says how long it is, else as soon as the chunks read pass it.

    The chunks are joined once: aiohttp's `request.read()` grows a bytearray chunk by chunk
    and then copies it into bytes, two more passes over a pushed block's ~13 MB. They are
    taken one by one (`readchunk`), as the parser made them: `readany` joins whatever has
    arrived into one more copy first (its share of the event loop, `perf record` on `qmemo
    bench node`: docs/methodology.md section 12)."""
    if request.content_length is not None and request.content_length > max_bytes:
        raise TooLarge(f"the body is {request.content_length} bytes, the limit is {max_bytes}",
                       code="body_too_large")
    content = request.content
    chunks: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                chunk, chunk_end = await content.readchunk()
                if not chunk:
                    # The body's end is `at_eof()`, whatever readchunk says with it: an empty
                    # body is aiohttp's one shared EmptyStreamReader, which answers (b"", False)
                    # once per process and (b"", True) ever after, so "(b'', True) means a chunk
                    # of a chunked body ended, more may follow" would loop for good on it.
                    if not chunk_end or content.at_eof():
                        break
                    continue            # a chunk of a chunked body ended and the body has not
                size += len(chunk)
                if size > max_bytes:
                    raise TooLarge(f"the body is over the limit of {max_bytes} bytes", code="body_too_large")
                chunks.append(chunk)
    except TimeoutError:
        raise SlowBody(f"the body took over {timeout_s:g} s to arrive ({size} bytes read)") from None
    except ConnectionResetError:        # the client went away mid-body: nobody to answer
        raise web.HTTPBadRequest(reason="the client closed the connection before sending its body") from None
    finally:
        request[BODY_BYTES_KEY] = size      # what was read, a refused body's too
    return b"".join(chunks)


def query_int(request: web.Request, name: str, default: int | None, minimum: int, maximum: int) -> int:
    raw = request.query.get(name)
    if raw is None:
        if default is None:
            raise DecodeError(f"the query parameter {name!r} is required", code="malformed")
        return default
    try:
        value = int(raw)
    except ValueError:
        raise DecodeError(f"the query parameter {name!r} must be an integer, got {raw!r}", code="malformed") from None
    if not minimum <= value <= maximum:
        raise DecodeError(f"{name} must be between {minimum} and {maximum}, got {value}", code="out_of_range")
    return value


class Handlers:
    def __init__(self, node: Node) -> None:
        self.node = node
        self.config = node.config
        self._retry_after = {"Retry-After": str(node.config.retry_after_s)}
        self.stages = node.metrics.stages

    def respond(self, body: bytes, status: int = 200) -> web.Response:
        """A JSON answer. The one place Retry-After is set: on every 429 and 503 ("retry later"),
        whether a handler or the error middleware answers it."""
        return web.Response(body=body, status=status, content_type=JSON_TYPE,
                            headers=self._retry_after if status in (429, 503) else None)

    def json(self, document: object, status: int = 200) -> web.Response:
        return self.respond(wire.dumps(document), status)

    # --- transactions ------------------------------------------------------------------------

    async def post_txs(self, request: web.Request) -> web.Response:
        """POST /txs: a binary batch or {"transactions": [...]}; per-transaction results.
        Judged at the node's door on its headers first (503 `busy`: qmemo.node.door)."""
        with self.node.door_open(request.content_length or 0):
            body = await read_body(request, self.config.max_body_bytes, self.config.body_timeout_s)
            stages = self.stages
            if request.content_type == BINARY_TYPE:     # the node frames, decodes and hashes it in one native call
                admitted = await self.node.submit_body(body)
                started = thread_cpu_ns()
                response = self.respond(admitted.answer_json())     # built in C: no object per transaction
                stages.lap(HTTP, started, len(admitted))     # the request's transactions, counted once
                return response
            started = thread_cpu_ns()                   # a JSON body's decode is in the `http` stage
            items = wire.decode_tx_items(body, binary=False, max_count=self.config.max_batch_txs)
            stages.lap(HTTP, started)
            outcomes = await self.node.submit(items)
        started = thread_cpu_ns()
        response = self.respond(wire.encode_tx_results(outcomes))
        stages.lap(HTTP, started, len(outcomes))
        return response

    async def post_tx(self, request: web.Request) -> web.Response:
        """POST /tx: one JSON transaction; 200 accepted/duplicate, else the rejection's own
        status (422 a broken rule, 429 a full mempool or sender, 503 a busy door: retry later)."""
        with self.node.door_open(request.content_length or 0):
            body = await read_body(request, self.config.max_body_bytes, self.config.body_timeout_s)
            tx = Transaction.from_json(wire.loads(body))        # DecodeError -> 400
            outcome = (await self.node.submit([tx]))[0]
        error = outcome.error                               # set exactly when rejected
        return self.json(wire.tx_answer(outcome), error.http_status if error is not None else 200)

    async def get_tx(self, request: web.Request) -> web.Response:
        tx_id = parse_hex(request.match_info["tx_id"], "transaction id", length=DIGEST_BYTES)
        return self.json(wire.tx_status_json(await self.node.transaction_status(tx_id)))

    async def post_txs_status(self, request: web.Request) -> web.Response:
        """POST /txs/status {"ids": [...]}: each one's `GET /tx/{id}` object, in order."""
        parsed = await self._hex_list(request, "ids", MAX_STATUS_IDS, DIGEST_BYTES)
        statuses = await self.node.transaction_statuses(parsed)
        return self.json({"statuses": [wire.tx_status_json(status) for status in statuses]})

    async def post_receipts_status(self, request: web.Request) -> web.Response:
        """POST /receipts/status {"ids": [...]}: where each cross-shard receipt is on this shard."""
        parsed = await self._hex_list(request, "ids", MAX_STATUS_IDS, DIGEST_BYTES)
        return self.json(wire.receipt_statuses_json(parsed, self.node.receipt_statuses(parsed)))

    async def peer_receipts(self, request: web.Request) -> web.Response:
        """GET /peer/receipts?shard=K&from=H&limit=N: our final blocks' receipt bundles for
        shard K, as a binary batch (another shard's node pulls them)."""
        shard = query_int(request, "shard", None, 0, 0xFFFF)
        from_height = query_int(request, "from", None, 1, U64_MAX)
        limit = query_int(request, "limit", 20, 0, wire.MAX_SYNC_BLOCKS)
        wait_s = query_int(request, "wait_ms", 0, 0, MAX_RECEIPT_WAIT_MS) / 1000
        chain_id, covered, bundles = await self.node.receipt_bundles(shard, from_height, limit, wait_s)
        return web.Response(body=wire.encode_receipt_batch(chain_id, covered, bundles), content_type=BINARY_TYPE)

    # --- blocks ---------------------------------------------------------------------------------

    async def get_blocks(self, request: web.Request) -> web.Response:
        """GET /blocks?from=H&limit=N[&txs=ids|none]"""
        txs = self._txs(request)
        maximum = MAX_BLOCKS_WITH_TXS if txs == "full" else MAX_BLOCKS_IDS
        from_height = query_int(request, "from", None, 0, U64_MAX)
        limit = query_int(request, "limit", min(20, maximum), 1, maximum)
        blocks = await self._blocks(from_height, limit, txs)
        return self.json(wire.blocks_json(blocks, self._validator_names(), tx_ids_only=txs == "ids",
                                          depth_of=self.node.block_depth, summary_only=txs == "none"))

    async def get_block(self, request: web.Request) -> web.Response:
        """GET /block/{height} and /block/latest"""
        raw = request.match_info["height"]
        if raw == "latest":
            height = self.node.height
        else:
            try:
                height = int(raw)
            except ValueError:
                raise DecodeError(f"block height must be an integer or 'latest', got {raw!r}",
                                  code="malformed") from None
        txs = self._txs(request)
        blocks = await self._blocks(height, 1, txs) if height >= 1 else []
        if not blocks:
            raise NotFound(f"no block at height {height} (the tip is {self.node.height})")
        return self.json(wire.block_json(blocks[0], self._validator_names(), tx_ids_only=txs == "ids",
                                         depth=self.node.block_depth(height), summary_only=txs == "none"))

    async def _blocks(self, from_height: int, limit: int, txs: str) -> Sequence[Block | BlockIds]:
        """The blocks as `txs` needs them: whole for "full", else headers and ids (a stored
        block's transactions are then never decoded)."""
        if txs == "full":
            return await self.node.blocks(from_height, limit)
        return await self.node.block_ids(from_height, limit, with_ids=txs == "ids")

    def _txs(self, request: web.Request) -> str:
        txs = request.query.get("txs", "full")
        if txs not in ("ids", "full", "none"):
            raise DecodeError(f"txs must be 'ids', 'full' or 'none', got {txs!r}", code="malformed")
        return txs

    def _validator_names(self) -> list[str]:
        return [validator.name for validator in self.node.genesis.validators]

    # --- accounts ---------------------------------------------------------------------------------

    async def get_account(self, request: web.Request) -> web.Response:
        address = parse_hex(request.match_info["address"], "address", length=ADDRESS_BYTES)
        return self.json(wire.account_json(address, *self.node.account(address)))

    async def post_accounts(self, request: web.Request) -> web.Response:
        parsed = await self._hex_list(request, "addresses", MAX_ACCOUNTS, ADDRESS_BYTES)
        return self.json(wire.accounts_json([(address, *self.node.account(address)) for address in parsed]))

    async def _hex_list(self, request: web.Request, key: str, maximum: int, length: int) -> list[bytes]:
        """The body's `{key: [hex, ...]}`, at most `maximum` byte strings of `length` bytes each."""
        body = await read_body(request, self.config.max_body_bytes, self.config.body_timeout_s)
        items = wire.expect_key(wire.loads(body), key, list, "the body")
        if len(items) > maximum:
            raise TooLarge(f"{len(items)} {key}, the limit is {maximum}", code="batch_too_large")
        return [parse_hex(item, f"{key}[{i}]", length=length) for i, item in enumerate(items)]

    # --- node --------------------------------------------------------------------------------------

    async def get_status(self, request: web.Request) -> web.Response:
        return self.json(self.node.status())

    async def get_health(self, request: web.Request) -> web.Response:
        ready = self.node.ready
        return self.json(wire.health_json(ready, self.node.name), status=200 if ready else 503)

    async def get_metrics(self, request: web.Request) -> web.Response:
        if "text/plain" in request.headers.get("Accept", "") and JSON_TYPE not in request.headers.get("Accept", ""):
            return await self.get_prometheus(request)
        return self.json(self.node.metrics_snapshot())

    async def get_openapi(self, request: web.Request) -> web.Response:
        """GET /openapi.json: the API's OpenAPI 3.1 document (qmemo.net.openapi)."""
        return self.respond(OPENAPI_JSON)

    async def get_prometheus(self, request: web.Request) -> web.Response:
        text = prometheus.render(self.node.metrics_snapshot(), self.node.histograms())
        return web.Response(body=text.encode(), headers={"Content-Type": prometheus.CONTENT_TYPE})

    # --- peers ---------------------------------------------------------------------------------------

    async def peer_txs(self, request: web.Request) -> web.Response:
        """POST /peer/txs: a relayed binary batch, admitted like any other (never trusted), so
        under the client's caps too: a peer is no more trusted with a 100 MiB body."""
        body = await read_body(request, self.config.max_body_bytes, self.config.body_timeout_s)
        admitted = await self.node.submit_body(body, from_peer=True)
        started = thread_cpu_ns()
        response = self.json(admitted.counts())
        self.stages.lap(HTTP, started, len(admitted))
        return response

    async def peer_block(self, request: web.Request) -> web.Response:
        """POST /peer/block: one block encoding; validated in full before it is applied."""
        body = await read_body(request, self.config.max_peer_body_bytes, self.config.body_timeout_s)
        return self.json(await self.node.receive_block(body))

    async def peer_block_ids(self, request: web.Request) -> web.Response:
        """POST /peer/block_ids: one block as its header and transaction ids, rebuilt from
        this node's pool ("missing" if it lacks one), then validated as a whole block is.
        Capped at the longest such body the chain allows (~1.3 MB for 20,000 transactions),
        not at a whole block's `max_peer_body_bytes`."""
        body = await read_body(request, BlockIds.max_bytes(self.node.genesis.max_block_transactions),
                               self.config.body_timeout_s)
        return self.json(await self.node.receive_block_ids(body))

    async def peer_blocks(self, request: web.Request) -> web.Response:
        """GET /peer/blocks?from=H&limit=N: block encodings as a binary batch (sync)."""
        from_height = query_int(request, "from", None, 1, U64_MAX)
        limit = query_int(request, "limit", DEFAULT_SYNC_PAGE, 1, wire.MAX_SYNC_BLOCKS)
        encodings = await self.node.block_encodings(from_height, limit)
        return web.Response(body=wire.encode_block_batch(encodings), content_type=BINARY_TYPE)
