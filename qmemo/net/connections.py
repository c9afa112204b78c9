"""The node's connections: how many, and how long one may hold the node without moving.

`NodeRunner` (what `qmemo node` serves with) makes `NodeServer`, whose connections are
`NodeHandler`s (aiohttp's per-connection protocol answering parser faults in JSON:
qmemo.net.client_faults). Each rule bounds what one client can hold:

- At most `max_connections` open: each costs a descriptor, and a flood of them must not
  use up the ones the node's store and its peer connections need. A new connection past
  the cap closes the connection idle longest (waiting for a request, or for the rest of a
  request's headers; the one whose last bytes came longest ago), so an idle flood never
  locks out a client with a request. Only when none is idle is the new one answered 503
  (`busy`, with Retry-After) and closed.
- A connection whose answers are not being read - its write buffer not shrinking for
  `send_timeout_s` - is aborted: a client that sends requests and never reads the answers
  would otherwise hold its slot (and the answers' memory) for good.
- An idle connection closes after aiohttp's `keepalive_timeout` (the node's
  `idle_timeout_s`), a slow body is answered 408 by the body reader (qmemo.net.handlers,
  `body_timeout_s`), and after an answer that closes the connection the node reads what
  the client still sends for at most `LINGER_S` (aiohttp's default, 10 s, would let a
  slow body hold its slot that much longer).

What this module reads of aiohttp 3.14's handler beyond its public API: `_waiter` (set while
it waits for the next request: its own idle check, `_process_keepalive`, reads the same),
held to that by tests/integration/test_http_door.py.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from qmemo.net import wire
from qmemo.net.client_faults import JsonFaultHandler

SWEEP_S = 1.0       # how often the stalled-reader check looks at every connection
LINGER_S = 2.0      # reading what a client still sends after an answer that closes
REFUSED_LINGER_S = 0.5  # a refused connection's: what it sends is dropped meanwhile

BUSY_BODY = wire.dumps(wire.error_json("busy", "the node has as many connections open as it takes, each with a "
                                               "request under way; retry later"))
BUSY_ANSWER = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\n"
               b"Connection: close\r\nContent-Length: " + str(len(BUSY_BODY)).encode() + b"\r\n\r\n" + BUSY_BODY)


class NodeHandler(JsonFaultHandler):
    """One connection: aiohttp's protocol, refusing itself when the server is full, and
    noting when bytes last came (which idle connection to close first) and how its write
    buffer moves (whether its answers are being read)."""

    def __init__(self, server: NodeServer, **kwargs: Any) -> None:
        super().__init__(server, **kwargs)
        self.node_server = server
        self.last_data_s = server.now()
        self.buffered = 0                       # the write buffer at the last sweep
        self.stalled_since: float | None = None
        self.refused = False                    # answered 503 busy at once: its bytes are dropped

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if not self.node_server.make_room():
            # Answered without reading the request: then our side ends and what the client
            # sends is dropped, for REFUSED_LINGER_S before the socket closes (closed at once
            # with its request unread, the kernel would reset it, and the client would lose
            # the answer).
            self.refused = True
            writer = cast(asyncio.Transport, transport)     # uvloop's is one, not by subclass
            writer.write(BUSY_ANSWER)
            if writer.can_write_eof():
                writer.write_eof()
            self.node_server.close_later(writer)
            return
        super().connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self.refused:
            return
        self.last_data_s = self.node_server.now()
        super().data_received(data)


class NodeServer(web.Server):
    """aiohttp's server with the rules of the module docstring."""

    def __init__(self, *args: Any, max_connections: int, send_timeout_s: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.max_connections = max_connections
        self.send_timeout_s = send_timeout_s
        self.refused_connections = 0            # answered 503: every open one had a request under way
        self.closed_idle_connections = 0        # idle ones closed to make room
        self.aborted_stalled_connections = 0    # their answers not read for send_timeout_s
        self._sweeper = self._loop.call_later(SWEEP_S, self._sweep)

    def __call__(self) -> RequestHandler:
        return NodeHandler(self, loop=self._loop, **self._kwargs)

    def now(self) -> float:
        return self._loop.time()

    def close_later(self, transport: asyncio.BaseTransport) -> None:
        self._loop.call_later(REFUSED_LINGER_S, transport.close)

    def make_room(self) -> bool:
        """Whether a new connection may open: below the cap, or once the connection idle
        longest is closed. False: every open one has a request under way."""
        if len(self._connections) < self.max_connections:
            return True
        idle = [handler for handler in self._connections if waiting_for_a_request(handler)]
        if not idle:
            self.refused_connections += 1
            return False
        oldest = min(idle, key=lambda handler: getattr(handler, "last_data_s", 0.0))
        self._connections.pop(oldest, None)
        oldest.force_close()
        self.closed_idle_connections += 1
        return True

    def _sweep(self) -> None:
        """Abort the connections whose write buffer has not shrunk for `send_timeout_s`."""
        now = self.now()
        for handler, transport in list(self._connections.items()):
            if not isinstance(handler, NodeHandler):
                continue
            size = transport.get_write_buffer_size()
            if size == 0 or size < handler.buffered:
                handler.stalled_since = None if size == 0 else now
            elif handler.stalled_since is None:
                handler.stalled_since = now
            elif now - handler.stalled_since >= self.send_timeout_s:
                transport.abort()
                self.aborted_stalled_connections += 1
            handler.buffered = size
        self._sweeper = self._loop.call_later(SWEEP_S, self._sweep)

    async def shutdown(self, timeout: float | None = None) -> None:
        self._sweeper.cancel()
        await super().shutdown(timeout)


def waiting_for_a_request(handler: RequestHandler) -> bool:
    """Whether a connection has no request under way (see the module docstring)."""
    waiter = handler._waiter
    return waiter is not None and not waiter.done()


class NodeRunner(web.AppRunner):
    """`web.AppRunner` serving through `NodeServer`; an idle connection is closed after
    `keepalive_timeout` (an AppRunner setting)."""

    def __init__(self, app: web.Application, *, max_connections: int, send_timeout_s: float, **kwargs: Any) -> None:
        super().__init__(app, lingering_time=LINGER_S, **kwargs)
        self._limits = {"max_connections": max_connections, "send_timeout_s": send_timeout_s}

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        return NodeServer(server.request_handler, request_factory=server.request_factory,
                          handler_cancellation=server.handler_cancellation, loop=server._loop,
                          **self._limits, **server._kwargs)
