"""Slow and idle HTTP clients against one node, for `qmemo bench door`.

`hostile_clients(mix)` returns a `Disturbance` (qmemo.bench.node_run): a context manager
that, given the node's host and port, keeps the mix's connections open on an event loop of
its own thread until it exits, and whose value counts what they did. Each client loops:
connect, misbehave, and when the node closes the connection (or answers it), connect again:
- `slow_bodies`: `POST /txs` headers promising a body, then one byte every `interval_s`;
- `trickled_headers`: a request line, then one header byte every `interval_s`, never the
  blank line that ends the headers;
- `idle`: a connection that sends nothing;
- `slow_readers`: `GET /openapi.json` a hundred times in one write (~4 MB of answers), and
  never a byte read.

Only loopback: the host is the node's, which the benchmark started itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from qmemo.bench.node_run import Disturbance

SLOW_BODY_HEAD = (b"POST /txs HTTP/1.1\r\nHost: node\r\nContent-Type: application/octet-stream\r\n"
                  b"Content-Length: 100000\r\n\r\n")
TRICKLE_HEAD = b"POST /txs HTTP/1.1\r\nHost: node\r\nX-Slow: "
UNREAD_REQUESTS = b"GET /openapi.json HTTP/1.1\r\nHost: node\r\n\r\n" * 100
RECONNECT_PAUSE_S = 0.2     # after a refused connection: never a busy loop against the node
# Once every client has connected, before the timed span: the node has then answered what the
# clients that never read asked for, up to their sockets' buffers, and the span measures the
# clients holding on, not a burst at their start.
SETTLE_S = 1.0


@dataclass(frozen=True, slots=True)
class HostileMix:
    slow_bodies: int = 100
    trickled_headers: int = 100
    idle: int = 500
    slow_readers: int = 20
    interval_s: float = 1.0

    def as_dict(self) -> dict[str, Any]:
        return {"slow_bodies": self.slow_bodies, "trickled_headers": self.trickled_headers, "idle": self.idle,
                "slow_readers": self.slow_readers, "interval_s": self.interval_s}


def hostile_clients(mix: HostileMix) -> Disturbance:
    @contextlib.contextmanager
    def disturbance(host: str, port: int) -> Iterator[dict[str, Any]]:
        stats = {"connections": 0, "refused": 0, "closed_by_node": 0, "answered_408": 0, "bytes_sent": 0}
        loop = asyncio.new_event_loop()
        stop = asyncio.Event()
        opened = threading.Event()

        async def connect() -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
            """A new connection, counted; None (after a pause) where the node refused it."""
            try:
                connection = await asyncio.open_connection(host, port)
            except OSError:
                stats["refused"] += 1
                await asyncio.sleep(RECONNECT_PAUSE_S)
                return None
            stats["connections"] += 1
            return connection

        async def client(head: bytes, trickle: bool) -> None:
            while not stop.is_set():
                if (connection := await connect()) is None:
                    continue
                reader, writer = connection
                eof = asyncio.ensure_future(reader.read())
                stopped = asyncio.ensure_future(stop.wait())
                try:
                    writer.write(head)
                    stats["bytes_sent"] += len(head)
                    while not eof.done() and not stop.is_set():
                        await asyncio.wait([eof, stopped], timeout=mix.interval_s, return_when=asyncio.FIRST_COMPLETED)
                        if trickle and not eof.done() and not stop.is_set():
                            writer.write(b"x")
                            stats["bytes_sent"] += 1
                    if eof.done() and not eof.cancelled() and eof.exception() is None:
                        stats["closed_by_node"] += 1
                        stats["answered_408"] += b" 408 " in eof.result()[:16]
                except (ConnectionError, OSError):
                    stats["closed_by_node"] += 1
                finally:
                    eof.cancel()
                    stopped.cancel()
                    writer.close()

        async def reader_that_never_reads() -> None:
            while not stop.is_set():
                if (connection := await connect()) is None:
                    continue
                _, writer = connection
                try:
                    writer.write(UNREAD_REQUESTS)
                    stats["bytes_sent"] += len(UNREAD_REQUESTS)
                    while not writer.transport.is_closing() and not stop.is_set():
                        await asyncio.sleep(mix.interval_s)
                    if writer.transport.is_closing() and not stop.is_set():
                        stats["closed_by_node"] += 1
                finally:
                    writer.transport.abort()

        async def main() -> None:
            clients = ([client(SLOW_BODY_HEAD, True) for _ in range(mix.slow_bodies)]
                       + [client(TRICKLE_HEAD, True) for _ in range(mix.trickled_headers)]
                       + [client(b"", False) for _ in range(mix.idle)]
                       + [reader_that_never_reads() for _ in range(mix.slow_readers)])
            tasks = [asyncio.ensure_future(c) for c in clients]
            while stats["connections"] < len(tasks) and not stop.is_set():
                await asyncio.sleep(0.05)
            opened.set()
            await stop.wait()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        thread = threading.Thread(target=loop.run_until_complete, args=(main(),), name="hostile-clients", daemon=True)
        thread.start()
        opened.wait(timeout=30)
        time.sleep(SETTLE_S)
        try:
            yield stats
        finally:
            loop.call_soon_threadsafe(stop.set)
            thread.join(timeout=30)
            loop.close()

    return disturbance
