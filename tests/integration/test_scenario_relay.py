"""The user-space delay relay (`--links relay`): bytes arrive whole and in order, and never sooner than the delay.

Runs on loopback without namespaces or root. The only timing assertion is a lower bound
(a round trip through the relay takes at least two one-way delays), which a slow
machine cannot break.
"""

from __future__ import annotations

import asyncio
import os
import time

from qmemo.scenario.relay import _handler

DELAY_S = 0.05


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()
    writer.close()


async def _round_trip(payload: bytes) -> tuple[bytes, float]:
    echo = await asyncio.start_server(_echo, "127.0.0.1", 0)
    echo_port = echo.sockets[0].getsockname()[1]
    relay = await asyncio.start_server(_handler("127.0.0.1", echo_port, DELAY_S, DELAY_S / 10), "127.0.0.1", 0)
    relay_port = relay.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", relay_port)
    started = time.monotonic()
    writer.write(payload)
    await writer.drain()
    received = await reader.readexactly(len(payload))
    elapsed = time.monotonic() - started
    writer.close()
    for server in (relay, echo):
        server.close()
    return received, elapsed


def test_a_round_trip_through_the_relay_takes_at_least_two_delays() -> None:
    received, elapsed = asyncio.run(_round_trip(b"ping"))
    assert received == b"ping"
    assert elapsed >= 2 * DELAY_S


def test_a_large_transfer_arrives_whole_and_in_order_despite_jitter() -> None:
    payload = os.urandom(3 * 1024 * 1024)      # several relay chunks each way
    received, _ = asyncio.run(_round_trip(payload))
    assert received == payload
