"""A lean POST of a binary batch - the load generator's `POST /txs` and a node's relay,
`POST /peer/txs`: HTTP/1.1 written straight to kept-alive connections, the answer read
by its Content-Length.

Why not the node client's aiohttp session: the generator sends a batch every 20 ms of
its schedule (~50 requests a second, bodies of a few hundred KB) and shares the
machine's cores with the nodes it measures, so its own CPU per request is taken from
them; a node relays every batch a client sent it to each peer, as many requests again.
aiohttp's client runs several hundred Python calls per request (its request and
response objects, header multidicts, timers, the payload writer); this writes the head
and the body to the transport in one call and parses the status line and headers of
the answer, nothing more. `python -m qmemo.bench.gen_standin` with `scripts/gen-cpu.sh`
measures the generator with each (docs/devnet.md, "The generator's own CPU").

What it speaks is what the node's server (aiohttp) answers: a status line, headers, and a
body of `Content-Length` bytes (or, without one, the body up to the connection's close).
A chunked answer is refused as unreadable: the node never sends one for `/txs`.

Failures raise `NodeUnreachable` (qmemo.errors) as the node client does, with
`request_left` saying whether the request may have reached the node: False when the
connection could not be made (the node is down: nothing to learn), True for a reset, an
early close or a timeout once the request was written (the node may have admitted it:
the generator resends the same bytes, which is safe). A connection that failed or timed
out is closed, never reused.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from qmemo.errors import NodeUnreachable
from qmemo.net.client import Answer

MAX_HEAD_BYTES = 64 * 1024       # an answer's status line and headers, at most
_NO_BODY = frozenset((204, 304))  # with 1xx, answers that never carry a body (RFC 9112, 6.3)
_END_OF_HEAD = b"\r\n\r\n"


class _Exchange(asyncio.Protocol):
    """One connection: a request written, its answer gathered; then the next one."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._buffer = bytearray()
        self._answer: asyncio.Future[tuple[int, bytes, bool]] | None = None
        self._head_end = -1
        self._length: int | None = None     # the body's length (None: up to the close)
        self._status = 0
        self._keep_alive = True

    # --- asyncio.Protocol ----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport   # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        if self._answer is None:       # nothing asked: a node never sends this; the stream is lost
            self.close()
            return
        self._buffer += data
        self._take()

    def eof_received(self) -> bool:
        self._end(ConnectionResetError("the node closed the connection"))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._end(exc or ConnectionResetError("the node closed the connection"))

    # --- one request ---------------------------------------------------------------------------

    async def post(self, head: bytes, body: bytes) -> tuple[int, bytes, bool]:
        """Write a request; its answer's status, body, and whether the connection stays open."""
        assert self.transport is not None and self._answer is None
        self._answer = asyncio.get_running_loop().create_future()
        self.transport.writelines((head, body))
        return await self._answer

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def _take(self) -> None:
        """Parse as much of the answer as has arrived; settle it once whole."""
        if self._head_end < 0:
            end = self._buffer.find(_END_OF_HEAD)
            if end < 0:
                if len(self._buffer) > MAX_HEAD_BYTES:
                    self._fail(ValueError(f"an answer head of over {MAX_HEAD_BYTES} bytes"))
                return
            try:
                self._status, self._length, self._keep_alive = _parse_head(bytes(self._buffer[:end]))
            except ValueError as exc:
                self._fail(exc)
                return
            self._head_end = end + len(_END_OF_HEAD)
        if self._length is not None and len(self._buffer) - self._head_end >= self._length:
            start = self._head_end
            body = bytes(self._buffer[start:start + self._length])
            del self._buffer[:start + self._length]
            if self._buffer:              # bytes past the answer: the next answer would be read from them
                self._keep_alive = False
            self._settle(body)

    def _settle(self, body: bytes) -> None:
        answer, self._answer = self._answer, None
        status, keep_alive = self._status, self._keep_alive
        self._head_end, self._length = -1, None
        if not keep_alive:
            self.close()
        if answer is not None and not answer.done():
            answer.set_result((status, body, keep_alive))

    def _end(self, exc: Exception) -> None:
        """The connection ended: an answer that ran to the close is whole, any other failed."""
        self.closed = True
        if self._answer is not None and self._head_end >= 0 and self._length is None:
            self._settle(bytes(self._buffer[self._head_end:]))
            return
        self._fail(exc)

    def _fail(self, exc: Exception) -> None:
        self.close()
        answer, self._answer = self._answer, None
        if answer is not None and not answer.done():
            answer.set_exception(exc)


