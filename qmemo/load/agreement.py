"""Do the nodes agree? Their final blocks compared by hash at every height, and their branch switches counted.

`check_agreement(urls)` asks each node, through its client (qmemo.net.client), for its
`final_height` (GET /status) and its branch switches (`blocks.reorgs`, GET /metrics),
then for the hashes of its final blocks from `from_height` to the lowest final height
among the nodes that answered (GET /blocks, paged, summaries alone): every one of those
heights is final on every node, so a hash that differs there is two final blocks at one
height - the one thing a chain must never show. `compare` is the verdict on what was
read, pure, so it is tested on hand-built chains.

One job: read, compare and count. It never prints, never waits for the nodes to
converge and never raises for a node: one that does not answer is listed in
`unanswered` (and the nodes are then not known to agree).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from qmemo.errors import NodeApiError

if TYPE_CHECKING:       # the client loads aiohttp; the summary's readers (qmemo report) import this module's record
    from qmemo.api_schema import BlockSummary
    from qmemo.net.client import NodeClient

PAGE_BLOCKS = 100           # the API's most blocks per GET /blocks request
STATUS_TIMEOUT_S = 2.0      # /status and /metrics: a node that needs longer is reported unanswered
BLOCKS_TIMEOUT_S = 5.0      # a page of block summaries
SINCE_NODE_START = "node start"     # `reorgs` are the nodes' counters as read
SINCE_RUN_START = "run start"       # `reorgs` less the counters read at the run's start


@dataclass(frozen=True, slots=True)
class Disagreement:
    """The lowest height at which two nodes' final blocks differ, and each node's hash there (hex)."""

    height: int
    hashes: dict[str, str]          # by node URL


@dataclass(frozen=True, slots=True)
class Agreement:
    """summary.json's `agreement` (docs/devnet.md, "Output")."""

    nodes: tuple[str, ...]          # the nodes compared (those that answered), by URL
    from_height: int                # the heights compared: from_height..to_height, none if to < from
    to_height: int                  # the lowest final height among the nodes compared
    agree: bool                     # every node answered and no compared height has two hashes
    first_disagreement: Disagreement | None
    reorgs: dict[str, int]          # branch switches (`blocks.reorgs`) by node URL, since `reorgs_since`
    reorgs_total: int
    reorgs_since: str               # "node start" or "run start"
    unanswered: tuple[str, ...]     # nodes that did not answer /status, /metrics or /blocks

    @property
    def heights(self) -> int:
        """How many heights were compared."""
        return max(0, self.to_height - self.from_height + 1)


@dataclass(frozen=True, slots=True)
class NodeReading:
    """What one node said: its final height, its branch switches and its final blocks' hashes (height -> hex)."""

    final_height: int
    reorgs: int
    hashes: Mapping[int, str]


def compare(readings: Mapping[str, NodeReading | None], from_height: int = 1,
            reorgs_before: Mapping[str, int | None] | None = None) -> Agreement:
    """The verdict on `readings` (by node URL, None: it did not answer), over the heights
    from `from_height` to the lowest final height among the nodes that answered.
    `reorgs_before` (by URL) are the counters at the run's start: `reorgs` then counts
    the run's branch switches (a node without one counts from its start)."""
    answered = {url: reading for url, reading in readings.items() if reading is not None}
    to_height = min((r.final_height for r in answered.values()), default=from_height - 1)
    first = None
    for height in range(from_height, to_height + 1):
        hashes = {url: reading.hashes.get(height, "") for url, reading in answered.items()}
        if len(set(hashes.values())) > 1:       # a missing hash ("") differs too: a final block not given
            first = Disagreement(height, hashes)
            break
    before = reorgs_before or {}
    reorgs = {url: _since(reading.reorgs, before.get(url)) for url, reading in answered.items()}
    unanswered = tuple(url for url, reading in readings.items() if reading is None)
    return Agreement(tuple(answered), from_height, to_height, bool(answered) and not unanswered and first is None,
                     first, reorgs, sum(reorgs.values()), SINCE_RUN_START if reorgs_before is not None
                     else SINCE_NODE_START, unanswered)


def _since(count: int, before: int | None) -> int:
    """Branch switches since `before`; a counter below it is a node restarted since (its count starts again at 0)."""
    return count - before if before is not None and count >= before else count


async def check_agreement(urls: Sequence[str], from_height: int = 1,
                          reorgs_before: Mapping[str, int | None] | None = None) -> Agreement:
    """Read every node at `urls` and `compare` what they said (see the module's docstring)."""
    from qmemo.net.client import open_clients

    async with open_clients(list(urls), timeout_s=STATUS_TIMEOUT_S) as clients:
        heads = await asyncio.gather(*map(_head, clients))
        to_height = min((head[0] for head in heads if head is not None), default=0)
        chains = await asyncio.gather(*(_final_blocks(client, head, from_height, to_height)
                                        for client, head in zip(clients, heads)))
    readings = {url: NodeReading(head[0], head[1], {block.height: block.hash.hex() for block in blocks})
                if head is not None and blocks is not None else None
                for url, head, blocks in zip(urls, heads, chains)}
    return compare(readings, from_height, reorgs_before)


async def _head(client: NodeClient) -> tuple[int, int] | None:
    """(final height, branch switches) of one node; None if it did not answer."""
    try:
        status = await client.status()
        metrics = await client.metrics()
    except NodeApiError:
        return None
    return status.final_height, metrics.blocks.reorgs


async def _final_blocks(client: NodeClient, head: tuple[int, int] | None, from_height: int,
                        to_height: int) -> list[BlockSummary] | None:
    if head is None:
        return None
    return await read_blocks(client.with_timeout(BLOCKS_TIMEOUT_S), from_height, to_height, txs="none")


async def read_blocks(client: NodeClient, start: int, stop: int | None = None, *,
                      txs: str = "ids") -> list[BlockSummary] | None:
    """Blocks [start, stop] (to the tip if stop is None), with their tx ids (`txs="ids"`) or
    as summaries alone (`"none"`); None if the node fails to answer."""
    blocks: list[BlockSummary] = []
    height = start
    while stop is None or height <= stop:
        limit = PAGE_BLOCKS if stop is None else min(PAGE_BLOCKS, stop - height + 1)
        try:
            page = await client.blocks(height, limit, txs=txs)
        except NodeApiError:
            return None
        if not page:
            break
        blocks.extend(page)
        height = page[-1].height + 1
    return blocks
