"""How receipts travel between shards: destination nodes pull them from source nodes.

Pull, not push (docs/protocol.md, "Receipts"): each node of a destination shard asks
the source shards' nodes for the receipt bundles of the source's final blocks from its
cursor on (`GET /peer/receipts?shard=K&from=H&limit=N&wait_ms=W`), and moves its cursor
past every height the answer covered. The ask is a long poll held by the source node
(`ReceiptOutbox.answer_when_final`) until a block at or above the cursor is final *with
a bundle for the asking shard*, or W passes (`LONG_POLL_S`): the source's `FinalWatch`
wakes it when a block is made durable, so a receipt leaves in the same turn of the
event loop that made its block final, batched per block, and a held ask costs nothing
until then - no timer looks at the height. Blocks with nothing for the asker move no
request: an idle shard costs one ask per source shard every W, whatever the block
interval. Nothing is pushed, so nothing has to be retried on the source side or
buffered for a peer that is down: a source node that is dead, or a partition between
two shards, only delays the pulls - the destination asks another source node, or the
same one again - and a destination node that restarts asks again from height 1
(receipts it already credited are recognised by id and dropped). No coordinator: every
node of every shard does the same.

Source side, `ReceiptOutbox`: the bundles of a final block are built once per node and
kept for every destination (a block's cross-shard transfers found in C,
`BlockBody.outgoing`; their proofs from one pass over its Merkle tree; the finality
headers from the chain above it), so three destination nodes asking cost one build.

Never imports aiohttp or knows about HTTP: a source node is a `ReceiptSource`.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Executor
from typing import Protocol

from qmemo.core.block import BlockHeader
from qmemo.core.genesis import Genesis
from qmemo.core.hashing import split_digests
from qmemo.core.receipts import finality_headers, make_bundles
from qmemo.core.transaction import Transaction
from qmemo.errors import DecodeError, PeerError
from qmemo.node.chain import Chain
from qmemo.node.ledger import NodeBlock, body_of, native
from qmemo.node.receipts import ReceiptRoom
from qmemo.node.store import ChainStore

# Heights whose bundles a source node keeps built: destination nodes pull within a poll or
# two of finality, and a height's bundles are up to ~1 MB at 4,000 TPS over 4 shards.
BUILT_MEMORY = 64
MAX_ANSWER_BYTES = 32 << 20   # one answer's bundles at most (a peer body's limit is 128 MiB)
PULL_LIMIT = 20               # source heights asked for at a time
LONG_POLL_S = 4.0             # how long a source node may hold an ask (under the peer call's 10 s timeout)
SOURCE_RETRY_S = 1.0          # how often a source node that has not answered yet is asked which shard it is
_POSITION = struct.Struct("<I")


class ReceiptSource(Protocol):
    """A node of another shard, as the puller sees it (qmemo.net.peer_client.HttpPeer)."""

    url: str

    async def receipts(self, shard: int, from_height: int, limit: int,
                       wait_s: float = 0.0) -> tuple[int, int, list[bytes]]:
        """(its chain id, the highest height the answer covers, the bundles for `shard`),
        held up to `wait_s` while nothing there is final."""
        ...


class FinalWatch:
    """This node's final and served height, for the long polls waiting on it.

    The final height moves only when a block or branch is made durable; whoever made it
    durable calls `moved()`, which wakes every waiter once. A waiter never looks on a
    timer, so a held long poll costs no wake-up between blocks; a `moved()` that did not
    come costs at most the waiter's deadline."""

    def __init__(self, chain: Chain) -> None:
        self.chain = chain
        self._waiters: list[asyncio.Future[None]] = []
        self.closed = False

    @property
    def height(self) -> int:
        """The highest height a receipt may be served from: final and in the store."""
        return min(self.chain.final_height, self.chain.served_height)

    def moved(self) -> None:
        """A block or branch was made durable: the final height may have moved."""
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def close(self) -> None:
        """The node is stopping: every wait ends now, and any later one at once."""
        self.closed = True
        self.moved()

    async def wait_for(self, height: int, deadline: float) -> bool:
        """Until `height` is final and served (True), or the loop's clock reaches `deadline`
        or the node stops (False)."""
        loop = asyncio.get_running_loop()
        while self.height < height:
            remaining = deadline - loop.time()
            if self.closed or remaining <= 0:
                return False
            waiter = loop.create_future()
            self._waiters.append(waiter)
            timer = loop.call_later(remaining, _set_done, waiter)
            try:
                await waiter
            finally:
                timer.cancel()
        return True


