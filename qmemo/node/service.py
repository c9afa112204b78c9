"""The node service: one object that admits transactions, produces and validates blocks,
syncs from peers, persists the chain and reports what it does.

Data flows one way: bytes from a client or peer -> decode -> core checks (form, mempool
rules, signatures, `apply_block`) -> node state (mempool, chain) -> store. The HTTP
layer (qmemo.net) calls the public coroutines and methods here and encodes what they
return; peers are reached through `PeerLink`s handed in.

Tasks, all on one event loop:
- producer: sleeps until this validator's next turn (`next_turn_ms`: primary slot, or a
  fallback window when the primary is late), then builds, signs, applies and sends a block;
- sync: polls peers' tips every `sync_interval_s` (and at once when a pushed block does
  not connect) and fetches, validates and applies what it lacks, switching branches by
  the fork-choice rule (qmemo.node.chain);
- relay: batches accepted client transactions to the peers (qmemo.node.peers);
- flusher: writes blocks that became final to SQLite, one SQL transaction per block, on
  a dedicated thread (a 4,000-transaction block is ~7 MB of inserts);
- loop-lag probe, and expiry of held transactions.

All chain changes happen under one asyncio lock; signature checks for a block's
transactions that missed the cache run in the verification pool *before* the lock is
taken, so admission keeps flowing while a block is validated.

Never imports aiohttp or knows about HTTP.
"""

from __future__ import annotations

import asyncio
from collections import Counter
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from qmemo import __version__
from qmemo.core.block import Block, make_block
from qmemo.core.genesis import Genesis, next_turn_ms, scheduled_producer
from qmemo.core.mempool import Mempool, MempoolLimits
from qmemo.core.merkle import merkle_root
from qmemo.core.state import Account
from qmemo.crypto.keys import NamedKey
from qmemo.crypto.verifier import signer
from qmemo.errors import DecodeError, InvalidBlock, MempoolFull, NodeNotReady, PeerError, QmemoError
from qmemo.node.admission import Admission, AdmissionLimits, Item, Outcome
from qmemo.node.chain import FINALITY_DEPTH, Chain, branch_is_better
from qmemo.node.config import NodeConfig
from qmemo.node.frames import decode_frames, encode_frames
from qmemo.node.log import node_logger
from qmemo.node.loop_lag import probe_loop_lag
from qmemo.node.metrics import NodeMetrics, VerifyMetrics, process_usage
from qmemo.node.peers import PeerLink, PeerView, Relay
from qmemo.node.store import ChainStore
from qmemo.node.verify_pool import VerifyPool

METRICS_SCHEMA = "qmemo-node-metrics/1"
RECENT_BLOCKS_FILE = "recent-blocks.bin"    # beside chain.sqlite: undoable blocks kept at a clean stop
PENDING_TXS_FILE = "pending-txs.bin"        # beside chain.sqlite: accepted, uncommitted transactions kept at a clean stop


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class BlockAnswer:
    """What happened to a block a peer pushed."""

    status: str          # "accepted", "known", "kept_ours", "sync" (we fetch what it builds on)
    height: int


