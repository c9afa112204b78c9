"""The node: its lifecycle, and the public API the HTTP side (qmemo.net) calls.

Data flows one way: bytes from a client or peer -> decode -> core checks (form, mempool
rules, signatures, `apply_block`) -> node state (mempool, chain) -> store. Each job
has its own room, and `Node` wires them together at `start` and takes them down at
`stop`:

- chain verifiers (qmemo.node.chain_verifiers): each scheme's conformance self-test, then
  the admission kernel, before anything else is made;
- admission (qmemo.node.admission): transactions into the mempool;
- block intake (qmemo.node.intake): validate, pre-verify, apply and undo blocks; owns
  the chain lock;
- producer (qmemo.node.producer): this validator's blocks, in its turns;
- sync (qmemo.node.sync): fetch what the peers have and we lack;
- relay (qmemo.node.peers): accepted client transactions to the peers, in batches;
- persistence (qmemo.node.persistence): final blocks to SQLite, the restore at start;
- journal (qmemo.node.journal): accepted client transactions on disk before the answer,
  relayed ones soon after;
- reporting (qmemo.node.reporting): `/status` and `/metrics` as frozen values;
- queries (qmemo.node.queries): where a transaction is, blocks by height (memory, then
  the store on a reader thread), up to the stored height.

The node answers with values (qmemo.node.answers, qmemo.node.reporting), never JSON;
time comes from `config.clock`. Peers are reached through the `PeerLink`s handed in.

Never imports aiohttp or knows about HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from qmemo.core.block import Block, BlockIds
from qmemo.core.finality import quorum
from qmemo.core.fork_lock import lock_expiry_ms
from qmemo.core.genesis import Genesis
from qmemo.core.state import Account
from qmemo.crypto.keys import NamedKey
from qmemo.crypto.verifier import signer
from qmemo.errors import MempoolFull, NodeBehind, NodeNotReady, NotFound
from qmemo.node import reporting
from qmemo.node.admission import Admission, Admitted, frame_items
from qmemo.node.answers import BlockAnswer, BlockStatus, Item, TxOutcome, TxStatus
from qmemo.node.block_gate import screen_block
from qmemo.node.chain import Chain
from qmemo.node.chain_verifiers import admission_kernel
from qmemo.node.config import NodeConfig
from qmemo.node.door import Door
from qmemo.node.intake import BlockIntake
from qmemo.node.journal import Journal
from qmemo.node.ledger import PoolLimits, new_ledger
from qmemo.node.log import node_logger
from qmemo.node.metrics import NodeMetrics, VerifyMetrics
from qmemo.node.peers import PeerLink, PeerView, Relay
from qmemo.node.persistence import Persistence, count_committed
from qmemo.node.producer import Producer
from qmemo.node.queries import ChainQueries
from qmemo.node.receipt_transport import ReceiptOutbox, ReceiptPuller, ReceiptSource
from qmemo.node.receipts import ReceiptRoom
from qmemo.node.store import ChainStore
from qmemo.node.sync import Sync
from qmemo.node.verify_pool import VerifyPool

EXPIRY_INTERVAL_S = 1.0     # how often held transactions, while any is, are checked against their time to live


class Node:
    """One node. `attach_peers`, then `await start()`; `await stop()` at the end.

    `key` makes it the producer of its validator's turns if it is a genesis validator's
    key; any other key makes an observer, which validates and serves but never produces."""

    def __init__(self, config: NodeConfig, genesis: Genesis, key: NamedKey) -> None:
        self.config = config
        self.genesis = genesis
        self.clock = config.clock
        # This life's start on the node's clock: with the pid, what names it in /metrics, so a
        # reader of a timeline tells it from the next (a restarted container may reuse a pid).
        self.started_at_ms = self.clock()
        self.validator_index = next((v.index for v in genesis.validators if v.public_key == key.public_key), None)
        shard = f"shard-{genesis.sharding.index}-" if genesis.sharding is not None else ""
        self.name = config.name or (f"{shard}node-{self.validator_index}" if self.validator_index is not None
                                    else f"{shard}node-{config.port}")
        self.log = node_logger(self.name, config.log_level)
        self._sign = signer(key.scheme, key.secret_key)
        self.metrics = NodeMetrics(VerifyMetrics(threads=config.verify_threads))
        if genesis.sharding is not None:
            self.metrics.verify.add_path("receipt")    # cross-shard transfers verified again
        self.kernel = admission_kernel(genesis, config.verifier)
        self.limits = PoolLimits(config.mempool_max_txs, config.mempool_max_bytes, config.mempool_max_per_sender,
                                 config.mempool_held_window, config.mempool_held_max_txs,
                                 config.mempool_held_per_sender, config.mempool_held_ttl_s)
        # The accounts at the tip and the pool, in C (qmemo.node.ledger); the chain loads its accounts.
        self.ledger = new_ledger(genesis, self.limits)
        self.door = Door(genesis.block_interval_ms / 1000, config.mempool_max_txs)
        self.verify_pool = VerifyPool(config.verify_threads, self.metrics.verify, self.kernel, self.ledger,
                                      name=self.name, verifier=config.verifier)
        self.peers: list[PeerLink] = []
        self.peer_views: dict[str, PeerView] = {}
        self.relay: Relay | None = None
        self.store: ChainStore | None = None
        self.chain: Chain | None = None
        self.admission: Admission | None = None
        self.intake: BlockIntake | None = None
        self.persistence: Persistence | None = None
        self.journal: Journal | None = None
        self.sync: Sync | None = None
        self.queries: ChainQueries | None = None
        # A shard's node: its receipts room, the bundles it serves, the nodes it pulls from.
        self.receipts: ReceiptRoom | None = None
        self.outbox: ReceiptOutbox | None = None
        self.shard_peers: list[ReceiptSource] = []
        self._store_writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{self.name}-store")
        self._store_reader = ThreadPoolExecutor(max_workers=2, thread_name_prefix=f"{self.name}-read")
        self._tasks: list[asyncio.Task] = []
        self._flusher: asyncio.Task | None = None
        self._short_tasks: set[asyncio.Task] = set()
        self._producer_running = False
        self._stopping = False

    # --- lifecycle --------------------------------------------------------------------------

    def attach_peers(self, peers: Sequence[PeerLink], shard_peers: Sequence[ReceiptSource] = ()) -> None:
        self.shard_peers = list(shard_peers)
        self.peers = list(peers)
        self.peer_views = {peer.url: PeerView(peer.url) for peer in self.peers}
        # A node without peers has nobody to relay to: admission builds no relay buffers for
        # it (a copy of every accepted transaction: 42% of a lone node's page faults).
        self.relay = Relay(self.peers, self.metrics, self.log, flush_s=self.config.relay_flush_s,
                           max_batch_txs=min(self.config.relay_max_batch_txs, self.config.max_batch_txs),
                           max_batch_bytes=self.config.max_body_bytes) if self.peers else None

    async def start(self) -> None:
        """Open the store, restore the tip and what the last clean stop kept, start the tasks."""
        config, loop = self.config, asyncio.get_running_loop()
        path = config.data / "chain.sqlite"
        # synchronous=FULL: a block is served only once its commit is fsync'd (docs/api.md, "Durability").
        self.store = store = await loop.run_in_executor(
            self._store_writer, partial(ChainStore, path, self.genesis, synchronous="FULL"))
        # A node without peers is the only producer anyone hears: nobody can fork its chain.
        genesis = self.genesis
        self.chain = Chain(store, self.ledger, quorum=quorum(len(genesis.validators)) if self.peers else 1,
                           min_confirmations=config.finality_depth + 1, validator_index=self.validator_index,
                           lock_expiry_ms=lock_expiry_ms(len(genesis.validators), genesis.producer_timeout_ms,
                                                         genesis.block_interval_ms))
        self.metrics.tx_committed = await loop.run_in_executor(self._store_reader, count_committed, store)
        self.admission = Admission(self.genesis, self.ledger, self.kernel, self.verify_pool, self.metrics, self.limits,
                                   self.relay.enqueue if self.relay else None)
        self.intake = BlockIntake(self.genesis, self.chain, self.admission, self.verify_pool, self.metrics,
                                  self.log, self.clock, self._store_writer)
        self.intake.pace.on_delay = self.door.block_delay     # late blocks cap the client intake
        if genesis.sharding is not None:     # before the restore: kept blocks credit receipts too
            self.receipts = self.intake.receipts = ReceiptRoom(genesis, self.chain, self.verify_pool, self.ledger,
                                                                self.log)
            self.outbox = ReceiptOutbox(genesis, self.chain, store, self.kernel.table, self._store_reader)
        self.journal = journal = Journal(config.data, self.name, self.log, self.metrics.stages)
        journaled = await loop.run_in_executor(self._store_reader, journal.read_back)
        self.persistence = Persistence(config.data, store, self.intake, self.admission, journal,
                                       self._store_writer, self.metrics, self.log)
        self.queries = ChainQueries(self.chain, self.admission, store, self._store_reader)
        self.sync = Sync(self.intake, self.peers, self.peer_views, self.metrics, self.log,
                         interval_s=config.sync_interval_s, batch_blocks=config.sync_batch_blocks,
                         on_applied=self._made_durable)
        self.log.info("store %s at height %d (%s..), %d transactions committed; validator %s; %d verify threads; "
                      "peers: %s", path, self.chain.height, self.chain.tip_hash.hex()[:16],
                      self.metrics.tx_committed, self.validator_index, config.verify_threads,
                      ", ".join(p.url for p in self.peers) or "none")
        await self.persistence.restore(journaled)
        self._flusher = self._spawn(self.persistence.flush_loop(), "flusher")
        self._spawn(self._expiry_loop(), "expiry")
        self._spawn(self.sync.run(), "sync")
        self._spawn(self.sync.watch_loop(self.metrics.loop_lag), "loop-watch")     # lag and pauses
        if self.relay:
            self._spawn(self.relay.run(), "relay")
        if self.receipts is not None:
            self._spawn(ReceiptPuller(self.receipts, self.shard_peers, self.log,
                                      interval_s=config.receipt_pull_interval_s).run(), "receipts")
        if self.validator_index is not None:
            producer = Producer(self.genesis, self.validator_index, self._sign, self.ledger, self.intake,
                                self.peers, self.peer_views, self.log, self.clock, self._spawn_short,
                                receipts=self.receipts, on_durable=self._made_durable)
            self._spawn(producer.run(self.sync.synced), "producer")
        self._producer_running = True

    async def stop(self) -> None:
        """Stop producing and syncing, finish the block write under way, journal every
        unsettled transaction, close the store."""
        if self._stopping:
            return
        self._stopping = True
        self._producer_running = False
        if self.sync is not None:
            self.sync.stopping = True
        if self.outbox is not None:
            self.outbox.watch.close()       # the held receipt polls answer now
        flusher = [self._flusher] if self._flusher is not None else []
        others = [t for t in self._tasks if t not in flusher] + list(self._short_tasks)
        async with self.intake.locked() if self.intake else contextlib.nullcontext():
            for task in others:               # no block is half-applied from here on
                task.cancel()
        await asyncio.gather(*others, return_exceptions=True)
        for task in flusher:
            task.cancel()
        await asyncio.gather(*flusher, return_exceptions=True)
        loop = asyncio.get_running_loop()
        persistence = self.persistence
        try:
            if persistence is not None:
                await loop.run_in_executor(self._store_writer, persistence.write_final)   # blocks already final
        finally:
            # Whatever happened to the final write, keep what is only in memory and close.
            try:
                if persistence is not None:
                    await persistence.keep()
            finally:
                if self.journal is not None:
                    self.journal.close()
                self.verify_pool.close()
                if self.store is not None:
                    await loop.run_in_executor(self._store_writer, self.store.close)
                self._store_writer.shutdown(wait=True)
                self._store_reader.shutdown(wait=True)
        self.log.info("stopped at height %d", self.chain.height if self.chain else -1)

    @property
    def ready(self) -> bool:
        """Started, not stopping, and the first sync round with the peers is done."""
        return self.chain is not None and self._producer_running and not self._stopping and \
            self.sync is not None and self.sync.synced.is_set()

    def _spawn(self, coroutine: Any, name: str) -> asyncio.Task:
        task = asyncio.create_task(coroutine, name=f"{self.name}-{name}")
        task.add_done_callback(self._task_done)
        self._tasks.append(task)
        return task

    def _spawn_short(self, coroutine: Any) -> None:
        """A short-lived task (one block push): tracked so `stop` can cancel it."""
        task = asyncio.create_task(coroutine)
        self._short_tasks.add(task)
        task.add_done_callback(self._short_tasks.discard)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is not None:
            self.log.error("task %s died: %r", task.get_name(), task.exception(),
                           exc_info=task.exception())

    def _require_ready(self) -> tuple[Chain, Admission, BlockIntake]:
        # `sync` is set last in `start`, with the journal, persistence and queries, once the
        # journal is read back: a request in between is answered 503, never 500 `internal`
        # (which a client takes as final, leaving its later nonces behind a gap).
        if self.chain is None or self.admission is None or self.intake is None or self.sync is None \
                or self._stopping:
            raise NodeNotReady(f"{self.name} is {'stopping' if self._stopping else 'starting'}")
        return self.chain, self.admission, self.intake

    def _require_queries(self) -> ChainQueries:
        self._require_ready()
        return self.queries      # type: ignore[return-value]   (set with the others in start)

    async def _expiry_loop(self) -> None:
        while True:     # none held: the next one to expire is at least held_ttl_s away
            held = self.ledger.sizes()[1]
            await asyncio.sleep(EXPIRY_INTERVAL_S if held else max(EXPIRY_INTERVAL_S, self.limits.held_ttl_s))
            self.admission.expire_held()

    # --- transactions -------------------------------------------------------------------------

    @contextlib.contextmanager
    def door_open(self, body_bytes: int) -> Iterator[None]:
        """A client's batch (its Content-Length) at the door, unread: NodeBusy if refused, else
        counted as on its way in until the request ends (qmemo.node.door)."""
        block_txs = self.intake.block_budget() if self.intake else self.genesis.max_block_transactions
        self.door.check(self.name, body_bytes, self.ledger.sizes()[0], block_txs, self.tip_age_s())     # pending
        with self.door.incoming(body_bytes):
            yield

    async def submit(self, items: Sequence[Item], *, from_peer: bool = False) -> list[TxOutcome]:
        """Admit a JSON batch (decoded transactions, or the DecodeError an element gave): framed
        at the edge, then `submit_body`'s one path. One outcome per item, in order."""
        body, positions, failed = frame_items(items)
        outcomes: list[TxOutcome | None] = [None] * len(items)
        for position, error in failed.items():
            outcomes[position] = TxOutcome(None, "rejected", error)
        if failed:
            self.metrics.tx_received += len(failed)
            for error in failed.values():
                self.metrics.tx_rejected[error.code] += 1
        if positions:
            admitted = await self.submit_body(body, from_peer=from_peer)
            for position, outcome in zip(positions, admitted.outcomes()):
                outcomes[position] = outcome
        return outcomes     # type: ignore[return-value]   (every position set above)

    async def submit_body(self, body: bytes, *, from_peer: bool = False) -> Admitted:
        """Admit a binary batch body (POST /txs, /peer/txs): framed, decoded and hashed in one
        native call, then checked, verified and committed by the ledger. MempoolFull (429) if
        the pool has no room at all; DecodeError / TooLarge for a broken framing, before
        anything is counted. A client's accepted transactions are journaled (fsync'd) before
        this returns, and so is the first copy of any it sent again (duplicate); a peer's are
        queued for the journal's next group commit."""
        with contextlib.nullcontext() if from_peer else self.door.admitting(len(body)):    # the door's queue
            _, admission, _ = self._require_ready()
            batch = admission.decode(body, self.config.max_batch_txs, relayed=from_peer)
            if not from_peer:
                self.door.decoded(len(body), batch.count)
            self._admission_with_room(batch.count, from_peer)
            # A client's batch goes on to the peers (a peer's came from one: the mesh is one hop).
            admitted = await admission.admit(batch, relay=not from_peer)
            await self._journal(admitted.journal_frames, admitted.journal_count, from_peer)
            if not from_peer and admitted.batch.counts()[1]:
                # "duplicate" promises what "accepted" does: the first copy may be a peer's,
                # queued for the next group commit, or another request's, still being written.
                await self.journal.settled()
            return admitted

    async def _journal(self, frames: bytes, count: int, from_peer: bool) -> None:
        """A client's accepted transactions are on disk before it hears "accepted"; a peer's
        go with the next group commit (its sender journaled them already: docs/api.md)."""
        if from_peer:
            self.journal.append_soon(frames, count)
        else:
            await self.journal.append_frames(frames, count)

    def _admission_with_room(self, count: int, from_peer: bool) -> Admission:
        """Admission; MempoolFull (429) if the pool has no room at all; for a client's batch NodeBehind
        (503) while this node trails its peers (its state would judge by blocks it lacks; sync `behind`)."""
        _, admission, _ = self._require_ready()
        behind = None if from_peer else self.sync.behind()
        error: MempoolFull | NodeBehind | None = None
        if behind is not None:
            error = NodeBehind(f"{self.name} is behind its peers ({behind}); send to another node, or retry later")
        elif admission.is_full(relayed=from_peer):
            error = MempoolFull(f"the mempool is full ({len(self.ledger)} transactions); retry later")
        if error is not None:
            self.metrics.tx_received += count
            self.metrics.tx_rejected[error.code] += count
            raise error
        return admission

    async def transaction_status(self, tx_id: bytes) -> TxStatus:
        """pending / held (waiting for a nonce gap) / committed (with inclusion proof) / evicted / unknown."""
        return await self._require_queries().transaction_status(tx_id)

    async def transaction_statuses(self, tx_ids: Sequence[bytes]) -> list[TxStatus]:
        """`transaction_status` of each, in order, without proofs (POST /txs/status, a thousand a request)."""
        return await self._require_queries().transaction_statuses(list(tx_ids))

    def account(self, address: bytes) -> tuple[Account, int]:
        """The committed account and its next nonce counting the mempool."""
        chain, admission, _ = self._require_ready()
        return chain.account(address), admission.pending_nonce(address)

    # --- blocks -------------------------------------------------------------------------------

    def block_depth(self, height: int) -> tuple[int, bool]:
        """(confirmations, final) of our block at `height` (qmemo.node.chain, `depth`)."""
        chain, _, _ = self._require_ready()
        return chain.depth(height)

    async def blocks(self, from_height: int, limit: int) -> list[Block]:
        """Our blocks from `from_height` upwards (at most `limit`), ascending."""
        return await self._require_queries().blocks(from_height, limit)

    async def block_ids(self, from_height: int, limit: int, *, with_ids: bool) -> list[BlockIds]:
        """`blocks` as headers and transaction ids only (qmemo.node.queries)."""
        return await self._require_queries().block_ids(from_height, limit, with_ids=with_ids)

    async def block_encodings(self, from_height: int, limit: int) -> list[bytes]:
        """Like `blocks`, as block encodings (what peers sync, without decoding)."""
        return await self._require_queries().block_encodings(from_height, limit)

    async def receive_block(self, encoded: bytes) -> BlockAnswer:
        """A block a peer pushed: its header judged first (qmemo.node.block_gate), its body
        only then (qmemo.node.intake). DecodeError (400) or InvalidBlock (422) if bad."""
        answer = self._screen(encoded)
        return answer if answer is not None else self._made_durable(await self._require_ready()[2].receive(encoded))

    async def receive_block_ids(self, encoded: bytes) -> BlockAnswer:
        """A block pushed as header and ids (`BlockIds.encode`): the same gate, then rebuilt from
        our pool (intake `receive_ids`; "missing" if we lack one). DecodeError / InvalidBlock if bad."""
        answer = self._screen(encoded)
        return answer if answer is not None else \
            self._made_durable(await self._require_ready()[2].receive_ids(encoded))

    def _screen(self, encoded: bytes) -> BlockAnswer | None:
        """`screen_block`: the answer from a pushed block's header alone, or None."""
        chain, _, intake = self._require_ready()
        answer = screen_block(encoded, self.genesis, chain, self.verify_pool, self.metrics, self.clock, self.log)
        if answer is not None and answer.status == BlockStatus.SYNC:
            intake.request_sync()    # we lack what it builds on: ask the peers now
        return answer

    # --- cross-shard receipts (a shard's node) -------------------------------------------------

    async def receipt_bundles(self, shard: int, from_height: int, limit: int,
                              wait_s: float = 0.0) -> tuple[int, int, list[bytes]]:
        """(chain id, highest height covered, our final blocks' receipt bundles for `shard` from
        `from_height`, held up to `wait_s`): `ReceiptOutbox.serve`. NotFound (404) if unsharded."""
        self._require_ready()
        if self.outbox is None:
            raise NotFound(f"{self.name} runs an unsharded chain: it has no receipts")
        return self.genesis.chain_id, *await self.outbox.serve(shard, from_height, limit, wait_s)

    def _made_durable(self, answer: BlockAnswer | None = None) -> BlockAnswer | None:
        """After intake (`answer` passed on): held receipt polls look again, the pool drops what's credited."""
        if self.outbox is not None:
            self.outbox.watch.moved()
        if self.receipts is not None:
            self.receipts.prune()
        return answer

    def receipt_statuses(self, receipt_ids: Sequence[bytes]) -> list[tuple[str, bool]]:
        """(status, final) of each receipt on this shard: "credited" (final or not), "pooled"
        (verified, waiting for a block) or "unknown". NotFound (404) on an unsharded chain."""
        self._require_ready()
        if self.receipts is None:
            raise NotFound(f"{self.name} runs an unsharded chain: it credits no receipts")
        return self.receipts.statuses(receipt_ids)

    # --- reporting ------------------------------------------------------------------------------

    @property
    def height(self) -> int:
        """The served tip's height: the newest stored block (0 before the first block, or while starting)."""
        return self.chain.served_height if self.chain else 0

    def tip_age_s(self) -> float:
        return max(0.0, (self.clock() - self.chain.tip_timestamp_ms) / 1000) if self.chain else 0.0

    def scheme_name(self) -> str:
        return ", ".join(self.genesis.scheme_name(s) for s in self.genesis.tx_scheme_ids)

    def status(self) -> reporting.NodeStatus:
        return reporting.node_status(self)

    def metrics_snapshot(self) -> reporting.MetricsSnapshot:
        """The /metrics document's values (docs/api.md): counters since start, recent percentiles."""
        return reporting.metrics_snapshot(self)

    def histograms(self) -> reporting.Histograms:
        """The cumulative distributions behind the snapshot (for the Prometheus page)."""
        return reporting.histograms(self)
