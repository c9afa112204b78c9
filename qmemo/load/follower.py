"""Follow new blocks: mark the generator's transactions included when first seen in a
block, and committed when first seen in a block reported `final` (docs/api.md).

One request per poll brings every new block's transaction ids (`GET /blocks?from=H
&limit=N&txs=ids`, docs/api.md); transactions are never polled one by one. A block
seen before it was final is asked for again, its summary alone (`txs=none`: one block,
at the lowest such height)
each time the tip has moved, until it is final - or until another block has replaced
it there (a fork switch: the follower reads the chain again from that height, and its
transactions wait for the block that carries them now). Times are taken when the
follower sees a block, so they carry up to one poll interval (0.1 s by default) of
observation delay - small next to a 2 s block interval, and stated in the run
manifest. If the followed node stops answering, the follower moves to the next node.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import aiohttp
import orjson

from qmemo.load.latency import Timings
from qmemo.load.node_record import BlockSeen


@dataclass
class FollowState:
    next_height: int
    blocks_seen: int = 0
    committed_seen: int = 0
    included_seen: int = 0
    node_switches: int = 0
    branch_switches: int = 0
    # (seen at, intended -> committed latency) of recent commits, oldest first: the live
    # status reads this instead of rescanning every transaction each second.
    recent: deque[tuple[float, float]] = field(default_factory=deque)
    # Blocks seen but not yet final, oldest first: (height, hash, our (id, index) pairs in it).
    unfinal: deque[tuple[int, str, list[tuple[bytes, int]]]] = field(default_factory=deque)
    # Each planned transaction's encoded size (empty: not known), and what every block
    # seen carried, by height (a fork switch's replacement block replaces the entry).
    tx_bytes: Sequence[int] = ()
    blocks: dict[int, BlockSeen] = field(default_factory=dict)


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
    """Until `stop` is set: fetch new blocks, mark pending transactions included, and
    committed (removed from `pending`) once their block is final."""
    node = 0
    timeout = aiohttp.ClientTimeout(total=5)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        while not stop.is_set():
            url = urls[node % len(urls)]
            blocks = await _get_blocks(session, url, state.next_height, limit)
            if blocks is None:
                node += 1
                state.node_switches += 1
            else:
                seen_at = time.perf_counter() - start
                for block in blocks:
                    _see(block, state, pending, timings, seen_at)
                if blocks and not await _settle(session, url, state, pending, timings, start):
                    node += 1
                    state.node_switches += 1
                elif len(blocks) == limit:
                    continue  # more blocks are waiting: fetch them now
            try:
                await asyncio.wait_for(stop.wait(), timeout=poll_s)
            except asyncio.TimeoutError:
                pass


async def _get_blocks(session: aiohttp.ClientSession, url: str, height: int, limit: int,
                      txs: str = "ids") -> list[dict] | None:
    """`limit` blocks from `height` on, with their transaction ids (`txs="none"`: summaries
    only); None if the node did not answer."""
    try:
        async with session.get(f"{url}/blocks", params={"from": height, "limit": limit, "txs": txs}) as response:
            document = orjson.loads(await response.read()) if response.status == 200 else None
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError, orjson.JSONDecodeError):
        return None
    return document.get("blocks", []) if isinstance(document, dict) else None


def _see(block: dict, state: FollowState, pending: dict[bytes, int], timings: Timings, seen_at: float) -> None:
    """A block seen for the first time at its height: mark its transactions included, and
    committed if it is final already (a node without peers finalises at once)."""
    # The decoding and the lookups run in map()'s C loop: a block at 3,000 TPS carries
    # 6,000 ids, and this loop was the generator's largest Python cost (py-spy).
    keys = list(map(bytes.fromhex, block.get("tx_ids", [])))
    ours = [(key, index) for key, index in zip(keys, map(pending.get, keys)) if index is not None]
    included = timings.included
    for _, index in ours:
        if math.isnan(included[index]):     # first seen: as Timings.mark_included
            included[index] = seen_at
            state.included_seen += 1
    height = int(block["height"])
    state.next_height = height + 1
    tx_count = block.get("tx_count")
    state.blocks[height] = BlockSeen(height, tx_count if isinstance(tx_count, int) else len(block.get("tx_ids", [])),
                                     len(ours), sum(state.tx_bytes[i] for _, i in ours) if state.tx_bytes else 0)
    state.blocks_seen += 1
    # A block reported without `final` comes from a node that predates finality: its
    # blocks are taken as final when seen, as before.
    if block.get("final", True):
        _commit(ours, state, pending, timings, seen_at)
    else:
        state.unfinal.append((height, block["hash"], ours))


def _commit(ours: list[tuple[bytes, int]], state: FollowState, pending: dict[bytes, int], timings: Timings,
            seen_at: float) -> None:
    for key, index in ours:
        if pending.pop(key, None) is None:
            continue
        timings.mark_committed(index, seen_at)
        state.committed_seen += 1
        state.recent.append((seen_at, seen_at - timings.intended[index]))


async def _settle(session: aiohttp.ClientSession, url: str, state: FollowState, pending: dict[bytes, int],
                  timings: Timings, start: float) -> bool:
    """The tip moved: ask again for the oldest blocks seen before they were final, until
    one still is not. False if the node did not answer."""
    while state.unfinal:
        height, hash_, ours = state.unfinal[0]
        # Only its hash and `final` are needed: its ids were read when it was first seen, and
        # asking for them again cost a 6,000-transaction block's ids on every tip move.
        blocks = await _get_blocks(session, url, height, 1, "none")
        if blocks is None:
            return False
        seen_at = time.perf_counter() - start
        if not blocks or blocks[0]["hash"] != hash_:
            # A fork switch replaced it (or the node is behind): read the chain again from here.
            state.branch_switches += 1
            state.unfinal.clear()
            state.next_height = height
            return True
        if not blocks[0].get("final", True):
            return True
        state.unfinal.popleft()
        _commit(ours, state, pending, timings, seen_at)
    return True


async def lost_reasons(urls: list[str], ids: list[bytes], *, budget_s: float = 120.0,
                       concurrency: int = 16) -> dict[str, int]:
    """Why each of `ids` (answered accepted, never seen final) is not final: what the first
    node that knows it says (`GET /tx/<id>`): "evicted: <reason>", "pending", "queued",
    "committed, not final", or "final on <node>" (a block the followed chain does not
    hold: a fork the follower did not see); "unknown to every node" if none does. So
    "lost" is a residual with reasons, not a mystery. Ids left when `budget_s` runs out
    are counted "not asked (time budget)" (past saturation the nodes answer slowly for a
    while after the load: 60 s classified 4,467 of 39,293 at 6,750 TPS offered)."""
    reasons: dict[str, int] = {}
    queue = deque(ids)
    deadline = time.monotonic() + budget_s

    async def ask(session: aiohttp.ClientSession, tx_id: bytes) -> str:
        for url in urls:
            try:
                async with session.get(f"{url}/tx/{tx_id.hex()}") as response:
                    document = orjson.loads(await response.read()) if response.status == 200 else {}
            except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError):
                continue
            status = document.get("status")
            if status == "evicted":
                return f"evicted: {document.get('reason')}"
            if status == "committed":
                return f"final on {url}" if document.get("final") else "committed, not final"
            if status in ("pending", "queued"):
                return status
        return "unknown to every node"

    async def worker(session: aiohttp.ClientSession) -> None:
        while queue:
            tx_id = queue.popleft()
            reason = await ask(session, tx_id) if time.monotonic() < deadline else "not asked (time budget)"
            reasons[reason] = reasons.get(reason, 0) + 1

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session:
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
    return reasons
