"""Reads of the chain for the node's answers: where a transaction is (with its inclusion
proof once committed), and blocks by height: decoded, as headers and transaction ids, or
as their encodings.

Recent blocks come from memory (`Chain.recent`), older ones from the store on a reader
thread, so a read never blocks the event loop on SQLite. Only reads: changes nothing,
takes no lock (a block applied meanwhile shows up in the next read).

Never imports aiohttp, builds JSON or knows about HTTP.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Executor
from typing import TypeVar

from qmemo.core.block import Block, BlockIds
from qmemo.core.hashing import split_digests
from qmemo.core.merkle import merkle_proof
from qmemo.node.admission import Admission
from qmemo.node.answers import TxStatus
from qmemo.node.chain import Chain
from qmemo.node.ledger import NodeBlock
from qmemo.node.store import ChainStore

T = TypeVar("T")


class ChainQueries:
    """The node's read side over its chain (memory first), its store and its admission."""

    def __init__(self, chain: Chain, admission: Admission, store: ChainStore, reader: Executor) -> None:
        self.chain = chain
        self.admission = admission
        self.store = store
        self._reader = reader

    async def transaction_status(self, tx_id: bytes) -> TxStatus:
        """pending / held / committed (with inclusion proof, confirmations, final) / evicted /
        unknown; only blocks already stored (`Chain.served_height`) count as committed."""
        chain = self.chain
        pending = self.admission.pending_status(tx_id)
        if pending and not pending.startswith("evicted:"):
            return TxStatus(tx_id, pending)
        for entry in chain.recent:
            block = entry.block
            if block.height > chain.served_height:   # applied, not yet stored: not served
                break
            position = block.body.find(tx_id)
            if position >= 0:
                return TxStatus(tx_id, "committed", block.height, position, block.hash, block.header.merkle_root,
                                merkle_proof(split_digests(block.ids()), position), None, *chain.depth(block.height))
        committed = await asyncio.get_running_loop().run_in_executor(self._reader, self.store.transaction, tx_id)
        if committed is not None and committed.height <= chain.height and \
                chain.hash_at(committed.height) == committed.block_hash:
            return TxStatus(tx_id, "committed", committed.height, committed.position, committed.block_hash,
                            committed.merkle_root, committed.proof, None, *chain.depth(committed.height))
        if pending:
            return TxStatus(tx_id, "evicted", reason=pending.split(":", 1)[1])
        return TxStatus(tx_id, "unknown")

    async def transaction_statuses(self, tx_ids: list[bytes]) -> list[TxStatus]:
        """`transaction_status` of each, in order, without inclusion proofs (POST /txs/status).
        The served blocks in memory are indexed once per call and the store is asked on one
        reader-thread hop: one `transaction_status` per id would scan every recent block for
        each id, which past saturation outlasts a client's timeout (docs/soak.md, "A short run")."""
        chain = self.chain
        where: dict[bytes, tuple[NodeBlock, int]] = {}
        for entry in chain.recent:
            block = entry.block
            if block.height > chain.served_height:   # applied, not yet stored: not served
                break
            where.update((tx_id, (block, position)) for position, tx_id in enumerate(split_digests(block.ids())))
        out: list[TxStatus | None] = []
        pending_of: dict[int, str | None] = {}
        for index, tx_id in enumerate(tx_ids):
            pending = self.admission.pending_status(tx_id)
            found = where.get(tx_id)
            if pending and not pending.startswith("evicted:"):
                out.append(TxStatus(tx_id, pending))
            elif found is not None:
                block, position = found
                out.append(TxStatus(tx_id, "committed", block.height, position, block.hash, block.header.merkle_root,
                                    None, None, *chain.depth(block.height)))
            else:
                out.append(None)
                pending_of[index] = pending
        store = self.store
        committed = await asyncio.get_running_loop().run_in_executor(
            self._reader, lambda: {index: store.place(tx_ids[index]) for index in pending_of})
        for index, pending in pending_of.items():
            tx_id, found_in_store = tx_ids[index], committed[index]
            if found_in_store is not None and found_in_store.height <= chain.height and \
                    chain.hash_at(found_in_store.height) == found_in_store.block_hash:
                out[index] = TxStatus(tx_id, "committed", found_in_store.height, found_in_store.position,
                                      found_in_store.block_hash, found_in_store.merkle_root, None, None,
                                      *chain.depth(found_in_store.height))
            elif pending:
                out[index] = TxStatus(tx_id, "evicted", reason=pending.split(":", 1)[1])
            else:
                out[index] = TxStatus(tx_id, "unknown")
        return out      # type: ignore[return-value]   (every index set above)

    async def blocks(self, from_height: int, limit: int) -> list[Block]:
        """Our blocks from `from_height` upwards (at most `limit`), ascending."""
        return await self._read_blocks(from_height, limit, NodeBlock.to_block, ChainStore.block)

    async def block_ids(self, from_height: int, limit: int, *, with_ids: bool) -> list[BlockIds]:
        """Like `blocks`, as headers and transaction ids (None without `with_ids`): a
        stored block is read from its header and id list, not decoded."""
        return await self._read_blocks(from_height, limit, lambda block: block.block_ids(with_ids=with_ids),
                                       lambda store, height: store.block_ids(height, with_ids=with_ids))

    async def block_encodings(self, from_height: int, limit: int) -> list[bytes]:
        """Like `blocks`, as block encodings (what peers sync, without decoding)."""
        return await self._read_blocks(from_height, limit, NodeBlock.encode, ChainStore.block_bytes)

    async def _read_blocks(self, from_height: int, limit: int, from_memory: Callable[[NodeBlock], T],
                           from_store: Callable[[ChainStore, int], T | None]) -> list[T]:
        """Blocks from `from_height` on, from memory where held there, else from the store
        (on a reader thread), each as `from_memory`/`from_store` gives it; up to the first gap."""
        chain = self.chain
        heights = range(max(1, from_height), min(chain.served_height, from_height + limit - 1) + 1)
        recent = {height: chain.recent_block(height) for height in heights}
        stored = [height for height, block in recent.items() if block is None]
        loaded: dict[int, T | None] = {}
        if stored:
            store = self.store
            loaded = await asyncio.get_running_loop().run_in_executor(
                self._reader, lambda: {height: from_store(store, height) for height in stored})
        out: list[T] = []
        for height in heights:
            block = recent[height]
            item = from_memory(block) if block is not None else loaded.get(height)
            if item is None:
                break
            out.append(item)
        return out
