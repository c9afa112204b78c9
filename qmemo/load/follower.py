"""Follow new blocks and mark the generator's transactions committed when first seen.

One request per poll brings every new block's transaction ids (`GET /blocks?from=H
&limit=N&txs=ids`, docs/api.md); transactions are never polled one by one. A commit is
timed when the follower first sees the block, so commit times carry up to one poll
interval (0.1 s by default) of observation delay - small next to a 2 s block interval,
and stated in the run manifest. If the followed node stops answering, the follower
moves to the next node in its list.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from dataclasses import dataclass, field

import aiohttp
import orjson

from qmemo.load.latency import Timings


@dataclass
class FollowState:
    next_height: int
    blocks_seen: int = 0
    committed_seen: int = 0
    node_switches: int = 0
    # (seen at, intended -> committed latency) of recent commits, oldest first: the live
    # status reads this instead of rescanning every transaction each second.
    recent: deque[tuple[float, float]] = field(default_factory=deque)


async def current_height(session: aiohttp.ClientSession, urls: list[str]) -> int:
    """The chain height as the first answering node reports it."""
    for url in urls:
        try:
            async with session.get(f"{url}/status") as response:
                if response.status == 200:
                    return int(orjson.loads(await response.read())["height"])
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError, KeyError, ValueError):
            continue
    raise ConnectionError(f"no node answered /status: {', '.join(urls)}")


async def follow_blocks(urls: list[str], state: FollowState, pending: dict[bytes, int], timings: Timings, *,
                        start: float, stop: asyncio.Event, poll_s: float = 0.1, limit: int = 50) -> None:
    """Until `stop` is set: fetch new blocks, mark pending transactions committed."""
    node = 0
    timeout = aiohttp.ClientTimeout(total=5)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        while not stop.is_set():
            url = urls[node % len(urls)]
            try:
                async with session.get(f"{url}/blocks",
                                       params={"from": state.next_height, "limit": limit, "txs": "ids"}) as response:
                    document = orjson.loads(await response.read()) if response.status == 200 else None
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError, orjson.JSONDecodeError):
                document = None
            if document is None:
                node += 1
                state.node_switches += 1
            else:
                seen_at = time.perf_counter() - start
                blocks = document.get("blocks", [])
                for block in blocks:
                    for tx_id in block.get("tx_ids", []):
                        index = pending.pop(bytes.fromhex(tx_id), None)
                        if index is not None:
                            timings.mark_committed(index, seen_at)
                            state.committed_seen += 1
                            state.recent.append((seen_at, seen_at - timings.intended[index]))
                    state.next_height = int(block["height"]) + 1
                    state.blocks_seen += 1
                if len(blocks) == limit:
                    continue  # more blocks are waiting: fetch them now
            try:
                await asyncio.wait_for(stop.wait(), timeout=poll_s)
            except asyncio.TimeoutError:
                pass
