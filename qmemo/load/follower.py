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

import numpy as np

from qmemo.api_schema import COMMITTED, EVICTED, HELD, PENDING, UNKNOWN, BlockSummary, TxStatus
from qmemo.errors import NodeApiError, NodeRefused
from qmemo.load.latency import Timings
from qmemo.load.node_record import BlockSeen
from qmemo.net.client import NodeClient, open_clients


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
    unfinal: deque[tuple[int, bytes, np.ndarray]] = field(default_factory=deque)
    # Each planned transaction's encoded size (empty: not known), and what every block
    # seen carried, by height (a fork switch's replacement block replaces the entry).
    tx_bytes: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    blocks: dict[int, BlockSeen] = field(default_factory=dict)


def plan_index(ids: Iterable[bytes]) -> dict[bytes, int]:
    """Transaction id -> its plan index. Built once before the run, so that a block's ids
    (decoded by the node client in one pass) are looked up as they come."""
    return {tx_id: index for index, tx_id in enumerate(ids)}


def final_mask(timings: Timings) -> np.ndarray:
    """True for each planned transaction seen in a final block (its committed time is set)."""
    return ~np.isnan(np.frombuffer(timings.committed, dtype=np.float64))


async def current_height(clients: list[NodeClient]) -> int:
    """The chain height as the first answering node reports it."""
    for client in clients:
        try:
            return (await client.status()).height
        except NodeApiError:
            continue
    raise ConnectionError(f"no node answered /status: {', '.join(client.url for client in clients)}")


async def follow_blocks(urls: list[str], state: FollowState, index_of: dict[bytes, int], timings: Timings, *,
                        start: float, stop: asyncio.Event, poll_s: float = 0.1, limit: int = 50) -> None:
    """Until `stop` is set: fetch new blocks, mark the planned transactions in them
    (`index_of`: `plan_index`) included, and committed once their block is final."""
    node = 0
    async with open_clients(urls, timeout_s=5) as clients:
        while not stop.is_set():
            client = clients[node % len(clients)]
            blocks = await _get_blocks(client, state.next_height, limit)
            if blocks is None:
                node += 1
                state.node_switches += 1
            else:
                seen_at = time.perf_counter() - start
                for block in blocks:
                    _see(block, state, index_of, timings, seen_at)
                if blocks and not await _settle(client, state, timings, start):
                    node += 1
                    state.node_switches += 1
                elif len(blocks) == limit:
                    continue  # more blocks are waiting: fetch them now
            try:
                await asyncio.wait_for(stop.wait(), timeout=poll_s)
            except asyncio.TimeoutError:
                pass


async def _get_blocks(client: NodeClient, height: int, limit: int, txs: str = "ids") -> list[BlockSummary] | None:
    """`limit` blocks from `height` on, with their transaction ids (`txs="none"`: summaries
    only); None if the node did not answer."""
    try:
        return await client.blocks(height, limit, txs=txs)
    except NodeApiError:
        return None


def _see(block: BlockSummary, state: FollowState, index_of: dict[bytes, int], timings: Timings,
         seen_at: float) -> None:
    """A block seen for the first time at its height: mark its transactions included, and
    committed if it is final already (a node without peers finalises at once)."""
    ids = block.tx_ids or ()
    # One C loop looks every id up (-1: not ours); then numpy marks them all at once.
    found = np.fromiter(map(index_of.get, ids, repeat(-1)), dtype=np.int64, count=len(ids))
    ours = found[found >= 0]
    included = np.frombuffer(timings.included, dtype=np.float64)
    first_seen = ours[np.isnan(included[ours])]       # as Timings.mark_included: the first sighting counts
    included[first_seen] = seen_at
    state.included_seen += len(first_seen)
    height = block.height
    state.next_height = height + 1
    state.blocks[height] = BlockSeen(height, block.tx_count, len(ours),
                                     int(state.tx_bytes[ours].sum()) if len(state.tx_bytes) else 0)
    state.blocks_seen += 1
    # A block reported without `final` comes from a node that predates finality: its
    # blocks are taken as final when seen, as before.
    if block.final is not False:
        _commit(ours, state, timings, seen_at)
    else:
        state.unfinal.append((height, block.hash, ours))


def _commit(ours: np.ndarray, state: FollowState, timings: Timings, seen_at: float) -> None:
    """`ours` (plan indices) are in a final block: committed now, unless they already were."""
    committed = np.frombuffer(timings.committed, dtype=np.float64)
    fresh = ours[np.isnan(committed[ours])]
    if not len(fresh):
        return
    committed[fresh] = seen_at
    state.committed_seen += len(fresh)
    state.recent.append((seen_at, seen_at - np.frombuffer(timings.intended, dtype=np.float64)[fresh]))