def _set_done(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class ReceiptOutbox:
    """The receipt bundles of this shard's final blocks, for the other shards."""

    def __init__(self, genesis: Genesis, chain: Chain, store: ChainStore, table: int, reader: Executor) -> None:
        self.genesis = genesis
        self.sharding = genesis.sharding
        self.chain = chain
        self.store = store
        self.table = table
        self.watch = FinalWatch(chain)
        self._reader = reader
        self._built: OrderedDict[int, tuple[bytes, dict[int, bytes]]] = OrderedDict()   # height -> (hash, bundles)

    async def serve(self, shard: int, from_height: int, limit: int, wait_s: float) -> tuple[int, list[bytes]]:
        """What another shard's node pulls: (the highest height covered, the bundles for
        `shard`), held up to `wait_s` (`answer_when_final`); DecodeError for a shard this
        genesis does not have."""
        if not 0 <= shard < self.sharding.count:
            raise DecodeError(f"this genesis has shards 0 to {self.sharding.count - 1}", code="out_of_range")
        return await self.answer_when_final(shard, from_height, limit, wait_s) if limit else (from_height - 1, [])

    async def answer_when_final(self, shard: int, from_height: int, limit: int,
                                wait_s: float) -> tuple[int, list[bytes]]:
        """`answer`, held up to `wait_s` until a final block from `from_height` has a bundle
        for `shard`: at once with the first such block's (and any final then), or at the
        deadline with the heights final meanwhile, none of which had one. A final block
        whose finality cannot be shown yet ends the wait too (the asker asks again)."""
        deadline = asyncio.get_running_loop().time() + wait_s
        last = from_height + limit - 1
        covered = from_height - 1
        while covered < last and await self.watch.wait_for(covered + 1, deadline):
            reached, bundles = await self.answer(shard, covered + 1, last - covered)
            if bundles or reached <= covered:
                return max(covered, reached), bundles
            covered = reached
        return covered, []

    async def answer(self, shard: int, from_height: int, limit: int) -> tuple[int, list[bytes]]:
        """The bundles for `shard` of our final blocks from `from_height`, at most `limit`
        heights (and `MAX_ANSWER_BYTES`); with the highest height covered (`from_height` -
        1 if none: nothing final there yet)."""
        chain = self.chain
        last = min(from_height + limit - 1, chain.final_height, chain.served_height)
        covered, out, size = from_height - 1, [], 0
        for height in range(max(1, from_height), last + 1):
            bundles = await self._bundles_at(height)
            if bundles is None:
                break
            bundle = bundles.get(shard)
            if bundle is not None:
                if out and size + len(bundle) > MAX_ANSWER_BYTES:
                    break
                out.append(bundle)
                size += len(bundle)
            covered = height
        return covered, out

    async def _bundles_at(self, height: int) -> dict[int, bytes] | None:
        """Every destination's bundle of our final block at `height` (built once), or None
        if its finality cannot be shown from the headers we hold."""
        block_hash = self.chain.hash_at(height)
        built = self._built.get(height)
        if built is not None and built[0] == block_hash:
            return built[1]
        block = self.chain.recent_block(height)
        loop = asyncio.get_running_loop()
        if block is None:
            encoded = await loop.run_in_executor(self._reader, self.store.block_bytes, height)
            if encoded is None:
                return None
            block = body_of(native(), self.table, self.genesis, encoded)
        bundles = self._build(block, await self._headers(height + 1))
        if bundles is not None:
            self._built[height] = (block.hash, bundles)
            if len(self._built) > BUILT_MEMORY:
                self._built.popitem(last=False)
        return bundles

    async def _headers(self, first: int) -> list[BlockHeader]:
        """Our headers from `first` up, as far as a finality proof may need: from memory,
        else from the store (on a reader thread)."""
        chain = self.chain
        heights = range(first, min(first + self.sharding.own.quorum * 8, chain.served_height + 1))
        recent = {height: chain.recent_block(height) for height in heights}
        stored = [height for height, block in recent.items() if block is None]
        store = self.store
        loaded = await asyncio.get_running_loop().run_in_executor(
            self._reader, lambda: {height: store.header(height) for height in stored}) if stored else {}
        headers = []
        for height in heights:
            block = recent[height]
            header = block.header if block is not None else loaded.get(height)
            if header is None:
                break
            headers.append(header)
        return headers

    def _build(self, block: NodeBlock, above: Sequence[BlockHeader]) -> dict[int, bytes] | None:
        sharding = self.sharding
        positions = [p for (p,) in _POSITION.iter_unpack(block.body.outgoing(sharding.index, sharding.count))]
        if not positions:
            return {}
        finality = finality_headers(block.header, above, sharding.own.quorum)
        if finality is None:
            return None
        outgoing = [(p, Transaction.decode(block.body.encoding(p))) for p in positions]
        bundles = make_bundles(sharding, block.header, finality, split_digests(block.ids()), outgoing)
        return {destination: bundle.encode() for destination, bundle in bundles.items()}


class ReceiptPuller:
    """This shard's node pulling the other shards' receipts into its `ReceiptRoom`."""

    def __init__(self, room: ReceiptRoom, sources: Sequence[ReceiptSource], log: logging.LoggerAdapter, *,
                 interval_s: float = 0.25, limit: int = PULL_LIMIT) -> None:
        self.room = room
        self.sources = list(sources)
        self.log = log
        self.interval_s = interval_s
        self.limit = limit
        self.cursors: dict[int, int] = {}     # source chain id -> next height to ask for

    async def run(self) -> None:
        """Until cancelled: find which shard each source node is of, then pull from each
        source shard on its own task. Once every source is known this task only waits:
        the pool is pruned where blocks become final (`ReceiptRoom.prune`), not on a timer."""
        by_chain: dict[int, list[ReceiptSource]] = {}
        unknown = list(self.sources)
        tasks: dict[int, asyncio.Task] = {}
        try:
            while True:
                for source in list(unknown):
                    try:
                        chain_id, _, _ = await source.receipts(self.room.sharding.index, 1, 0)
                    except PeerError:
                        continue
                    unknown.remove(source)
                    if self.room.sharding.by_chain_id(chain_id) is None or chain_id == self.room.genesis.chain_id:
                        self.log.warning("%s is not a node of another shard (chain %d): not pulling from it",
                                         source.url, chain_id)
                        continue
                    by_chain.setdefault(chain_id, []).append(source)
                    if chain_id not in tasks:
                        tasks[chain_id] = asyncio.create_task(self._pull(chain_id, by_chain[chain_id]))
                        tasks[chain_id].add_done_callback(self._died)
                if not unknown:
                    break
                await asyncio.sleep(SOURCE_RETRY_S)
            await asyncio.gather(*tasks.values(), return_exceptions=True)
        finally:
            for task in tasks.values():
                task.cancel()
            await asyncio.gather(*tasks.values(), return_exceptions=True)

    def _died(self, task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is not None:
            self.log.error("pulling receipts stopped: %r", task.exception(), exc_info=task.exception())

    async def _pull(self, chain_id: int, sources: list[ReceiptSource]) -> None:
        """Pull one source shard's bundles, from the first node that answers, for ever."""
        me, room, turn = self.room.sharding.index, self.room, 0
        self.cursors.setdefault(chain_id, 1)
        reported: set[str] = set()
        while True:
            if room.full:       # back-pressure: our blocks credit what waits before we ask for more
                await asyncio.sleep(self.interval_s)
                continue
            source = sources[turn % len(sources)]
            cursor = self.cursors[chain_id]
            asked = time.monotonic()
            try:
                _, covered, bundles = await source.receipts(me, cursor, self.limit, LONG_POLL_S)
            except PeerError as exc:
                room.counters.pull_failures += 1
                if source.url not in reported:
                    reported.add(source.url)
                    self.log.warning("pulling receipts from %s failed: %s", source.url, exc)
                turn += 1
                await asyncio.sleep(self.interval_s)
                continue
            reported.discard(source.url)
            if bundles:
                await room.admit(bundles)
            if covered >= cursor:
                self.cursors[chain_id] = covered + 1
            elif time.monotonic() - asked < self.interval_s:
                # Nothing, and at once: not a long poll that ran out (a source about to stop).
                await asyncio.sleep(self.interval_s)
