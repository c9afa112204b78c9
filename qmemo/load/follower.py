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

Per block, not per transaction: a block's ids become plan indices in one pass of C
(`map(index_of.get, ...)` into a numpy array), and its transactions' included and
committed times are written through numpy views over `Timings`' arrays, a block at once.
The generator shares the machine's cores with the nodes it measures.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import repeat

import aiohttp
import numpy as np
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
    # (seen at, intended -> committed latencies of what one block committed), oldest first:
    # the live status reads this instead of rescanning every transaction each second.
    recent: deque[tuple[float, np.ndarray]] = field(default_factory=deque)
    # Blocks seen but not yet final, oldest first: (height, hash, the plan indices of ours in it).
    unfinal: deque[tuple[int, str, np.ndarray]] = field(default_factory=deque)
    # Each planned transaction's encoded size (empty: not known), and what every block
    # seen carried, by height (a fork switch's replacement block replaces the entry).
    tx_bytes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    blocks: dict[int, BlockSeen] = field(default_factory=dict)


def plan_index(ids: Iterable[bytes]) -> dict[str, int]:
    """Transaction id as a block's `tx_ids` spell it (hex) -> its plan index. Built once
    before the run, so that a block's ids are looked up as the node sent them."""
    return {tx_id.hex(): index for index, tx_id in enumerate(ids)}


def final_mask(timings: Timings) -> np.ndarray:
    """True for each planned transaction seen in a final block (its committed time is set)."""
    return ~np.isnan(np.frombuffer(timings.committed, dtype=np.float64))


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


async def follow_blocks(urls: list[str], state: FollowState, index_of: dict[str, int], timings: Timings, *,
                        start: float, stop: asyncio.Event, poll_s: float = 0.1, limit: int = 50) -> None:
    """Until `stop` is set: fetch new blocks, mark the planned transactions in them
    (`index_of`: `plan_index`) included, and committed once their block is final."""
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
                    _see(block, state, index_of, timings, seen_at)
                if blocks and not await _settle(session, url, state, timings, start):
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


def _see(block: dict, state: FollowState, index_of: dict[str, int], timings: Timings, seen_at: float) -> None:
    """A block seen for the first time at its height: mark its transactions included, and
    committed if it is final already (a node without peers finalises at once)."""
    ids = block.get("tx_ids", [])
    # One C loop looks every id up (-1: not ours); then numpy marks them all at once.
    found = np.fromiter(map(index_of.get, ids, repeat(-1)), dtype=np.int64, count=len(ids))
    ours = found[found >= 0]
    included = np.frombuffer(timings.included, dtype=np.float64)
    first_seen = ours[np.isnan(included[ours])]       # as Timings.mark_included: the first sighting counts
    included[first_seen] = seen_at
    state.included_seen += len(first_seen)
    height = int(block["height"])
    state.next_height = height + 1
    tx_count = block.get("tx_count")
    state.blocks[height] = BlockSeen(height, tx_count if isinstance(tx_count, int) else len(ids), len(ours),
                                     int(state.tx_bytes[ours].sum()) if len(state.tx_bytes) else 0)
    state.blocks_seen += 1
    # A block reported without `final` comes from a node that predates finality: its
    # blocks are taken as final when seen, as before.
    if block.get("final", True):
        _commit(ours, state, timings, seen_at)
    else:
        state.unfinal.append((height, block["hash"], ours))


def _commit(ours: np.ndarray, state: FollowState, timings: Timings, seen_at: float) -> None:
    """`ours` (plan indices) are in a final block: committed now, unless they already were."""
    committed = np.frombuffer(timings.committed, dtype=np.float64)
    fresh = ours[np.isnan(committed[ours])]
    if not len(fresh):
        return
    committed[fresh] = seen_at
    state.committed_seen += len(fresh)
    state.recent.append((seen_at, seen_at - np.frombuffer(timings.intended, dtype=np.float64)[fresh]))


async def _settle(session: aiohttp.ClientSession, url: str, state: FollowState, timings: Timings,
                  start: float) -> bool:
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
        _commit(ours, state, timings, seen_at)
    return True


STATUS_BATCH_IDS = 1_000        # ids per POST /txs/status: the node's limit (docs/api.md)
NOT_ASKED = "not asked (time budget)"
STATUS_GETS = 16                # GET /tx/<id> at a time, for a node without POST /txs/status