async def _settle(client: NodeClient, state: FollowState, timings: Timings, start: float) -> bool:
    """The tip moved: ask again for the oldest blocks seen before they were final, until
    one still is not. False if the node did not answer."""
    while state.unfinal:
        height, hash_, ours = state.unfinal[0]
        # Only its hash and `final` are needed: its ids were read when it was first seen, and
        # asking for them again cost a 6,000-transaction block's ids on every tip move.
        blocks = await _get_blocks(client, height, 1, "none")
        if blocks is None:
            return False
        seen_at = time.perf_counter() - start
        if not blocks or blocks[0].hash != hash_:
            # A fork switch replaced it (or the node is behind): read the chain again from here.
            state.branch_switches += 1
            state.unfinal.clear()
            state.next_height = height
            return True
        if blocks[0].final is False:
            return True
        state.unfinal.popleft()
        _commit(ours, state, timings, seen_at)
    return True


STATUS_BATCH_IDS = 1_000        # ids per POST /txs/status: the node's limit (docs/api.md)
NOT_ASKED = "not asked (time budget)"
STATUS_GETS = 16                # GET /tx/<id> at a time, for a node without POST /txs/status


async def lost_reasons(urls: list[str], ids: list[bytes], *, budget_s: float = 120.0,
                       batch_ids: int = STATUS_BATCH_IDS, concurrency: int = 4,
                       final: list[bytes] | None = None) -> dict[str, int]:
    """Why each of `ids` (answered accepted, never seen final) is not final: what the first
    node that knows it says: "evicted: <reason>", "pending", "held", "committed, not
    final", or "final on <node>" (a block the followed chain does not hold: a fork the
    follower did not see); "unknown to every node" if none does. So "lost" is a residual
    with reasons, not a mystery; the counts add up to `len(ids)`. `final`: gets the ids a
    node reports final - committed late, after the follower stopped waiting, not lost (the
    caller counts them so; a fork only if the nodes' final hashes differ: qmemo.load.agreement).

    The nodes are asked `batch_ids` at a time (`POST /txs/status`), node by node: the first
    node for all of them, the next only for those the first did not know (or whose batch
    it did not answer): past saturation a look-up per id would not fit the budget for the
    lost of a run. Batches not begun when `budget_s`
    runs out are counted "not asked (time budget)"."""
    reasons: dict[str, int] = {}
    deadline = time.monotonic() + budget_s
    left = list(ids)
    gate = asyncio.Semaphore(concurrency)

    def count(reason: str, how_many: int = 1) -> None:
        reasons[reason] = reasons.get(reason, 0) + how_many

    async def ask(client: NodeClient, chunk: list[bytes]) -> list[bytes]:
        """Count the reasons `client`'s node gives for `chunk`; return the ids it did not know."""
        async with gate:
            if time.monotonic() >= deadline:
                count(NOT_ASKED, len(chunk))
                return []
            statuses = await _statuses(client, chunk, deadline)
        if statuses is None:
            return chunk
        unknown = []
        for tx_id, status in zip(chunk, statuses):
            reason = NOT_ASKED if status is None else _reason(status, client.url)
            if reason is None:
                unknown.append(tx_id)
            else:
                count(reason)
                if final is not None and status is not None and status.status == COMMITTED and status.final:
                    final.append(tx_id)
        return unknown

    async with open_clients(urls, timeout_s=30) as clients:
        for client in clients:
            if not left:
                break
            chunks = [left[i:i + batch_ids] for i in range(0, len(left), batch_ids)]
            results = await asyncio.gather(*(ask(client, chunk) for chunk in chunks))
            left = [tx_id for unknown in results for tx_id in unknown]
    if left:
        count("unknown to every node", len(left))
    return reasons


async def _statuses(client: NodeClient, chunk: list[bytes], deadline: float) -> list[TxStatus | None] | None:
    """`POST /txs/status` for `chunk`: one status per id (None: not asked before `deadline`,
    time.monotonic()), or None if no usable answer."""
    try:
        return list(await client.tx_statuses(chunk))
    except NodeRefused as exc:
        if exc.node_status == 404:      # a node from before the batch route: one GET per id
            return await _status_each(client, chunk, deadline)
        return None
    except NodeApiError:
        return None


async def _status_each(client: NodeClient, chunk: list[bytes], deadline: float) -> list[TxStatus | None]:
    """`GET /tx/<id>` for each of `chunk`, STATUS_GETS at a time, none begun past `deadline`
    (its status None: not asked), so a slow node cannot stretch the time budget."""
    gate = asyncio.Semaphore(STATUS_GETS)

    async def one(tx_id: bytes) -> TxStatus | None:
        async with gate:
            return None if time.monotonic() >= deadline else await _status(client, tx_id)

    return list(await asyncio.gather(*(one(tx_id) for tx_id in chunk)))


async def _status(client: NodeClient, tx_id: bytes) -> TxStatus:
    """`GET /tx/<id>` (unknown if the node did not answer it)."""
    try:
        return await client.tx_status(tx_id)
    except NodeApiError:
        return TxStatus(tx_id, UNKNOWN)


FINAL_ON = "final on "          # + the node: one not seen final that a node reports final (committed late)


def _reason(status: TxStatus, url: str) -> str | None:
    """Why a node says a transaction is not final (None: the node does not know it)."""
    if status.status == EVICTED:
        return f"evicted: {status.reason}"
    if status.status == COMMITTED:
        return f"{FINAL_ON}{url}" if status.final else "committed, not final"
    if status.status in (PENDING, HELD):
        return status.status
    return None