class Node:
    """One node. `attach_peers`, then `await start()`; `await stop()` at the end.

    `key` makes it the producer of its validator's turns if it is a genesis validator's
    key; any other key makes an observer, which validates and serves but never produces."""

    def __init__(self, config: NodeConfig, genesis: Genesis, key: NamedKey) -> None:
        self.config = config
        self.genesis = genesis
        self.validator_index = next((v.index for v in genesis.validators if v.public_key == key.public_key), None)
        self.name = config.name or (f"node-{self.validator_index}" if self.validator_index is not None
                                    else f"node-{config.port}")
        self.log = node_logger(self.name, config.log_level)
        self._sign = signer(key.scheme, key.secret_key)
        self.metrics = NodeMetrics(VerifyMetrics(threads=config.verify_threads))
        self.pool = VerifyPool(config.verify_threads, self.metrics.verify, name=self.name)
        self.mempool = Mempool(MempoolLimits(config.mempool_max_txs, config.mempool_max_bytes,
                                             config.mempool_max_per_sender))
        self.peers: list[PeerLink] = []
        self.peer_views: dict[str, PeerView] = {}
        self.relay: Relay | None = None
        self.chain: Chain | None = None
        self.admission: Admission | None = None
        self.store: ChainStore | None = None
        self._store_writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{self.name}-store")
        self._store_reader = ThreadPoolExecutor(max_workers=2, thread_name_prefix=f"{self.name}-read")
        self._chain_lock = asyncio.Lock()
        self._sync_lock = asyncio.Lock()
        self._tip_changed = asyncio.Event()
        self._sync_now = asyncio.Event()
        self._flush_now = asyncio.Event()
        self._synced = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._short_tasks: set[asyncio.Task] = set()
        self._producer_running = False
        self._stopping = False

    # --- lifecycle --------------------------------------------------------------------------

    def attach_peers(self, peers: Sequence[PeerLink]) -> None:
        self.peers = list(peers)
        self.peer_views = {peer.url: PeerView(peer.url) for peer in self.peers}
        self.relay = Relay(self.peers, self.metrics, self.log, flush_s=self.config.relay_flush_s,
                           max_batch_txs=self.config.relay_max_batch_txs)

    async def start(self) -> None:
        """Open the store, restore the tip, start the tasks."""
        loop = asyncio.get_running_loop()
        path = self.config.data / "chain.sqlite"
        self.store = await loop.run_in_executor(self._store_writer, ChainStore, path, self.genesis)
        depth = self.config.finality_depth
        self.chain = Chain(self.store, finality_depth=depth if depth is not None else
                           (FINALITY_DEPTH if self.peers else 0))
        self.metrics.tx_committed = await loop.run_in_executor(self._store_reader, self._count_committed)
        self.admission = Admission(
            self.genesis, self.chain, self.mempool, self.pool, self.metrics,
            AdmissionLimits(self.config.mempool_future_nonces, future_ttl_s=self.config.mempool_future_ttl_s,
                            decoded_cache_txs=self.config.mempool_max_txs),
            self.relay.enqueue if self.relay else (lambda encodings: None))
        self.log.info("store %s at height %d (%s..), %d transactions committed; validator %s; %d verify threads; "
                      "peers: %s", path, self.chain.height, self.chain.tip_hash.hex()[:16],
                      self.metrics.tx_committed, self.validator_index, self.config.verify_threads,
                      ", ".join(p.url for p in self.peers) or "none")
        await self._restore_recent()
        await self._restore_pending()
        if not self.peers:
            self._synced.set()
        self._spawn(probe_loop_lag(self.metrics.loop_lag), "loop-lag")
        self._spawn(self._flush_loop(), "flusher")
        self._spawn(self._expiry_loop(), "expiry")
        self._spawn(self._sync_loop(), "sync")
        if self.relay:
            self._spawn(self.relay.run(), "relay")
        self._spawn(self._producer_loop(), "producer")
        self._producer_running = True

    async def stop(self) -> None:
        """Stop producing and syncing, finish the block write under way, close the store."""
        if self._stopping:
            return
        self._stopping = True
        self._producer_running = False
        flusher = [t for t in self._tasks if t.get_name().endswith("flusher")]
        others = [t for t in self._tasks if t not in flusher] + list(self._short_tasks)
        async with self._chain_lock:      # no block is half-applied from here on
            for task in others:
                task.cancel()
        await asyncio.gather(*others, return_exceptions=True)
        for task in flusher:
            task.cancel()
        await asyncio.gather(*flusher, return_exceptions=True)
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._store_writer, self._write_final)   # blocks already final
        finally:
            # Whatever happened to the final write, keep what is only in memory and close.
            try:
                self._keep_recent()
                self._keep_pending()
            finally:
                self.pool.close()
                if self.store is not None:
                    await loop.run_in_executor(self._store_writer, self.store.close)
                self._store_writer.shutdown(wait=True)
                self._store_reader.shutdown(wait=True)
        self.log.info("stopped at height %d", self.chain.height if self.chain else -1)

    @property
    def ready(self) -> bool:
        return self.chain is not None and self._producer_running and not self._stopping

    def _spawn(self, coroutine: Any, name: str) -> None:
        task = asyncio.create_task(coroutine, name=f"{self.name}-{name}")
        task.add_done_callback(self._task_done)
        self._tasks.append(task)

    def _task_done(self, task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is not None:
            self.log.error("task %s died: %r", task.get_name(), task.exception(),
                           exc_info=task.exception())

    def _require_ready(self) -> tuple[Chain, Admission]:
        if self.chain is None or self.admission is None or self._stopping:
            raise NodeNotReady(f"{self.name} is {'stopping' if self._stopping else 'starting'}")
        return self.chain, self.admission

    # --- transactions -------------------------------------------------------------------------

    async def submit(self, items: Sequence[Item], *, from_peer: bool = False) -> list[Outcome]:
        """Admit a batch (client or peer). MempoolFull (429) if the pool has no room at all."""
        _, admission = self._require_ready()
        if admission.is_full():
            self.metrics.tx_received += len(items)
            self.metrics.tx_rejected["mempool_full"] += len(items)
            raise MempoolFull(f"the mempool is full ({len(self.mempool)} transactions); retry later")
        return await admission.admit(items, relay=not from_peer)

    async def transaction_status(self, tx_id: bytes) -> dict[str, Any]:
        """pending / queued / committed (with inclusion proof) / evicted / unknown."""
        chain, admission = self._require_ready()
        pending = admission.pending_status(tx_id)
        if pending and not pending.startswith("evicted:"):
            return {"id": tx_id.hex(), "status": pending}
        for entry in chain.recent:
            for position, tx in enumerate(entry.block.transactions):
                if tx.id == tx_id:
                    return self._committed_json(tx_id, entry.block, position)
        committed = await asyncio.get_running_loop().run_in_executor(
            self._store_reader, self.store.transaction, tx_id)
        if committed is not None and committed.height <= chain.height and \
                chain.hash_at(committed.height) == committed.block_hash:
            return {"id": tx_id.hex(), "status": "committed", "height": committed.height,
                    "position": committed.position, "block_hash": committed.block_hash.hex(),
                    "merkle_root": committed.merkle_root.hex(), "proof": committed.proof.to_json()}
        if pending:
            return {"id": tx_id.hex(), "status": "evicted", "reason": pending.split(":", 1)[1]}
        return {"id": tx_id.hex(), "status": "unknown"}

    def _committed_json(self, tx_id: bytes, block: Block, position: int) -> dict[str, Any]:
        from qmemo.core.merkle import merkle_proof

        proof = merkle_proof([tx.id for tx in block.transactions], position)
        return {"id": tx_id.hex(), "status": "committed", "height": block.height, "position": position,
                "block_hash": block.hash.hex(), "merkle_root": block.header.merkle_root.hex(),
                "proof": proof.to_json()}

    def account(self, address: bytes) -> tuple[Account, int]:
        """The committed account and its next nonce counting the mempool."""
        chain, admission = self._require_ready()
        return chain.account(address), admission.pending_nonce(address)

    # --- blocks: reading --------------------------------------------------------------------------

    async def blocks(self, from_height: int, limit: int) -> list[Block]:
        """Our blocks from `from_height` upwards (at most `limit`), ascending."""
        chain, _ = self._require_ready()
        last = min(chain.height, from_height + limit - 1)
        out: list[Block] = []
        stored: list[int] = []
        for height in range(max(1, from_height), last + 1):
            block = chain.recent_block(height)
            if block is None:
                stored.append(height)
            out.append(block)          # type: ignore[arg-type]  (filled below)
        if stored:
            loaded = await asyncio.get_running_loop().run_in_executor(
                self._store_reader, lambda: {h: self.store.block(h) for h in stored})
            out = [block if block is not None else loaded[height]
                   for height, block in zip(range(max(1, from_height), last + 1), out)]
        return [block for block in out if block is not None]

    async def block_encodings(self, from_height: int, limit: int) -> list[bytes]:
        """Like `blocks`, as block encodings (what peers sync, without decoding)."""
        chain, _ = self._require_ready()
        last = min(chain.height, from_height + limit - 1)
        heights = range(max(1, from_height), last + 1)
        recent = {h: chain.recent_block(h) for h in heights}
        stored = [h for h, block in recent.items() if block is None]
        loaded: dict[int, bytes | None] = {}
        if stored:
            loaded = await asyncio.get_running_loop().run_in_executor(
                self._store_reader, lambda: {h: self.store.block_bytes(h) for h in stored})
        out = []
        for height in heights:
            block = recent[height]
            data = block.encode() if block is not None else loaded.get(height)
            if data is None:
                break
            out.append(data)
        return out

    # --- blocks: receiving --------------------------------------------------------------------------

    async def receive_block(self, encoded: bytes) -> BlockAnswer:
        """A block a peer pushed: validate and apply it, or fetch what it builds on.
        DecodeError (400) or InvalidBlock (422) if it is bad."""
        chain, _ = self._require_ready()
        started = time.perf_counter()
        try:
            block = self.admission.decoded.decode_block(encoded)
        except DecodeError as exc:
            self.metrics.blocks_rejected[exc.code] += 1
            raise
        decode_s = time.perf_counter() - started
        height = block.height
        if chain.hash_at(height) == block.hash:
            return BlockAnswer("known", height)
        if height > chain.height + 1 or height <= chain.final_height or \
                block.header.previous_hash != chain.hash_at(height - 1):
            self._sync_now.set()      # we lack what it builds on (or it is a branch): ask the peers
            return BlockAnswer("sync", height)
        self.metrics.validation["decode"].observe(decode_s)
        try:
            status = await self._validate_and_apply([block])
        except InvalidBlock as exc:
            self.metrics.blocks_rejected[exc.code] += 1
            self.log.warning("rejected block %d (%s..) from validator %d: %s: %s", height, block.hash.hex()[:16],
                             block.header.producer_index, exc.code, exc.detail)
            raise
        return BlockAnswer(status, height)

    async def _validate_and_apply(self, branch: list[Block]) -> str:
        """Validate and apply a branch of consecutive blocks whose first block's parent is on
        our chain; switch to it if the fork-choice rule says so. Returns the outcome."""
        for block in branch:
            await self._preverify(block)
        async with self._chain_lock:
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
            if ours and not branch_is_better(ours, branch):
                return "kept_ours"
            undone = chain.rollback_to(fork_height) if ours else []
            if undone:
                self._undone(undone)
            try:
                for block in branch:
                    self._apply(block, produced=False, record_state=True)
            except InvalidBlock:
                if undone:    # the other branch is invalid: back to ours, which was valid
                    self._undone(chain.rollback_to(fork_height))
                    for block in undone:
                        self._apply(block, produced=False, record_state=False)
                raise
            if undone:
                self.metrics.reorgs += 1
                self.log.warning("switched branch at height %d: %d block(s) of ours undone, %d applied; tip %d (%s..)",
                                 fork_height, len(undone), len(branch), chain.height, chain.tip_hash.hex()[:16])
            return "accepted"

    async def _preverify(self, block: Block) -> None:
        """Before taking the chain lock: check the commitment, then verify the signatures the
        cache does not know, in the pool. Only fills the cache: `apply_block` judges."""
        header = block.header
        started = time.perf_counter()
        root_ok = merkle_root([tx.id for tx in block.transactions]) == header.merkle_root
        merkle_s = time.perf_counter() - started
        producer_ok = header.producer_index < len(self.genesis.validators) and self.pool.cache.verify(
            self.genesis.validators[header.producer_index].scheme_id,
            self.genesis.validators[header.producer_index].public_key, header.signing_digest, header.signature)
        self.pool.record_loop_samples("block")
        cache = self.pool.cache
        missed = [tx for tx in block.transactions if tx.id not in cache]
        verify = self.metrics.verify
        verify.cache_hits += len(block.transactions) - len(missed)
        verify.cache_misses += len(missed)
        started = time.perf_counter()
        if root_ok and producer_ok and missed:   # a forged header or body costs us nothing more
            await self.pool.verify(missed, "block")
        self.metrics.validation["merkle"].observe(merkle_s)
        self.metrics.validation["signatures"].observe(time.perf_counter() - started)

    def _apply(self, block: Block, *, produced: bool, record_state: bool) -> None:
        """Apply one block to the tip (chain lock held) and bring everything else in step."""
        started = time.perf_counter()
        try:
            self.chain.apply(block, self.pool.cache, now_ms())
        finally:
            self.pool.record_loop_samples("block")
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
        self._tip_changed.set()
        self._flush_now.set()
        self.log.info("%s block %d (%s.., %d txs, validator %d, interval %.2f s); mempool %d",
                      "produced" if produced else "applied", header.height, header.hash.hex()[:16],
                      header.tx_count, header.producer_index, interval_s, len(self.mempool))

    def _undone(self, blocks: list[Block]) -> None:
        transactions = [tx for block in blocks for tx in block.transactions]
        self.metrics.tx_committed -= len(transactions)
        self.admission.blocks_undone(transactions)
        self._tip_changed.set()

    # --- producing ------------------------------------------------------------------------------

    async def _producer_loop(self) -> None:
        if self.validator_index is None:
            return
        genesis, me = self.genesis, self.validator_index
        await self._synced.wait()
        while True:
            chain = self.chain
            height, parent_hash, parent_ts = chain.height + 1, chain.tip_hash, chain.tip_timestamp_ms
            now = now_ms()
            turn = next_turn_ms(genesis, me, height, parent_ts, now)
            if turn > now:
                self._tip_changed.clear()
                try:
                    await asyncio.wait_for(self._tip_changed.wait(), (turn - now) / 1000)
                    continue          # a block arrived first: plan again on the new tip
                except asyncio.TimeoutError:
                    pass
            async with self._chain_lock:
                if chain.tip_hash != parent_hash:
                    continue
                timestamp = now_ms()
                if scheduled_producer(genesis, height, parent_ts, timestamp) != me:
                    continue
                try:
                    block = self._produce(height, parent_hash, timestamp)
                except QmemoError as exc:
                    self.log.error("could not produce block %d: %s", height, exc)
                    block = None
            if block is None:
                await asyncio.sleep(genesis.producer_timeout_ms / 1000)
            else:
                self._broadcast(block)

    def _produce(self, height: int, parent_hash: bytes, timestamp_ms: int) -> Block:
        transactions = self.mempool.select(self.genesis.max_block_transactions)
        block = make_block(chain_id=self.genesis.chain_id, height=height, previous_hash=parent_hash,
                           timestamp_ms=timestamp_ms, producer_index=self.validator_index,
                           transactions=transactions, sign=self._sign)
        self._apply(block, produced=True, record_state=False)
        return block

    def _broadcast(self, block: Block) -> None:
        if not self.peers:
            return
        encoded = block.encode()

        async def push(peer: PeerLink) -> None:
            try:
                await peer.send_block(encoded)
            except (PeerError, InvalidBlock, DecodeError) as exc:
                view = self.peer_views[peer.url]
                if view.reachable or not isinstance(exc, PeerError):   # one line per outage
                    self.log.warning("sending block %d to %s failed: %s", block.height, peer.url, exc)
                view.reachable = not isinstance(exc, PeerError)

        for peer in self.peers:
            self._spawn_once(push(peer))

    def _spawn_once(self, coroutine: Any) -> None:
        """A short-lived task (one block push): tracked so `stop` can cancel it."""
        task = asyncio.create_task(coroutine)
        self._short_tasks.add(task)
        task.add_done_callback(self._short_tasks.discard)
        task.add_done_callback(self._task_done)

    # --- syncing ------------------------------------------------------------------------------

    async def _sync_loop(self) -> None:
        interval = self.config.sync_interval_s
        while True:
            try:
                await self._sync_round()
            except Exception:   # a bug: keep syncing, keep the traceback
                self.log.exception("sync round failed")
            self._synced.set()
            self._sync_now.clear()
            try:
                await asyncio.wait_for(self._sync_now.wait(), interval)
            except asyncio.TimeoutError:
                pass

    async def _sync_round(self) -> None:
        """Ask every peer for its tip; fetch from the one that is ahead (or on another branch)."""
        if not self.peers:
            return
        tips = await asyncio.gather(*(peer.tip() for peer in self.peers), return_exceptions=True)
        chain = self.chain
        candidates = []
        for peer, tip in zip(self.peers, tips):
            view = self.peer_views[peer.url]
            if isinstance(tip, BaseException):
                if not isinstance(tip, (PeerError, QmemoError)):
                    self.log.error("tip of %s: %r", peer.url, tip)
                if view.reachable:
                    self.log.warning("peer %s is unreachable: %s", peer.url, tip)
                view.reachable, view.error = False, str(tip)
                continue
            if not view.reachable:
                self.log.info("peer %s is reachable, at height %d", peer.url, tip.height)
            view.height, view.tip_hash, view.reachable, view.error = tip.height, tip.tip_hash, True, None
            view.last_seen_monotonic = time.monotonic()
            if tip.height > chain.height or (tip.height == chain.height and tip.tip_hash != chain.tip_hash):
                candidates.append((tip.height, peer))
        for _, peer in sorted(candidates, key=lambda c: -c[0]):
            try:
                await self._sync_from(peer)
            except (PeerError, DecodeError) as exc:
                self.log.warning("sync from %s failed: %s", peer.url, exc)
            except InvalidBlock as exc:
                self.metrics.blocks_rejected[exc.code] += 1
                self.log.warning("sync from %s: invalid block: %s: %s", peer.url, exc.code, exc.detail)

    async def _sync_from(self, peer: PeerLink) -> None:
        """Fetch and apply the peer's blocks above ours (or its better branch) until level."""
        async with self._sync_lock:
            chain = self.chain
            batch = self.config.sync_batch_blocks
            while not self._stopping:
                start = chain.height + 1
                blocks = await self._fetch(peer, start, batch)
                if blocks and blocks[0].header.previous_hash != chain.tip_hash:
                    blocks = await self._fetch(peer, chain.final_height + 1, batch + FINALITY_DEPTH)
                if not blocks:
                    view = self.peer_views[peer.url]
                    if view.height == chain.height and view.tip_hash not in (None, chain.tip_hash):
                        # Same height, another tip: compare the branches from our final block.
                        blocks = await self._fetch(peer, chain.final_height + 1, batch + FINALITY_DEPTH)
                    if not blocks:
                        return
                if blocks[0].header.previous_hash != chain.hash_at(blocks[0].height - 1):
                    self.log.error("peer %s's chain forks below our final height %d: not switching",
                                   peer.url, chain.final_height)
                    return
                branch = [b for b in blocks if chain.hash_at(b.height) != b.hash]
                if not branch:
                    return
                outcome = await self._validate_and_apply(branch)
                if outcome != "accepted" or len(blocks) < batch:
                    return

    async def _fetch(self, peer: PeerLink, from_height: int, limit: int) -> list[Block]:
        encodings = await peer.block_encodings(from_height, limit)
        blocks = []
        for data in encodings:
            started = time.perf_counter()
            blocks.append(self.admission.decoded.decode_block(data))
            self.metrics.validation["decode"].observe(time.perf_counter() - started)
        return blocks

    # --- storage ------------------------------------------------------------------------------

    async def _flush_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await self._flush_now.wait()
            self._flush_now.clear()
            for applied in self.chain.take_final():
                started = time.perf_counter()
                try:
                    await loop.run_in_executor(self._store_writer, self.store.append, applied)
                except Exception:   # the store refused: say so loudly; the block stays in memory
                    self.log.exception("writing block %d to the store failed", applied.block.height)
                    break
                self.metrics.validation["storage"].observe(time.perf_counter() - started)
                self.chain.written(applied.block.height)

    def _write_final(self) -> None:
        """At shutdown, on the writer thread: blocks already handed over as final."""
        if self.chain is None:
            return
        for entry in list(self.chain.recent):
            if self.store.height < entry.block.height <= self.chain.final_height:
                self.store.append(entry.applied)

    def _keep_recent(self) -> None:
        """At a clean stop: the blocks still undoable go to a file beside the store, so that
        a devnet stopped all at once does not lose its newest blocks (a killed node does)."""
        if self.chain is None:
            return
        blocks = [entry.block.encode() for entry in self.chain.recent if entry.block.height > self.store.height]
        path = self.config.data / RECENT_BLOCKS_FILE
        if blocks:
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(encode_frames(blocks))
            tmp.replace(path)

    def _keep_pending(self) -> None:
        """At a clean stop: the accepted transactions not yet in a block go to a file beside
        the store, and are admitted again at the next start - accepted is never forgotten."""
        if self.admission is None:
            return
        pending = [tx.encoded for tx in self.admission.unsettled()]
        if pending:
            path = self.config.data / PENDING_TXS_FILE
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(encode_frames(pending))
            tmp.replace(path)
            self.log.info("kept %d accepted, uncommitted transaction(s) in %s", len(pending), path)

    async def _restore_pending(self) -> None:
        """At start: admit again (verifying again) the transactions kept at the last clean stop.
        Those committed meanwhile answer as duplicates or stale nonces; each outcome is counted."""
        path = self.config.data / PENDING_TXS_FILE
        if not path.exists():
            return
        restoring = path.with_suffix(".restoring")
        path.replace(restoring)        # removed only once they are admitted again
        try:
            records = decode_frames(restoring.read_bytes(), 10_000_000, "transaction")
        except DecodeError as exc:
            self.log.error("the transactions kept at the last stop (%s) are unreadable: %s", restoring, exc)
            return
        outcomes = await self.admission.admit(records, relay=True)
        by_status = Counter(outcome[1] for outcome in outcomes)
        self.log.info("re-admitted the %d transaction(s) kept at the last stop: %s", len(records),
                      ", ".join(f"{count} {status}" for status, count in sorted(by_status.items())))
        restoring.unlink()

    async def _restore_recent(self) -> None:
        """At start: apply, with full validation, the blocks kept at the last clean stop."""
        path = self.config.data / RECENT_BLOCKS_FILE
        if not path.exists():
            return
        restoring = path.with_suffix(".restoring")
        path.replace(restoring)        # removed only once its blocks are applied
        data = restoring.read_bytes()
        restored = 0
        try:
            for record in decode_frames(data, 10_000, "block"):
                block = Block.decode(record)
                if block.header.previous_hash != self.chain.tip_hash:
                    break
                await self._preverify(block)
                async with self._chain_lock:
                    self._apply(block, produced=False, record_state=False)
                restored += 1
        except (DecodeError, InvalidBlock) as exc:
            self.log.error("the blocks kept at the last stop (%s) are unusable after %d: %s", path, restored, exc)
        self.log.info("restored %d block(s) kept at the last stop; tip %d", restored, self.chain.height)
        restoring.unlink()

    def _count_committed(self) -> int:
        total = 0
        for height in range(1, self.store.height + 1):
            header = self.store.header(height)
            total += header.tx_count if header else 0
        return total

    async def _expiry_loop(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            self.admission.expire_held()

    # --- reporting ------------------------------------------------------------------------------

    @property
    def height(self) -> int:
        """The tip's height (0 before the first block, or while starting)."""
        return self.chain.height if self.chain else 0

    def tip_age_s(self) -> float:
        return max(0.0, time.time() - self.chain.tip_timestamp_ms / 1000) if self.chain else 0.0

    def scheme_name(self) -> str:
        return ", ".join(self.genesis.scheme_name(s) for s in self.genesis.tx_scheme_ids)

    def status(self) -> dict[str, Any]:
        chain = self.chain
        return {
            "node": self.name,
            "version": __version__,
            "chain_id": self.genesis.chain_id,
            "genesis_hash": self.genesis.hash.hex(),
            "height": chain.height if chain else 0,
            "tip_hash": chain.tip_hash.hex() if chain else None,
            "tip_age_s": round(self.tip_age_s(), 3),
            "final_height": chain.final_height if chain else 0,
            "mempool": len(self.mempool),
            "mempool_queued": len(self.admission.future) if self.admission else 0,
            "validator": self.validator_index,
            "scheme": self.scheme_name(),
            "block_interval_ms": self.genesis.block_interval_ms,
            "peers": [{"url": v.url, "reachable": v.reachable, "height": v.height,
                       "tip_hash": v.tip_hash.hex() if v.tip_hash else None, "error": v.error}
                      for v in self.peer_views.values()],
            "uptime_s": round(self.metrics.uptime_s(), 3),
            "ready": self.ready,
        }

    def histograms(self) -> dict[str, Any]:
        """The cumulative distributions behind the snapshot (for the Prometheus page)."""
        m = self.metrics
        return {"verify": m.verify.latency, "interval": m.block_interval, "validation": m.validation,
                "loop_lag": m.loop_lag}

    def metrics_snapshot(self) -> dict[str, Any]:
        """The /metrics document (docs/api.md): counters since start, recent percentiles."""
        m, v = self.metrics, self.metrics.verify
        chain = self.chain
        cpu_s, rss = process_usage()
        lag = m.loop_lag.percentiles(0.5, 0.99)
        interval = m.block_interval.percentiles(0.5, 0.99)
        with v.lock:
            verify_count = dict(v.count)
            verify_seconds = dict(v.seconds)
        return {
            "schema": METRICS_SCHEMA,
            "node": self.name,
            "chain_id": self.genesis.chain_id,
            "scheme": self.scheme_name(),
            "version": __version__,
            "time_s": time.time(),
            "uptime_s": m.uptime_s(),
            "height": chain.height if chain else 0,
            "tip_hash": chain.tip_hash.hex() if chain else None,
            "tip_age_s": self.tip_age_s(),
            "mempool": {"count": len(self.mempool), "bytes": self.mempool.size_bytes,
                        "queued": len(self.admission.future) if self.admission else 0},
            "tx": {"received": m.tx_received, "accepted": m.tx_accepted, "duplicate": m.tx_duplicate,
                   "rejected": dict(m.tx_rejected), "committed": m.tx_committed, "evicted": dict(m.tx_evicted),
                   "relayed": m.relayed_txs, "relay_dropped": self.relay.dropped if self.relay else 0,
                   "decodes_reused": self.admission.decoded.reused if self.admission else 0},
            "verify": {"threads": v.threads, "count": verify_count, "seconds": verify_seconds,
                       "latency_us": v.latency_us(), "ops_per_s": v.ops_per_s(),
                       "cache": {"hits": v.cache_hits, "misses": v.cache_misses, "size": len(self.pool.cache)}},
            "blocks": {"produced": m.blocks_produced, "received": m.blocks_received,
                       "rejected": sum(m.blocks_rejected.values()), "rejected_by_reason": dict(m.blocks_rejected),
                       "missed_slots": m.missed_slots, "reorgs": m.reorgs,
                       "interval_s": {"last": m.last_block_interval_s, "p50": interval[0], "p99": interval[1]},
                       "validation_ms": m.mean_validation_ms()},
            "process": {"cpu_seconds": cpu_s, "rss_bytes": rss},
            "event_loop_lag_ms": {"p50": _ms(lag[0]), "p99": _ms(lag[1]), "max": _ms(m.loop_lag.max_recent())},
            "net": {"bytes_in": m.bytes_in, "bytes_out": m.bytes_out},
        }


def _ms(value_s: float | None) -> float | None:
    return value_s * 1e3 if value_s is not None else None