def _parse_head(head: bytes) -> tuple[int, int | None, bool]:
    """(status, Content-Length or None, keep-alive) from an answer's status line and headers."""
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise ValueError(f"not an HTTP/1.x status line: {lines[0][:80]!r}")
    status = int(parts[1])
    length: int | None = 0 if status in _NO_BODY or status < 200 else None
    keep_alive = parts[0] == b"HTTP/1.1"
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name, value = name.strip().lower(), value.strip().lower()
        if name == b"content-length":
            if not value.isdigit():
                raise ValueError(f"a Content-Length of {value[:40]!r}")
            length = int(value)
        elif name == b"transfer-encoding" and value != b"identity":
            raise ValueError(f"a Transfer-Encoding of {value[:40]!r} (only Content-Length answers are read)")
        elif name == b"connection":
            tokens = {token.strip() for token in value.split(b",")}
            keep_alive = b"close" not in tokens and (keep_alive or b"keep-alive" in tokens)
    if length is None:
        keep_alive = False         # the body runs to the close
    return status, length, keep_alive


@dataclass
class LeanPosts:
    """Kept-alive connections to every node, reused most recently used first, with at most
    `connections` requests out at once (the generator's `--connections`, as aiohttp's
    connector limit counted them); idle connections are kept per node."""

    connections: int
    _open: asyncio.Semaphore = field(init=False)
    _idle: dict[tuple[str, int], list[_Exchange]] = field(default_factory=dict, init=False)
    _closed: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        if self.connections < 1:
            raise ValueError("need at least one connection")
        self._open = asyncio.Semaphore(self.connections)

    def node(self, url: str) -> LeanNode:
        """The poster for one node's base URL (http://host:port)."""
        split = urlsplit(url)
        if split.scheme != "http" or split.hostname is None or split.path not in ("", "/") or split.query:
            raise ValueError(f"a node URL must be http://host:port, got {url!r}")
        return LeanNode(url.rstrip("/"), (split.hostname, split.port or 80), split.netloc, self)

    async def post(self, node: LeanNode, path: str, body: bytes, timeout_s: float,
                   headers: tuple[tuple[str, str], ...] = ()) -> Answer:
        """POST `body` to `path` on `node` (with `headers` besides the binary content type
        and length): the answer, any status; NodeUnreachable if none came."""
        extra = "".join(f"{name}: {value}\r\n" for name, value in headers)
        head = (f"POST {path} HTTP/1.1\r\nHost: {node.netloc}\r\nContent-Type: application/octet-stream\r\n"
                f"{extra}Content-Length: {len(body)}\r\n\r\n").encode()
        exchange: _Exchange | None = None
        sent = False
        try:
            async with asyncio.timeout(timeout_s), self._open:
                exchange = self._take_idle(node.address)
                if exchange is None:
                    _, exchange = await asyncio.get_running_loop().create_connection(_Exchange, *node.address)
                sent = True
                status, payload, keep_alive = await exchange.post(head, body)
                if keep_alive and not exchange.closed and not self._closed:
                    self._idle.setdefault(node.address, []).append(exchange)
                else:
                    exchange.close()
        except (OSError, TimeoutError, ValueError) as exc:
            if exchange is not None:
                exchange.close()
            raise NodeUnreachable(f"POST {node.url}{path}: {type(exc).__name__}: {exc}",
                                  transport=type(exc).__name__, request_left=sent) from None
        except BaseException:
            if exchange is not None:       # cancelled mid-request: the connection's next answer is not ours
                exchange.close()
            raise
        return Answer(status, payload)

    def _take_idle(self, where: tuple[str, int]) -> _Exchange | None:
        idle = self._idle.get(where)
        while idle:
            exchange = idle.pop()
            if not exchange.closed and exchange.transport is not None and not exchange.transport.is_closing():
                return exchange
        return None

    def close(self) -> None:
        """Close every idle connection; one in use closes when its request ends."""
        self._closed = True
        for idle in self._idle.values():
            for exchange in idle:
                exchange.close()
        self._idle.clear()


@dataclass(frozen=True, slots=True)
class LeanNode:
    """One node's `POST /txs` over the shared connections (what the sender calls)."""

    url: str
    address: tuple[str, int]     # (host, port)
    netloc: str                  # the Host header
    posts: LeanPosts

    async def post(self, path: str, body: bytes, timeout_s: float,
                   headers: tuple[tuple[str, str], ...] = ()) -> Answer:
        """POST a binary body to `path` on this node: the answer, any status."""
        return await self.posts.post(self, path, body, timeout_s, headers)

    async def post_txs(self, body: bytes, *, timeout_s: float) -> Answer:
        """`POST /txs` with a binary batch: the answer, any status."""
        return await self.post("/txs", body, timeout_s)
