"""The producer: in this validator's turns, build, sign, apply and store a block, then push it.

It sleeps until its next turn (`next_turn_ms`: its primary slot, or a fallback window
when the primary is late), waking early whenever the tip changes, since a block that
arrived first changes the plan. Time is the node's injected clock (`NodeConfig.clock`).

Slot skipping: a validator whose primary is paused or dead takes its fallback turn
(docs/protocol.md section 8), so the chain goes on without it. But when the node is
itself validating a block (or a synced branch) that reaches the height it would produce
- a late primary's block whose header already passed the gate, slow to verify under
load - it lets its turn pass until that validation ends: producing then would fork off a
block it is about to apply, and under overload each node would finalize its own fallback
branch, which no node could switch away from (docs/api.md, section 8).

Producer locks: after a fork switch undid a block of ours, it lets its turns pass until
the branch it is on is final above the fork (or the lock expires; qmemo.core.fork_lock),
so its blocks never count toward a majority on two conflicting branches.

A push to a peer is a short task of its own (tracked, so `stop` can cancel it): one
slow peer never delays the next turn or the other peers. It sends the block as its
header and transaction ids (qmemo.core.block.BlockIds: ~0.6 MB for 10,000 transactions
instead of ~13 MB), which the peer rebuilds from its own pool, and the whole block to a
peer that answers it lacks a transaction - and, for the next
`WHOLE_HEIGHTS_AFTER_MISSING` heights, to that peer straight away (`blocks.pushed` in
/metrics counts each).

Never imports aiohttp or knows about HTTP.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

from qmemo.core.block import BLOCK_VERSION, SHARDED_BLOCK_VERSION, BlockHeader, receipts_root
from qmemo.core.fork_lock import ProducerLock
from qmemo.core.genesis import Genesis, next_turn_ms, scheduled_producer
from qmemo.errors import PeerError, PeerRefused, QmemoError
from qmemo.node.answers import BlockStatus
from qmemo.node.intake import BlockIntake
from qmemo.node.ledger import NodeBlock
from qmemo.node.peers import PeerLink, PeerView
from qmemo.node.stages import BLOCK_BUILD, RELAY, thread_cpu_ns

Sign = Callable[[bytes], bytes]

LOCK_POLL_S = 0.25      # how often a locked producer looks again (qmemo.core.fork_lock)
# After a peer lacked a transaction of a block pushed as its ids, our blocks at the next
# WHOLE_HEIGHTS_AFTER_MISSING heights go to it whole at once - chain time, not a count of
# our blocks: 4 heights are ~8 s at 2 s blocks, one or two of ours among 3 validators. Near
# saturation a peer's pool trails ours (relays wait in its event loop), and an ids push it
# cannot use costs a round trip through two busy loops before the block goes whole anyway
# (the runs behind the rule: docs/methodology.md section 12, "Blocks pushed as ids").
WHOLE_HEIGHTS_AFTER_MISSING = 4


class Producer:
    """Produces this validator's blocks on `intake`'s chain and pushes them to the peers."""

    def __init__(self, genesis: Genesis, validator_index: int, sign: Sign, ledger: Any,
                 intake: BlockIntake, peers: Sequence[PeerLink], peer_views: dict[str, PeerView],
                 log: logging.LoggerAdapter, clock: Callable[[], int],
                 spawn: Callable[[Any], None], receipts: Any = None,
                 on_durable: Callable[[], None] = lambda: None) -> None:
        """`receipts`: a shard's receipts room (qmemo.node.receipts), whose pooled receipts
        its blocks credit (None: an unsharded chain's producer). `on_durable`: called once a
        block of ours is stored (the final height may have moved)."""
        self.genesis = genesis
        self.validator_index = validator_index
        self._sign = sign
        self.ledger = ledger
        self.intake = intake
        self.peers = list(peers)
        self.peer_views = peer_views
        self.log = log
        self.clock = clock
        self._spawn = spawn
        self.receipts = receipts
        self._on_durable = on_durable
        self._reported_locks: set[ProducerLock] = set()
        self._whole_below: dict[str, int] = {}     # peer URL -> our blocks below this height go whole

    async def run(self, synced: asyncio.Event) -> None:
        """Produce in every turn of ours until cancelled (after the first sync round)."""
        genesis, me, intake = self.genesis, self.validator_index, self.intake
        chain = intake.chain
        await synced.wait()
        while True:
            height, parent_hash, parent_ts = chain.height + 1, chain.tip_hash, chain.tip_timestamp_ms
            now = self.clock()
            turn = self._graced(next_turn_ms(genesis, me, height, parent_ts, now), parent_ts)
            if turn > now and await intake.wait_tip_change((turn - now) / 1000):
                continue          # a block arrived first: plan again on the new tip
            if intake.validating(height):
                # A block (or branch) reaching this height is being validated - a pushed block's
                # header already passed the gate - so a block of ours would only fork off it.
                # Skip the turn until it is applied or refused, then plan again.
                await intake.wait_validated()
                continue
            if await self._locked(self.clock()):
                continue
            async with intake.locked():
                if chain.tip_hash != parent_hash:
                    continue
                timestamp = self.clock()
                if scheduled_producer(genesis, height, parent_ts, timestamp) != me:
                    continue
                try:
                    block = self._produce(height, parent_hash, timestamp)
                except QmemoError as exc:
                    self.log.error("could not produce block %d: %s", height, exc)
                    block = None
                else:
                    stored = await intake.make_durable()     # stored before anyone hears of it
            if block is None:
                await asyncio.sleep(genesis.producer_timeout_ms / 1000)
            elif stored:
                self._on_durable()
                self._broadcast(block)

    def _graced(self, turn_ms: int, parent_ts: int) -> int:
        """`turn_ms`, or later in the same window if it is a fallback turn: the primary's
        block may be on its way (qmemo.node.pace, `fallback_grace`). Never past the window."""
        genesis = self.genesis
        timeout = genesis.producer_timeout_ms
        elapsed = turn_ms - parent_ts - genesis.block_interval_ms
        rank = elapsed // timeout
        if elapsed < 0 or rank % len(genesis.validators) == 0:
            return turn_ms                   # a primary's turn: nothing to wait for
        window_start = parent_ts + genesis.block_interval_ms + rank * timeout
        grace_ms = int(self.intake.pace.fallback_grace(timeout / 1000) * 1000)
        return max(turn_ms, min(window_start + grace_ms, window_start + timeout - 1))

    async def _locked(self, now_ms: int) -> bool:
        """A switch undid a block of ours and this branch is not final above the fork
        (qmemo.core.fork_lock): let the turn pass, and wait until the tip moves, the lock
        expires or `LOCK_POLL_S` pass (finality can move after the tip did, once the
        branch is stored). False: free to produce."""
        chain = self.intake.chain
        locks = chain.producer_locks(now_ms)
        if not locks:
            self._reported_locks.clear()
            return False
        for lock in locks:
            if lock not in self._reported_locks:      # one line per lock, not one per turn
                self._reported_locks.add(lock)
                self.log.warning("not producing: our block %d (%s..) was undone by a switch at height %d; waiting "
                                 "until this branch is final above it (final height %d) or %.0f s pass",
                                 lock.height, lock.block_hash.hex()[:16], lock.fork_height, chain.final_height,
                                 chain.lock_expiry_ms / 1000)
        expires_ms = min(lock.since_ms for lock in locks) + chain.lock_expiry_ms
        await self.intake.wait_tip_change(min(LOCK_POLL_S, max(0.0, (expires_ms - now_ms) / 1000)))
        return True

    def _produce(self, height: int, parent_hash: bytes, timestamp_ms: int) -> NodeBlock:
        """Select the block's transactions from the pool (one call: the first pending, in
        arrival order), commit to them (the Merkle root, in C), sign the header, apply."""
        started = thread_cpu_ns()
        body = self.ledger.select(self.intake.block_budget())     # what the validators validate in time
        receipts: dict[str, Any] = {}
        section = b""
        if self.receipts is not None:   # a shard's block: version 2, crediting the pooled receipts
            count, section = self.receipts.select(self.genesis.max_block_transactions)
            receipts = {"version": SHARDED_BLOCK_VERSION, "receipt_count": count, "receipts_bytes": len(section),
                        "receipts_root": receipts_root(section)}
        header = BlockHeader(**{"version": BLOCK_VERSION, **receipts}, chain_id=self.genesis.chain_id, height=height,
                             previous_hash=parent_hash, timestamp_ms=timestamp_ms,
                             producer_index=self.validator_index, tx_count=body.count,
                             merkle_root=body.merkle_root()).signed(self._sign)
        block = NodeBlock(header, body, section)
        self.intake.metrics.stages.lap(BLOCK_BUILD, started)    # apply counts the block's txs
        self.intake.apply(block, produced=True, record_state=False)
        return block

    def _broadcast(self, block: NodeBlock) -> None:
        """Push the block to every peer as its ids (qmemo.core.block.BlockIds: the peers hold
        its transactions from the relay, nearly always), whole to a peer that lacks one -
        and at once to a peer that lacked one lately (`WHOLE_HEIGHTS_AFTER_MISSING`)."""
        if not self.peers:
            return
        metrics = self.intake.metrics
        started = thread_cpu_ns()
        encoded_ids = block.ids_encoding()
        metrics.stages.lap(RELAY, started)
        height, pace = block.height, self.intake.pace

        def answered(status: str) -> None:
            if status == BlockStatus.ACCEPTED:      # answered once stored: how late it was there
                pace.own_block_stored(height, block.tx_count, (self.clock() - block.header.timestamp_ms) / 1000)

        async def push(peer: PeerLink) -> None:
            try:
                if height >= self._whole_below.get(peer.url, 0):
                    metrics.blocks_pushed["ids"] += 1
                    status = await peer.send_block_ids(encoded_ids)
                    if status != BlockStatus.MISSING:
                        answered(status)
                        return
                    metrics.blocks_pushed["missing"] += 1
                    # max: an older block's late answer never shortens a newer one's window
                    self._whole_below[peer.url] = max(self._whole_below.get(peer.url, 0),
                                                      height + 1 + WHOLE_HEIGHTS_AFTER_MISSING)
                metrics.blocks_pushed["whole"] += 1
                answered(await peer.send_block(block.encode()))       # made when it was stored
            except PeerError as exc:
                view = self.peer_views[peer.url]
                refused = isinstance(exc, PeerRefused)     # it answered: reachable, but said no
                if view.reachable or refused:              # one line per outage, every refusal
                    self.log.warning("sending block %d to %s failed: %s", block.height, peer.url, exc)
                view.reachable = refused

        for peer in self.peers:
            self._spawn(push(peer))
