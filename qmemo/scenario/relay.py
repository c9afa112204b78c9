"""Delay without netem: a TCP relay in a node's namespace that holds every chunk for the link's one-way delay.

For kernels without `sch_netem` (`qmemo scenario run --links relay`). Node i reaches
peer j through 127.0.0.1:(BASE + j) in its own namespace; the relay connects on to j's
address and forwards both ways, each chunk released `delay` (plus normal jitter, never
reordering) after it arrived. A request and its answer thus take 2 x delay more, as with
netem on both egresses. What it cannot do: loss (refused), and TCP's own reaction to a
long path (slow start and window over the real RTT) - bulk transfers see the delay per
chunk, not a bandwidth-delay product. docs/scenarios.md says where that matters.

    python -m qmemo.scenario.relay --peer 1=10.231.7.2:8000:44:2.2 --peer 2=...

Never used by the netem path; it touches nothing but the sockets it opens.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import signal
import time

BASE_PORT = 9000
CHUNK = 256 * 1024


def listen_port(peer: int) -> int:
    return BASE_PORT + peer


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay_s: float, jitter_s: float,
                rng: random.Random) -> None:
    """Copy reader to writer, each chunk released at arrival + delay (monotonic: jitter never reorders)."""
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
    last_due = 0.0

    async def release() -> None:
        while True:
            due, data = await queue.get()
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:
                writer.write_eof() if writer.can_write_eof() else writer.close()
                return
            writer.write(data)
            await writer.drain()

    releaser = asyncio.ensure_future(release())
    try:
        while True:
            data = await reader.read(CHUNK)
            due = max(last_due, time.monotonic() + max(0.0, rng.gauss(delay_s, jitter_s) if jitter_s else delay_s))
            last_due = due
            await queue.put((due, data))
            if not data:
                break
        await releaser
    except (ConnectionError, OSError):
        releaser.cancel()
        writer.close()


def _handler(host: str, port: int, delay_s: float, jitter_s: float):
    rng = random.Random()

    async def handle(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            await relay_connection(client_reader, client_writer)
        except asyncio.CancelledError:
            client_writer.close()   # shutting down: end quietly (a cancelled handler task logs a traceback)

    async def relay_connection(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(delay_s)          # the connection's first leg
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(host, port)
        except OSError:
            client_writer.close()
            return
        try:
            await asyncio.gather(_pump(client_reader, upstream_writer, delay_s, jitter_s, rng),
                                 _pump(upstream_reader, client_writer, delay_s, jitter_s, rng),
                                 return_exceptions=True)
        finally:
            for writer in (upstream_writer, client_writer):
                writer.close()

    return handle


async def _serve(peers: list[tuple[int, str, int, float, float]]) -> None:
    servers = [await asyncio.start_server(_handler(host, port, delay_ms / 1e3, jitter_ms / 1e3), "127.0.0.1",
                                          listen_port(peer))
               for peer, host, port, delay_ms, jitter_ms in peers]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"relay ready: {len(servers)} peers", flush=True)
    await stop.wait()
    for server in servers:
        server.close()


def parse_peer(text: str) -> tuple[int, str, int, float, float]:
    peer, _, rest = text.partition("=")
    host, port, delay_ms, jitter_ms = rest.split(":")
    return int(peer), host, int(port), float(delay_ms), float(jitter_ms)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m qmemo.scenario.relay", description=__doc__.splitlines()[0])
    parser.add_argument("--peer", action="append", type=parse_peer, required=True,
                        help="PEER=HOST:PORT:DELAY_MS:JITTER_MS (listens on 127.0.0.1:9000+PEER)")
    args = parser.parse_args()
    asyncio.run(_serve(args.peer))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
