"""Block intake: decode, pre-verify, apply and undo blocks; the one owner of the chain lock
and of the block pipeline's events.

Every change to the chain goes through here - a block a peer pushed, a branch sync
fetched, a block this node produced, the blocks kept at the last stop - so the
bookkeeping that must follow an applied block (the pool, metrics, the producer's and
flusher's wake-ups) is written once.

The other rooms ask for intentions, never touch the events themselves (trio's rule: who
owns a thing waits for it): the producer `await wait_tip_change(timeout)`,
`validating(height)` and `await wait_validated()`; the flusher `await next_applied()`;
sync `await sync_requested(timeout)`, and anyone `request_sync()`; the producer, the
restore and `stop` take `locked()` around a change of their own.

Durable before announced: once a branch (or a produced block) is applied, `make_durable`
writes its blocks to the store (qmemo.node.store, `keep_branch`, fsync'd) before the
chain lock is released; the node serves (`Chain.served_height`) and relays only what is
stored, so a SIGKILL never takes back a block anyone was shown.

A block's body is the ledger's (qmemo.node.ledger): decoded and hashed by the admission
kernel in one call (a pushed block's ids rebuilt from the pool in one call), its Merkle
root and body rules checked in C. Signatures its pool did not verify already are verified
in the verification pool *before* the lock is taken, so admission keeps flowing while a
block is validated; `Chain.apply` then judges under the lock.

Chain time comes from the node's injected clock (`NodeConfig.clock`), never from the
wall clock directly, so tests can drive it.

Never imports aiohttp or knows about HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from qmemo.core.block import BlockHeader
from qmemo.core.genesis import Genesis
from qmemo.core.hashing import DIGEST_BYTES
from qmemo.errors import DecodeError, InvalidBlock
from qmemo.node.admission import Admission
from qmemo.node.answers import BlockAnswer, BlockStatus
from qmemo.node.chain import Chain, branch_is_better
from qmemo.node.ledger import NodeBlock, body_of, native
from qmemo.node.metrics import NodeMetrics
from qmemo.node.pace import BlockPace
from qmemo.node.stages import BLOCK_BUILD, BLOCK_VALIDATE, MEMPOOL, STORE, thread_cpu_ns
from qmemo.node.verify_pool import VerifyPool


class BlockIntake:
    """Validates and applies blocks to `chain`; serialises every chain change."""

    def __init__(self, genesis: Genesis, chain: Chain, admission: Admission, pool: VerifyPool,
                 metrics: NodeMetrics, log: logging.LoggerAdapter, clock: Callable[[], int],
                 writer: ThreadPoolExecutor) -> None:
        self.genesis = genesis
        self._writer = writer       # the store's one writer thread: writes stay in order
        self.chain = chain
        self.admission = admission
        self.pool = pool
        self.metrics = metrics
        self.log = log
        self.clock = clock
        self._lock = asyncio.Lock()
        self._tip_changed = asyncio.Event()      # the producer plans again
        self._applied = asyncio.Event()          # the flusher looks for blocks that became final
        self._sync_wanted = asyncio.Event()      # a pushed block did not connect: ask the peers now
        self._validating_to: dict[int, int] = {}  # top height of each branch being validated -> how many
        self._validated = asyncio.Event()        # one finished (applied, kept out or refused)
        # A shard's node: its receipts room (qmemo.node.receipts), whose verify path a
        # block's receipts take before the chain lock, as its transactions do.
        self.receipts: Any = None
        # What the peers' blocks measured: the producer sizes and times ours by it.
        self.pace = BlockPace(genesis.block_interval_ms / 1000, genesis.max_block_transactions,
                              genesis.producer_timeout_ms / 1000)

    # --- what the other rooms may ask -------------------------------------------------------

    @contextlib.asynccontextmanager
    async def locked(self) -> AsyncIterator[None]:
        """The chain lock, for a change made outside intake (the producer's turn, the
        restore, the stop): nothing else applies or undoes a block meanwhile."""
        async with self._lock:
            yield

    async def wait_tip_change(self, timeout_s: float) -> bool:
        """Wait until the tip moves (True) or `timeout_s` passes (False)."""
        self._tip_changed.clear()
        try:
            await asyncio.wait_for(self._tip_changed.wait(), max(0.0, timeout_s))
        except asyncio.TimeoutError:
            return False
        return True

    def validating(self, height: int) -> bool:
        """Is a block (or branch) reaching `height` being validated now?"""
        return max(self._validating_to, default=0) >= height

    async def wait_validated(self) -> None:
        """Wait until some validation under way ends (applied, kept out or refused)."""
        self._validated.clear()
        await self._validated.wait()

    async def next_applied(self) -> None:
        """Wait for a block applied (or the durable height moved) since the last call."""
        await self._applied.wait()
        self._applied.clear()

    def request_sync(self) -> None:
        """We lack what a block builds on: sync should ask the peers now."""
        self._sync_wanted.set()

    async def sync_requested(self, timeout_s: float) -> None:
        """Wait for `request_sync` or `timeout_s`, whichever comes first; then clear."""
        try:
            await asyncio.wait_for(self._sync_wanted.wait(), timeout_s)
        except asyncio.TimeoutError:
            pass
        self._sync_wanted.clear()

    def block_budget(self) -> int:
        """Transactions the next block may carry (qmemo.node.pace): the producer's cap, the door's pool."""
        return self.pace.block_budget()

    # --- decoding -----------------------------------------------------------------------------

    def decode(self, encoded: bytes) -> NodeBlock:
        """A block from its encoding, decoded and hashed by the kernel; DecodeError if bad."""
        return body_of(native(), self.pool.kernel.table, self.genesis, encoded)

    def decode_timed(self, encoded: bytes) -> NodeBlock:
        """`decode`, timed into the validation "decode" stage (sync's fetched blocks)."""
        started, cpu_started = time.perf_counter(), thread_cpu_ns()
        try:
            return self.decode(encoded)
        finally:
            self.metrics.stages.lap(BLOCK_VALIDATE, cpu_started)
            self.metrics.validation["decode"].observe(time.perf_counter() - started)

    # --- a pushed block -------------------------------------------------------------------------

    async def receive(self, encoded: bytes) -> BlockAnswer:
        """A block a peer pushed: validate and apply it, or ask for what it builds on.
        DecodeError (400) or InvalidBlock (422) if it is bad."""
        started, cpu_started = time.perf_counter(), thread_cpu_ns()
        try:
            block = self.decode(encoded)
        except DecodeError as exc:
            self.metrics.blocks_rejected[exc.code] += 1
            raise
        finally:
            self.metrics.stages.lap(BLOCK_VALIDATE, cpu_started)
        return await self._receive(block, time.perf_counter() - started)

    async def receive_ids(self, encoded_ids: bytes) -> BlockAnswer:
        """A block a peer pushed as its header and ids (`BlockIds.encode`): rebuilt from the
        transactions this node holds pending, then as `receive` (the Merkle root, each
        signature known or verified, the body rules in full); "missing" if it lacks any of
        them: the peer sends the whole block then. DecodeError (400) or InvalidBlock (422)."""
        started, cpu_started = time.perf_counter(), thread_cpu_ns()
        try:
            header, offset = BlockHeader.decode_from(encoded_ids)
            ids_end = offset + header.tx_count * DIGEST_BYTES
            expected = ids_end + header.receipts_bytes      # a shard's block: its receipts section follows
            if len(encoded_ids) != expected:
                raise DecodeError(f"{len(encoded_ids) - offset} bytes of ids for {header.tx_count} transactions",
                                  code="truncated" if len(encoded_ids) < expected else "trailing_bytes")
            body = self.admission.ledger.rebuild(bytes(encoded_ids[offset:ids_end]))
        except DecodeError as exc:
            self.metrics.blocks_rejected[exc.code] += 1
            raise
        finally:
            self.metrics.stages.lap(BLOCK_VALIDATE, cpu_started)
        if body is None:
            return BlockAnswer(BlockStatus.MISSING, header.height)
        return await self._receive(NodeBlock(header, body, bytes(encoded_ids[ids_end:])),
                                   time.perf_counter() - started)

    async def _receive(self, block: NodeBlock, decode_s: float) -> BlockAnswer:
        chain = self.chain
        height = block.height
        if chain.hash_at(height) == block.hash:
            return BlockAnswer(BlockStatus.KNOWN, height)
        if height > chain.height + 1 or height <= chain.final_height or \
                block.header.previous_hash != chain.hash_at(height - 1):
            self.request_sync()      # we lack what it builds on (or it is a branch): ask the peers
            return BlockAnswer(BlockStatus.SYNC, height)
        self.metrics.validation["decode"].observe(decode_s)
        started = time.perf_counter()
        try:
            status = await self.validate_and_apply([block])
        except InvalidBlock as exc:
            self.metrics.blocks_rejected[exc.code] += 1
            self.log.warning("rejected block %d (%s..) from validator %d: %s: %s", height, block.hash.hex()[:16],
                             block.header.producer_index, exc.code, exc.detail)
            raise
        if status == BlockStatus.ACCEPTED:
            self.pace.observe(block.tx_count, decode_s + time.perf_counter() - started,
                              (self.clock() - block.header.timestamp_ms) / 1000)
        return BlockAnswer(status, height)

    # --- branches ---------------------------------------------------------------------------------

    async def validate_and_apply(self, branch: list[NodeBlock]) -> BlockStatus:
        """Validate and apply a branch of consecutive blocks whose first block's parent is on
        our chain; switch to it if the fork-choice rule says so. Returns the outcome.
        Meanwhile `validating(top)` is true (the producer waits: qmemo.node.producer)."""
        top = branch[-1].height
        self._validating_to[top] = self._validating_to.get(top, 0) + 1
        try:
            return await self._validate_and_apply(branch)
        finally:
            self._validating_to[top] -= 1
            if not self._validating_to[top]:
                del self._validating_to[top]
            self._validated.set()

    async def _validate_and_apply(self, branch: list[NodeBlock]) -> BlockStatus:
        for block in branch:
            await self.preverify(block)
        async with self._lock:
            chain = self.chain
            fork_height = branch[0].height - 1
            if chain.hash_at(fork_height) != branch[0].header.previous_hash or fork_height < chain.final_height:
                return BlockStatus.SYNC     # the chain moved while we verified: let sync sort it out
            ours = chain.blocks_above(fork_height)
            # Skip the blocks we already have (a sync overlapping a push).
            while branch and ours and branch[0].hash == ours[0].hash:
                branch, ours, fork_height = branch[1:], ours[1:], fork_height + 1
            if not branch:
                return BlockStatus.KNOWN
            if ours and not branch_is_better(ours, branch, chain.quorum):
                return BlockStatus.KEPT_OURS
            undone = chain.rollback_to(fork_height, now_ms=self.clock()) if ours else []
            if undone:
                self._undone(undone)
            try:
                for block in branch:
                    self.apply(block, produced=False, record_state=True)
            except InvalidBlock:
                if undone:    # the other branch is invalid: back to ours, which was valid
                    self._undone(chain.rollback_to(fork_height, now_ms=self.clock()))
                    for block in undone:
                        self.apply(block, produced=False, record_state=False)
                raise
            finally:          # whatever is applied now (a valid prefix, at least) is stored
                await self.make_durable()
            if undone:
                self.metrics.reorgs += 1
                self.log.warning("switched branch at height %d: %d block(s) of ours undone, %d applied; tip %d (%s..)",
                                 fork_height, len(undone), len(branch), chain.height, chain.tip_hash.hex()[:16])
            return BlockStatus.ACCEPTED

    async def make_durable(self) -> bool:
        """Write the current branch's blocks not yet stored, then let them be served and
        relayed. The caller holds the chain lock; the event loop goes on meanwhile (the write
        runs on the store's writer thread), serving only what was stored before. False if
        the store refused: the blocks stay unserved, and the next call tries again."""
        chain = self.chain
        blocks = chain.not_durable()
        if blocks or chain.durable_height < chain.height:
            stages, cpu_started = self.metrics.stages, thread_cpu_ns()
            rows = [(block.height, block.hash, block.encode()) for block in blocks]
            txs = sum(block.tx_count for block in blocks)
            stages.lap(STORE, cpu_started)
            started = time.perf_counter()
            try:
                await asyncio.get_running_loop().run_in_executor(
                    self._writer, stages.timed(STORE, chain.store.keep_branch, txs), chain.durable_height, rows,
                    list(chain.locks))
            except (sqlite3.Error, OSError):
                self.log.exception("storing blocks %d-%d failed; they are not served", chain.durable_height + 1,
                                   chain.height)
                return False
            self.metrics.validation["durable"].observe(time.perf_counter() - started)
        chain.made_durable()
        self._applied.set()
        return True

    async def apply_kept(self, block: NodeBlock) -> None:
        """A block kept at the last stop: verified and applied like any other (the caller
        calls `make_durable` once they all are)."""
        await self.preverify(block)
        async with self._lock:
            self.apply(block, produced=False, record_state=False)

    async def preverify(self, block: NodeBlock) -> None:
        """Before taking the chain lock: check the commitment, then verify the signatures the
        ledger does not know as verified, in the pool. Only fills the verified set: the
        body rules (`Chain.apply`) judge."""
        header = block.header
        validators = self.genesis.validators
        cpu_started = thread_cpu_ns()
        started = time.perf_counter()
        root_ok = block.body.merkle_root() == header.merkle_root
        merkle_s = time.perf_counter() - started
        producer_ok = header.producer_index < len(validators) and self.pool.verify(
            validators[header.producer_index].scheme_id,
            validators[header.producer_index].public_key, header.signing_digest, header.signature)
        self.metrics.stages.lap(BLOCK_VALIDATE, cpu_started)
        started = time.perf_counter()
        if root_ok and producer_ok:   # a forged header or body costs us nothing more
            missed = await self.pool.verify_body(block.body, "block")
            self.metrics.verify.count_cache(block.tx_count - missed, 0)
            if self.receipts is not None and header.receipt_count:
                await self.receipts.preverify_section(block.receipts)
        self.metrics.validation["merkle"].observe(merkle_s)
        self.metrics.validation["signatures"].observe(time.perf_counter() - started)

    # --- one block --------------------------------------------------------------------------------

    def apply(self, block: NodeBlock, *, produced: bool, record_state: bool) -> None:
        """Apply one block to the tip (the caller holds the chain lock) and bring everything
        else in step. Its CPU is the `block_build` stage for our own block, else
        `block_validate`; the pool's upkeep after it is `mempool`."""
        stages, cpu_started = self.metrics.stages, thread_cpu_ns()
        started = time.perf_counter()
        applied = 0         # a rejected block's CPU is spent, but it validated no transactions
        try:
            self.chain.apply(block, self.pool, self.pool.kernel.table, self.clock())
            applied = block.tx_count
        finally:
            cpu_started = stages.lap(BLOCK_BUILD if produced else BLOCK_VALIDATE, cpu_started, applied)
        if record_state:
            self.metrics.validation["state"].observe(time.perf_counter() - started)
        header = block.header
        entry = self.chain.recent[-1]
        interval_s = (header.timestamp_ms - entry.parent_timestamp_ms) / 1000
        metrics = self.metrics
        metrics.tx_committed += header.tx_count
        if self.receipts is not None:
            self.receipts.counters.credited += header.receipt_count
        metrics.last_block_interval_s = interval_s
        metrics.block_interval.observe(interval_s)
        metrics.missed_slots += (header.producer_index - (header.height - 1)) % len(self.genesis.validators)
        if produced:
            metrics.blocks_produced += 1
        else:
            metrics.blocks_received += 1
        self.admission.block_applied(block.body)
        stages.lap(MEMPOOL, cpu_started)
        self._tip_changed.set()
        self._applied.set()
        self.log.info("%s block %d (%s.., %d txs, validator %d, interval %.2f s); mempool %d",
                      "produced" if produced else "applied", header.height, header.hash.hex()[:16],
                      header.tx_count, header.producer_index, interval_s, len(self.admission.ledger))

    def _undone(self, blocks: list[NodeBlock]) -> None:
        self.metrics.tx_committed -= sum(block.tx_count for block in blocks)
        if self.receipts is not None:
            self.receipts.counters.credited -= sum(block.header.receipt_count for block in blocks)
        self.admission.blocks_undone([block.body for block in blocks])
        self._tip_changed.set()

