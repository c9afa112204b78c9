"""Sync: poll the peers' tips and fetch, validate and apply what this node lacks.

Every `sync_interval_s` (and at once when a pushed block did not connect) each peer is
asked for its tip - once a block interval instead while the node is idle and level with
its peers (`next_round_s`); from the ones ahead of us, or on another branch at our height or with
a higher final height (a majority built on it: after a partition heals, the minority's
longer branch must give way), the blocks above our chain are fetched in pages of
`sync_batch_blocks` and handed to block intake, which switches branches by the
fork-choice rule (qmemo.node.chain). A peer whose chain forks below our final height is
never followed.

Behind (`behind()`): the node knows its chain trails its peers' when a reachable peer's
final height is above ours by more than `BEHIND_MARGIN_BLOCKS`, or when its event loop
stood still for `PAUSE_S` or more (SIGSTOP, a suspended VM) and the peers' tips asked for
since have not come back yet - its picture of the peers is as old as the pause. Client
transactions are then refused with 503 `behind` (qmemo.node.service) instead of being
judged against a stale state (before this, a resumed node answered `nonce_gap` for nonces
already in blocks it had not applied). A peer whose chain we cannot follow (it forks
below our final height, served an invalid block, or none above ours) does not
count: catching up with it is impossible, and refusing clients for good because of it
would be an outage that any misconfigured or hostile peer could cause.

Never imports aiohttp or knows about HTTP.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

from qmemo.node.ledger import NodeBlock
from qmemo.errors import DecodeError, InvalidBlock, PeerError, QmemoError
from qmemo.node.intake import BlockIntake
from qmemo.node.log import Throttle, held_back
from qmemo.node.metrics import Distribution, NodeMetrics
from qmemo.node.peers import PeerLink, PeerTip, PeerView


# Final heights a peer may be ahead before we call ourselves behind: with three validators
# a block is final one block after it, and two live nodes differ by a block or two while
# one propagates; past that, our state is missing blocks a client's nonces depend on.
BEHIND_MARGIN_BLOCKS = 3
# A loop that did not turn for this long was stopped (or starved): what it knew of its
# peers is that old. Blocking work on the loop (a block's state transition) stays far below.
PAUSE_S = 5.0
# The loop watch's period: how late its timer fires is the event-loop lag of /metrics. A node
# that blocks its loop (a long block validation, a JSON body parsed in one go) answers every
# request late and relays late.
PROBE_INTERVAL_S = 0.05
# The loop watch's period while the node is idle (`idle`): a tenth of PAUSE_S, so a pause is
# still told from a slow turn; its lag samples then come from fewer, longer sleeps.
IDLE_WATCH_S = PAUSE_S / 10
SPLIT_LOG_INTERVAL_S = 60.0


def level_with(tips: Sequence[PeerTip | BaseException], tip_hash: bytes) -> bool:
    """Did every peer answer, with our tip?"""
    return bool(tips) and all(isinstance(tip, PeerTip) and tip.tip_hash == tip_hash for tip in tips)


class Sync:
    """Keeps `intake`'s chain level with the best of `peers`."""

    def __init__(self, intake: BlockIntake, peers: Sequence[PeerLink], peer_views: dict[str, PeerView],
                 metrics: NodeMetrics, log: logging.LoggerAdapter, *, interval_s: float, batch_blocks: int,
                 monotonic: Callable[[], float] = time.monotonic, on_applied: Callable[[], None] = lambda: None) -> None:
        """`monotonic`: the clock pauses are measured with (a test's own, to pause without SIGSTOP).
        `on_applied`: called after each branch handed to intake (the final height may have moved)."""
        self.intake = intake
        self.peers = list(peers)
        self.peer_views = peer_views
        self.metrics = metrics
        self.log = log
        self.interval_s = interval_s
        self.batch_blocks = batch_blocks
        self.on_applied = on_applied
        self.synced = asyncio.Event()        # set after the first round: the producer may start
        self.stopping = False
        self._lock = asyncio.Lock()
        self._monotonic = monotonic
        self._last_tick = monotonic()
        self._paused_at: float | None = None
        self._views_since: float | None = None    # when the last finished round began (monotonic)
        self._tips: list[PeerTip | BaseException] = []     # what the last round heard
        # Peers whose chain we cannot follow (it forks below our final height, served an
        # invalid block, or no block above ours - nothing, or ours again - though its tip is higher): their final height
        # says nothing about ours, so `behind` skips them until a block of theirs applies.
        self._unfollowable: set[str] = set()
        # A split repeats every round (every second) until an operator acts: one line per
        # peer per SPLIT_LOG_INTERVAL_S, counting the rounds in between.
        self._split_log = Throttle(SPLIT_LOG_INTERVAL_S)
        if not self.peers:
            self.synced.set()

    async def run(self) -> None:
        """Sync rounds until cancelled: every `interval_s`, or at once when intake asks."""
        while True:
            try:
                await self.round()
            except Exception:   # a bug: keep syncing, keep the traceback
                self.log.exception("sync round failed")
            self.synced.set()
            try:
                wait_s = self.next_round_s()
            except Exception:   # a bug: a round at the plain interval rather than no more rounds
                self.log.exception("sync's next round failed")
                wait_s = self.interval_s
            await self.intake.sync_requested(wait_s)

    def next_round_s(self) -> float:
        """Seconds to the next round: `interval_s`, or the block interval while the last round
        found every peer on our tip and our pool holds nothing. Then the producers' pushes
        carry each block to us, a block that does not connect asks for a round at once
        (`request_sync`), and a peer that stops answering or leaves our branch is seen
        within a block interval; every other round was a request per peer that found
        nothing to do (12 idle nodes: 48 requests a second)."""
        return max(self.interval_s, self.intake.genesis.block_interval_ms / 1000) if self.idle() else self.interval_s

    def idle(self) -> bool:
        """The last round found every peer on our tip, and our pool holds nothing."""
        intake = self.intake
        return level_with(self._tips, intake.chain.tip_hash) and intake.admission.pending_count() == 0

    async def watch_loop(self, lag: Distribution, interval_s: float = PROBE_INTERVAL_S,
                         idle_s: float = IDLE_WATCH_S) -> None:
        """Until cancelled: notice the loop standing still (`PAUSE_S`), e.g. a SIGSTOP, and file
        how late each wake-up came in `lag` (the event-loop lag of /metrics): every
        `interval_s`, or `idle_s` while the node is `idle`. One timer for both,
        and a slow one when nothing waits: an idle node's CPU is mostly its wake-ups."""
        clock = time.perf_counter
        while True:
            self._noticed_pause()
            period = idle_s if self.idle() else interval_s
            started = clock()
            await asyncio.sleep(period)
            lag.observe(max(0.0, clock() - started - period))

    def _noticed_pause(self) -> None:
        now = self._monotonic()
        if now - self._last_tick >= PAUSE_S:
            self._paused_at = now
            self.log.warning("the event loop stood still for %.1f s: refusing client transactions until the "
                             "peers are heard again", now - self._last_tick)
        self._last_tick = now

    def behind(self) -> str | None:
        """Why this node knows it is behind its peers, or None (docs/api.md, 503 `behind`).
        Called on every client batch: reads no clock but the monotonic one, does no I/O."""
        if not self.peers:
            return None
        self._noticed_pause()     # the first request after a pause may run before the watcher
        if self._views_since is None:
            return "the peers not heard yet since the start"
        if self._paused_at is not None and self._views_since < self._paused_at:
            return "paused, and the peers not heard since"
        ours = self.intake.chain.final_height
        best = max((view.final_height for url, view in self.peer_views.items()
                    if view.reachable and url not in self._unfollowable), default=ours)
        if best - ours > BEHIND_MARGIN_BLOCKS:
            return f"a peer's final height is {best}, ours {ours}"
        return None

    async def round(self) -> None:
        """Ask every peer for its tip; fetch from the one that is ahead (or on another branch)."""
        if not self.peers:
            return
        started = self._monotonic()
        tips = await asyncio.gather(*(peer.tip() for peer in self.peers), return_exceptions=True)
        self._tips = tips
        # What the peers said from `started` on is known now (or that they failed): `behind`
        # judges by these views, not by how long fetching their blocks takes under load.
        self._views_since = started
        await self._follow(tips)

    async def _follow(self, tips: list[PeerTip | BaseException]) -> None:
        """Update the peer views from `tips`; sync from the peers ahead or on another branch."""
        chain = self.intake.chain
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
            view.final_height = tip.final_height
            view.last_seen_monotonic = time.monotonic()
            if tip.height > chain.height or _other_branch(tip, chain.height, chain.tip_hash, chain.final_height):
                candidates.append((tip.height, peer))
        for _, peer in sorted(candidates, key=lambda c: -c[0]):
            try:
                await self._sync_from(peer)
            except (PeerError, DecodeError) as exc:
                self.log.warning("sync from %s failed: %s", peer.url, exc)
            except InvalidBlock as exc:
                self.metrics.blocks_rejected[exc.code] += 1
                self._unfollowable.add(peer.url)
                self.log.warning("sync from %s: invalid block: %s: %s", peer.url, exc.code, exc.detail)

    async def _sync_from(self, peer: PeerLink) -> None:
        """Fetch and apply the peer's blocks above ours (or its better branch) until level."""
        async with self._lock:
            chain = self.intake.chain
            batch = self.batch_blocks
            while not self.stopping:
                start = chain.height + 1
                blocks = await self._fetch(peer, start, batch)
                if blocks and blocks[0].header.previous_hash != chain.tip_hash:
                    blocks = await self._fetch_unfinal(peer, batch)
                if not blocks:
                    view = self.peer_views[peer.url]
                    if view.height is not None and view.tip_hash is not None and _other_branch(
                            PeerTip(view.height, view.tip_hash, view.final_height),
                            chain.height, chain.tip_hash, chain.final_height):
                        # Another branch, not longer: compare the branches from our final block.
                        blocks = await self._fetch_unfinal(peer, batch)
                    if not blocks:
                        if view.height is not None and view.height > chain.height:
                            self._unfollowable.add(peer.url)    # a tip above ours, and no block of it
                        return
                if blocks[0].header.previous_hash != chain.hash_at(blocks[0].height - 1):
                    more = self._split_log.allow(peer.url)
                    if more is not None:
                        self.log.error("peer %s's chain forks below our final height %d: not switching%s",
                                       peer.url, chain.final_height, held_back(more))
                    self._unfollowable.add(peer.url)
                    return
                branch = [b for b in blocks if chain.hash_at(b.height) != b.hash]
                if not branch:
                    view = self.peer_views[peer.url]
                    if view.height is not None and view.height > chain.height:
                        self._unfollowable.add(peer.url)    # a tip above ours, and only blocks we hold
                    return
                outcome = await self.intake.validate_and_apply(branch)
                self.on_applied()
                if outcome == "accepted":
                    self._unfollowable.discard(peer.url)
                if outcome != "accepted" or len(blocks) < batch:
                    return

    async def _fetch_unfinal(self, peer: PeerLink, batch: int) -> list[NodeBlock]:
        """The peer's blocks above our final height: as many as our own unfinal ones and a
        batch more, so its branch is compared whole with ours where the page allows."""
        chain = self.intake.chain
        return await self._fetch(peer, chain.final_height + 1, batch + chain.height - chain.final_height)

    async def _fetch(self, peer: PeerLink, from_height: int, limit: int) -> list[NodeBlock]:
        return [self.intake.decode_timed(data) for data in await peer.block_encodings(from_height, limit)]


def _other_branch(tip: PeerTip, height: int, tip_hash: bytes, final_height: int) -> bool:
    """Is the peer on another branch that could be better than ours without being longer:
    one at our height, or one with blocks final that are not final here?"""
    return tip.tip_hash != tip_hash and (tip.height == height or tip.final_height > final_height)
