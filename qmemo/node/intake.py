"""Block intake: decode, pre-verify, apply and undo blocks; the one owner of the chain lock.

Every change to the chain goes through here - a block a peer pushed, a branch sync
fetched, a block this node produced, the blocks kept at the last stop - so the
bookkeeping that must follow an applied block (mempool, signature cache, metrics, the
producer's and flusher's wake-ups) is written once.

Durable before announced: once a branch (or a produced block) is applied, `make_durable`
writes its blocks to the store (qmemo.node.store, `keep_branch`, fsync'd) before the
chain lock is released; the node serves (`Chain.served_height`) and relays only what is
stored, so a SIGKILL never takes back a block anyone was shown.

Signature checks for a block's transactions that missed the cache run in the
verification pool *before* the lock is taken, so admission keeps flowing while a block
is validated; `apply_block` (qmemo.core.state) then judges under the lock.

Chain time comes from the node's injected clock (`NodeConfig.clock`), never from the
wall clock directly, so tests can drive it.

Never imports aiohttp or knows about HTTP.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from qmemo.core.block import Block, BlockIds
from qmemo.core.genesis import Genesis
from qmemo.errors import DecodeError, InvalidBlock
from qmemo.node.admission import Admission
from qmemo.node.answers import BlockAnswer
from qmemo.node.block_decode import DecodedCache
from qmemo.node.chain import Chain, branch_is_better
from qmemo.node.metrics import NodeMetrics
from qmemo.node.stages import BLOCK_BUILD, BLOCK_VALIDATE, MEMPOOL, STORE, thread_cpu_ns
from qmemo.node.verify_pool import VerifyPool


class BlockIntake:
    """Validates and applies blocks to `chain`; `lock` serialises every chain change."""

    def __init__(self, genesis: Genesis, chain: Chain, admission: Admission, pool: VerifyPool,
                 decoded: DecodedCache, metrics: NodeMetrics, log: logging.LoggerAdapter,
                 clock: Callable[[], int], writer: ThreadPoolExecutor) -> None:
        self.genesis = genesis
        self._writer = writer       # the store's one writer thread: writes stay in order
        self.chain = chain
        self.admission = admission
        self.pool = pool
        self.decoded = decoded
        self.metrics = metrics
        self.log = log
        self.clock = clock
        self.lock = asyncio.Lock()
        self.tip_changed = asyncio.Event()      # the producer plans again
        self.applied = asyncio.Event()          # the flusher looks for blocks that became final
        self.sync_wanted = asyncio.Event()      # a pushed block did not connect: ask the peers now
        self.validating_to: dict[int, int] = {}  # top height of each branch being validated -> how many
        self.validated = asyncio.Event()        # one finished (applied, kept out or refused)

    # --- decoding -----------------------------------------------------------------------------

    def decode(self, encoded: bytes) -> Block:
        """A block from its encoding, reusing transactions decoded before; DecodeError if bad."""
        return self.decoded.decode_block(encoded)

    def decode_timed(self, encoded: bytes) -> Block:
        """`decode`, timed into the validation "decode" stage (sync's fetched blocks)."""
        started, cpu_started = time.perf_counter(), thread_cpu_ns()
        block = self.decode(encoded)
        self.metrics.stages.lap(BLOCK_VALIDATE, cpu_started)
        self.metrics.validation["decode"].observe(time.perf_counter() - started)
        return block

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
        transactions this node holds, then as `receive` (the Merkle root, each signature
        from the cache, `apply_block` in full); "missing" if it lacks any of them: the peer
        sends the whole block then. DecodeError (400) or InvalidBlock (422) if it is bad."""
        started, cpu_started = time.perf_counter(), thread_cpu_ns()
        try:
            pushed = BlockIds.decode(encoded_ids)
            transactions = self.admission.copies(pushed.tx_ids or ())
        except DecodeError as exc:
            self.metrics.blocks_rejected[exc.code] += 1
            raise
        finally:
            self.metrics.stages.lap(BLOCK_VALIDATE, cpu_started)
        if transactions is None:
            return BlockAnswer("missing", pushed.height)
        return await self._receive(Block(pushed.header, transactions), time.perf_counter() - started)

    async def _receive(self, block: Block, decode_s: float) -> BlockAnswer:
        chain = self.chain
        height = block.height
        if chain.hash_at(height) == block.hash:
            return BlockAnswer("known", height)
        if height > chain.height + 1 or height <= chain.final_height or \
                block.header.previous_hash != chain.hash_at(height - 1):
            self.sync_wanted.set()      # we lack what it builds on (or it is a branch): ask the peers
            return BlockAnswer("sync", height)
        self.metrics.validation["decode"].observe(decode_s)
        try:
            status = await self.validate_and_apply([block])
        except InvalidBlock as exc:
            self.metrics.blocks_rejected[exc.code] += 1
            self.log.warning("rejected block %d (%s..) from validator %d: %s: %s", height, block.hash.hex()[:16],
                             block.header.producer_index, exc.code, exc.detail)
            raise
        return BlockAnswer(status, height)

    # --- branches ---------------------------------------------------------------------------------

    async def validate_and_apply(self, branch: list[Block]) -> str:
        """Validate and apply a branch of consecutive blocks whose first block's parent is on
        our chain; switch to it if the fork-choice rule says so. Returns the outcome.
        Meanwhile `validating_to` holds its top height (the producer waits: qmemo.node.producer)."""
        top = branch[-1].height
        self.validating_to[top] = self.validating_to.get(top, 0) + 1
        try:
            return await self._validate_and_apply(branch)
        finally:
            self.validating_to[top] -= 1
            if not self.validating_to[top]:
                del self.validating_to[top]
            self.validated.set()

    async def _validate_and_apply(self, branch: list[Block]) -> str:
        for block in branch:
            await self.preverify(block)
        async with self.lock:
            chain = self.chain
            fork_height = branch[0].height - 1
            if chain.hash_at(fork_height) != branch[0].header.previous_hash or fork_height < chain.final_height:
                return "sync"         # the chain moved while we verified: let sync sort it out
            ours = chain.blocks_above(fork_height)
            # Skip the blocks we already have (a sync overlapping a push).
            while branch and ours and branch[0].hash == ours[0].hash:
                branch, ours, fork_height = branch[1:], ours[1:], fork_height + 1
            if not branch:
                return "known"
            if ours and not branch_is_better(ours, branch, chain.quorum):
                return "kept_ours"
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
            return "accepted"

    async def make_durable(self) -> bool:
        """Write the current branch's blocks not yet stored, then let them be served and
        relayed. The caller holds `lock`; the event loop goes on meanwhile (the write runs
        on the store's writer thread), serving only what was stored before. False if the
        store refused: the blocks stay unserved, and the next call tries again."""
        chain = self.chain
        blocks = chain.not_durable()
        if blocks or chain.durable_height < chain.height:
            stages, cpu_started = self.metrics.stages, thread_cpu_ns()
            rows = [(block.height, block.hash, block.encode()) for block in blocks]
            txs = sum(block.header.tx_count for block in blocks)
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
        self.applied.set()
        return True

    async def apply_kept(self, block: Block) -> None:
        """A block kept at the last stop: verified and applied like any other (the caller
        calls `make_durable` once they all are)."""
        await self.preverify(block)
        async with self.lock:
            self.apply(block, produced=False, record_state=False)

    async def preverify(self, block: Block) -> None:
        """Before taking the chain lock: check the commitment, then verify the signatures the
        cache does not know, in the pool. Only fills the cache: `apply_block` judges."""
        header = block.header
        validators = self.genesis.validators
        cpu_started = thread_cpu_ns()
        started = time.perf_counter()
        root_ok = block.body_root() == header.merkle_root     # computed once: apply_block reads it again
        merkle_s = time.perf_counter() - started
        producer_ok = header.producer_index < len(validators) and self.pool.cache.verify(
            validators[header.producer_index].scheme_id,
            validators[header.producer_index].public_key, header.signing_digest, header.signature)
        self.pool.record_loop_samples("block")
        cache = self.pool.cache
        missed = [tx for tx in block.transactions if tx.id not in cache]
        verify = self.metrics.verify
        verify.cache_hits += len(block.transactions) - len(missed)
        verify.cache_misses += len(missed)
        self.metrics.stages.lap(BLOCK_VALIDATE, cpu_started)
        started = time.perf_counter()
        if root_ok and producer_ok and missed:   # a forged header or body costs us nothing more
            await self.pool.verify(missed, "block")
        self.metrics.validation["merkle"].observe(merkle_s)
        self.metrics.validation["signatures"].observe(time.perf_counter() - started)

    # --- one block --------------------------------------------------------------------------------

    def apply(self, block: Block, *, produced: bool, record_state: bool) -> None:
        """Apply one block to the tip (the caller holds `lock`) and bring everything else in step.
        Its CPU is the `block_build` stage for our own block, else `block_validate`; the
        mempool's upkeep after it is `mempool`."""
        stages, cpu_started = self.metrics.stages, thread_cpu_ns()
        started = time.perf_counter()
        applied = 0         # a rejected block's CPU is spent, but it validated no transactions
        try:
            self.chain.apply(block, self.pool.cache, self.clock())
            applied = block.header.tx_count
        finally:
            self.pool.record_loop_samples("block")
            cpu_started = stages.lap(BLOCK_BUILD if produced else BLOCK_VALIDATE, cpu_started, applied)
        if record_state:
            self.metrics.validation["state"].observe(time.perf_counter() - started)
        header = block.header
        entry = self.chain.recent[-1]
        interval_s = (header.timestamp_ms - entry.parent_timestamp_ms) / 1000
        metrics = self.metrics
        metrics.tx_committed += header.tx_count
        metrics.last_block_interval_s = interval_s
        metrics.block_interval.observe(interval_s)
        metrics.missed_slots += (header.producer_index - (header.height - 1)) % len(self.genesis.validators)
        if produced:
            metrics.blocks_produced += 1
        else:
            metrics.blocks_received += 1
        self.admission.block_applied(block.transactions)
        self.pool.cache.forget(tx.id for tx in block.transactions)
        stages.lap(MEMPOOL, cpu_started)
        self.tip_changed.set()
        self.applied.set()
        self.log.info("%s block %d (%s.., %d txs, validator %d, interval %.2f s); mempool %d",
                      "produced" if produced else "applied", header.height, header.hash.hex()[:16],
                      header.tx_count, header.producer_index, interval_s, len(self.admission.mempool))

    def _undone(self, blocks: list[Block]) -> None:
        transactions = [tx for block in blocks for tx in block.transactions]
        self.metrics.tx_committed -= len(transactions)
        self.admission.blocks_undone(transactions)
        self.tip_changed.set()
