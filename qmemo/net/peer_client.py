"""The peer client: `PeerLink` (qmemo.node.peers) over HTTP, binary bodies both ways.

Calls (docs/api.md, "Peer calls"):
- `POST /peer/txs`     a binary transaction batch (relay);
- `POST /peer/block_ids` one block as its header and ids (the producer's push);
- `POST /peer/block`   one block encoding (the push again, whole, when the peer lacks a
  transaction);
- `GET  /status`       the peer's tip (small JSON, polled every `sync_interval_s`);
- `GET  /peer/blocks`  block encodings from a height, as a binary batch (sync);
- `GET  /peer/receipts` another shard's receipt bundles for ours (qmemo.node.receipt_transport).

Every failure - refused connection, timeout, an unexpected status - becomes a
`PeerError` naming the peer, so the node's tasks handle one error type; a peer that
answers and refuses our block or relayed batch raises `PeerRefused` carrying the peer's
own code and status (`peer_code`, `peer_status`): the peer's verdict, never a local `InvalidBlock` (which would say *we* were handed a bad block).
Bytes sent and received are added to the node's network counters.
"""

from __future__ import annotations

import asyncio
import aiohttp

from qmemo.errors import DecodeError, NodeUnreachable, PeerError, PeerRefused
from qmemo.net.lean_post import LeanPosts
from qmemo.net.wire import MAX_SYNC_BLOCKS, decode_block_batch, decode_receipt_batch, loads
from qmemo.node.metrics import NodeMetrics
from qmemo.node.peers import PeerTip
from qmemo.node.stages import RELAY, thread_cpu_ns

BINARY = {"Content-Type": "application/octet-stream"}
ORIGIN_HEADER = "X-Qmemo-Origin"


class HttpPeer:
    """One peer, reached through a shared `aiohttp.ClientSession`; relayed batches through
    shared lean connections (`posts`, qmemo.net.lean_post: a few hundred fewer Python calls
    per request than aiohttp's client, for the call a node makes most often)."""

    def __init__(self, url: str, session: aiohttp.ClientSession, metrics: NodeMetrics, origin: str,
                 timeout_s: float = 10.0, *, posts: LeanPosts) -> None:
        self.url = url.rstrip("/")
        self._session = session
        self._metrics = metrics
        self._headers = {**BINARY, ORIGIN_HEADER: origin}
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._timeout_s = timeout_s
        self._origin = ((ORIGIN_HEADER, origin),)
        self._relay = posts.node(self.url)

    async def send_txs(self, frames: bytes, count: int) -> None:
        """A binary batch of `count` framed transactions (framed once, by the ledger)."""
        self._metrics.stages.lap(RELAY, thread_cpu_ns(), count)
        try:
            answer = await self._relay.post("/peer/txs", frames, self._timeout_s, self._origin)
        except NodeUnreachable as exc:
            raise PeerError(str(exc)) from None
        status, payload = answer.status, answer.body
        self._metrics.bytes_out += len(frames)
        self._metrics.bytes_in += len(payload)
        if status != 200:
            # It answered: the batch reached it, and sending it again would only double its
            # load (a 429 mempool full) or be refused again (a 413): PeerRefused, which the
            # relay drops, unlike a batch left unanswered (a plain PeerError), which it resends.
            try:
                code = str(_json(payload, self.url).get("error"))
            except PeerError:
                code = "unreadable"
            raise PeerRefused(f"{self.url} refused the relayed batch: {status} {payload[:200]!r}",
                              peer_code=code, peer_status=status)

    async def send_block(self, encoded: bytes) -> str:
        return await self._push_block("/peer/block", encoded)

    async def send_block_ids(self, encoded_ids: bytes) -> str:
        """The block as its ids (`BlockIds.encode`); "missing" if the peer lacks one of its
        transactions - or does not know this call (a 404: a node of an earlier version)."""
        return await self._push_block("/peer/block_ids", encoded_ids, unknown_call="missing")

    async def _push_block(self, path: str, body: bytes, unknown_call: str | None = None) -> str:
        """POST a pushed block; the peer's status ("accepted", "known", ...), `unknown_call`
        for a 404 where given; PeerRefused for a 400 or 422."""
        accept = (200, 400, 422) if unknown_call is None else (200, 400, 404, 422)
        status, payload = await self._call("POST", path, body=body, accept=accept)
        if status == 404 and unknown_call is not None:
            return unknown_call
        document = _json(payload, self.url)
        if status == 200:
            return str(document.get("status"))
        raise PeerRefused(f"{self.url} refused the block: {document.get('detail')}",
                          peer_code=str(document.get("error")), peer_status=status)

    async def tip(self) -> PeerTip:
        _, payload = await self._call("GET", "/status")
        document = _json(payload, self.url)
        try:
            return PeerTip(int(document["height"]), bytes.fromhex(document["tip_hash"]),
                           int(document.get("final_height", 0)))
        except (KeyError, TypeError, ValueError):
            raise PeerError(f"{self.url}/status has no usable height and tip_hash") from None

    async def block_encodings(self, from_height: int, limit: int) -> list[bytes]:
        limit = min(limit, MAX_SYNC_BLOCKS)
        _, payload = await self._call("GET", f"/peer/blocks?from={from_height}&limit={limit}")
        return decode_block_batch(payload, limit)

    async def receipts(self, shard: int, from_height: int, limit: int,
                       wait_s: float = 0.0) -> tuple[int, int, list[bytes]]:
        """(its chain id, the highest height covered, its final blocks' receipt bundles for
        `shard` from `from_height`; a long poll of up to `wait_s` while none is final there):
        qmemo.node.receipt_transport.ReceiptSource."""
        _, payload = await self._call("GET", f"/peer/receipts?shard={shard}&from={from_height}&limit={limit}"
                                             f"&wait_ms={round(wait_s * 1000)}")
        try:
            return decode_receipt_batch(payload)
        except DecodeError as exc:
            raise PeerError(f"{self.url} answered receipts that do not decode: {exc}") from None

    async def _call(self, method: str, path: str, *, body: bytes | None = None,
                    accept: tuple[int, ...] = (200,)) -> tuple[int, bytes]:
        try:
            async with self._session.request(method, self.url + path, data=body, headers=self._headers,
                                             timeout=self._timeout) as response:
                payload = await response.read()
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            raise PeerError(f"{method} {self.url}{path}: {type(exc).__name__}: {exc}") from None
        self._metrics.bytes_out += len(body) if body else 0
        self._metrics.bytes_in += len(payload)
        if response.status not in accept:
            raise PeerError(f"{method} {self.url}{path} answered {response.status}: {payload[:200]!r}")
        return response.status, payload


def _json(payload: bytes, url: str) -> dict:
    try:
        document = loads(payload)
    except DecodeError:
        raise PeerError(f"{url} answered something that is not JSON") from None
    if not isinstance(document, dict):
        raise PeerError(f"{url} answered JSON that is not an object")
    return document