async def lost_reasons(urls: list[str], ids: list[bytes], *, budget_s: float = 120.0,
                       batch_ids: int = STATUS_BATCH_IDS, concurrency: int = 4) -> dict[str, int]:
    """Why each of `ids` (answered accepted, never seen final) is not final: what the first
    node that knows it says: "evicted: <reason>", "pending", "queued", "committed, not
    final", or "final on <node>" (a block the followed chain does not hold: a fork the
    follower did not see); "unknown to every node" if none does. So "lost" is a residual
    with reasons, not a mystery; the counts add up to `len(ids)`.

    The nodes are asked `batch_ids` at a time (`POST /txs/status`), node by node: the first
    node for all of them, the next only for those the first did not know (or whose batch
    it did not answer). Past saturation one GET per id took the whole 120 s budget for
    1,226 of 124,816 lost; 125 batches per node fit it. Batches not begun when `budget_s`
    runs out are counted "not asked (time budget)"."""
    reasons: dict[str, int] = {}
    deadline = time.monotonic() + budget_s
    left = list(ids)
    gate = asyncio.Semaphore(concurrency)

    def count(reason: str, how_many: int = 1) -> None:
        reasons[reason] = reasons.get(reason, 0) + how_many

    async def ask(session: aiohttp.ClientSession, url: str, chunk: list[bytes]) -> list[bytes]:
        """Count the reasons `url` gives for `chunk`; return the ids it did not know."""
        async with gate:
            if time.monotonic() >= deadline:
                count(NOT_ASKED, len(chunk))
                return []
            statuses = await _statuses(session, url, chunk, deadline)
        if statuses is None:
            return chunk
        unknown = []
        for tx_id, document in zip(chunk, statuses):
            reason = NOT_ASKED if document is None else _reason(document, url)
            if reason is None:
                unknown.append(tx_id)
            else:
                count(reason)
        return unknown

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        for url in urls:
            if not left:
                break
            chunks = [left[i:i + batch_ids] for i in range(0, len(left), batch_ids)]
            results = await asyncio.gather(*(ask(session, url, chunk) for chunk in chunks))
            left = [tx_id for unknown in results for tx_id in unknown]
    if left:
        count("unknown to every node", len(left))
    return reasons


async def _statuses(session: aiohttp.ClientSession, url: str, chunk: list[bytes],
                    deadline: float) -> list[dict | None] | None:
    """`POST /txs/status` for `chunk`: one status document per id (None: not asked before
    `deadline`, time.monotonic()), or None if no usable answer."""
    try:
        async with session.post(f"{url}/txs/status", data=orjson.dumps({"ids": [tx_id.hex() for tx_id in chunk]}),
                                headers={"Content-Type": "application/json"}) as response:
            if response.status == 404:      # a node from before the batch route: one GET per id
                return await _status_each(session, url, chunk, deadline)
            document = orjson.loads(await response.read()) if response.status == 200 else None
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError, orjson.JSONDecodeError):
        return None
    statuses = document.get("statuses") if isinstance(document, dict) else None
    if not isinstance(statuses, list) or len(statuses) != len(chunk):
        return None
    return [status if isinstance(status, dict) else {} for status in statuses]


async def _status_each(session: aiohttp.ClientSession, url: str, chunk: list[bytes],
                       deadline: float) -> list[dict | None]:
    """`GET /tx/<id>` for each of `chunk`, STATUS_GETS at a time, none begun past `deadline`
    (its document None: not asked), so a slow node cannot stretch the time budget."""
    gate = asyncio.Semaphore(STATUS_GETS)

    async def one(tx_id: bytes) -> dict | None:
        async with gate:
            return None if time.monotonic() >= deadline else await _status(session, url, tx_id)

    return list(await asyncio.gather(*(one(tx_id) for tx_id in chunk)))


async def _status(session: aiohttp.ClientSession, url: str, tx_id: bytes) -> dict:
    """`GET /tx/<id>` (an empty document if the node did not answer it)."""
    try:
        async with session.get(f"{url}/tx/{tx_id.hex()}") as response:
            return orjson.loads(await response.read()) if response.status == 200 else {}
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError, orjson.JSONDecodeError):
        return {}


def _reason(document: dict, url: str) -> str | None:
    """Why a node says a transaction is not final (None: the node does not know it)."""
    status = document.get("status")
    if status == "evicted":
        return f"evicted: {document.get('reason')}"
    if status == "committed":
        return f"final on {url}" if document.get("final") else "committed, not final"
    if status in ("pending", "queued"):
        return status
    return None
