"""A node that knows it is behind its peers refuses client transactions with 503 `behind`
(qmemo.node.sync, `Sync.behind`; docs/api.md): a peer's final height more than
BEHIND_MARGIN_BLOCKS above ours, or a pause of the event loop not followed yet by a sync
round. Peers and the clock are stand-ins: no network, no sleeping."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace

from qmemo.errors import NodeBehind, NodeNotReady
from qmemo.node.metrics import LAG_BUCKETS_S, Distribution, NodeMetrics, VerifyMetrics
from qmemo.node.peers import PeerTip, PeerView
from qmemo.node.sync import BEHIND_MARGIN_BLOCKS, PAUSE_S, Sync


class Peer:
    def __init__(self, url: str, final_height: int) -> None:
        self.url = url
        self.final_height = final_height
        self.down = False

    async def tip(self) -> PeerTip:
        if self.down:
            raise ConnectionError("down")
        # Same tip as ours: nothing to fetch, only the view is updated.
        return PeerTip(10, b"tip", self.final_height)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def make_sync(peers: list[Peer], clock: Clock, our_final: int = 10) -> Sync:
    chain = SimpleNamespace(final_height=our_final, height=10, tip_hash=b"tip")
    intake = SimpleNamespace(chain=chain, admission=SimpleNamespace(pending_count=lambda: 0))
    views = {peer.url: PeerView(peer.url) for peer in peers}
    return Sync(intake, peers, views, NodeMetrics(VerifyMetrics(threads=1)),
                logging.LoggerAdapter(logging.getLogger("test"), {}), interval_s=0.5, batch_blocks=20,
                monotonic=clock)


def test_behind_is_a_503_in_the_one_error_hierarchy():
    error = NodeBehind("behind its peers")
    assert isinstance(error, NodeNotReady) and error.http_status == 503 and error.code == "behind"


def test_a_node_without_peers_is_never_behind():
    assert make_sync([], Clock()).behind() is None


def test_before_the_first_round_a_node_does_not_know_and_says_so():
    assert make_sync([Peer("a", 10)], Clock()).behind() == "the peers not heard yet since the start"


def test_a_peer_final_more_than_the_margin_above_ours_makes_us_behind():
    peer = Peer("a", 10 + BEHIND_MARGIN_BLOCKS)
    sync = make_sync([peer], Clock())
    asyncio.run(sync.round())
    assert sync.behind() is None                      # within the margin: a block or two in flight
    peer.final_height += 1
    asyncio.run(sync.round())
    assert sync.behind() == f"a peer's final height is {11 + BEHIND_MARGIN_BLOCKS}, ours 10"


def test_an_unreachable_peer_does_not_count():
    ahead, down = Peer("a", 10), Peer("b", 50)
    sync = make_sync([ahead, down], Clock())
    asyncio.run(sync.round())
    assert sync.behind() == "a peer's final height is 50, ours 10"
    down.down = True
    asyncio.run(sync.round())
    assert sync.behind() is None


def test_a_pause_makes_us_behind_until_a_round_begun_after_it_finishes():
    clock = Clock()
    sync = make_sync([Peer("a", 10)], clock)
    asyncio.run(sync.round())
    assert sync.behind() is None
    clock.now += PAUSE_S - 0.1                        # a loop that turns, however slowly
    assert sync.behind() is None
    clock.now += PAUSE_S                              # stood still: SIGSTOP, say
    assert sync.behind() == "paused, and the peers not heard since"
    assert sync.behind() == "paused, and the peers not heard since"    # still, on the next request
    asyncio.run(sync.round())
    assert sync.behind() is None


async def test_the_loop_watch_files_the_loops_lag_and_notices_a_pause_with_one_timer():
    clock = Clock()
    sync = make_sync([Peer("a", 10)], clock)
    await sync.round()
    lag = Distribution(LAG_BUCKETS_S, 100)
    watch = asyncio.create_task(sync.watch_loop(lag, interval_s=0.001, idle_s=0.001))
    try:
        for _ in range(1000):
            if lag.count >= 3:
                break
            await asyncio.sleep(0.001)
        assert lag.count >= 3 and all(sample >= 0 for sample in lag.recent)   # how late each wake-up came
        clock.now += PAUSE_S - 0.1                    # the watch kept the loop's last turn fresh
        await asyncio.sleep(0.01)
        assert sync.behind() is None
        clock.now += PAUSE_S                          # stood still between two of its turns
        seen = lag.count
        while lag.count < seen + 2:
            await asyncio.sleep(0.001)
        assert sync._paused_at is not None            # noticed by the watch, before any request
        assert sync.behind() == "paused, and the peers not heard since"
    finally:
        watch.cancel()


async def test_behind_is_judged_by_the_tips_while_the_blocks_are_still_being_fetched():
    class SlowPeer(Peer):
        async def tip(self) -> PeerTip:
            return PeerTip(60, b"theirs", self.final_height)

        async def block_encodings(self, from_height: int, limit: int) -> list[bytes]:
            await asyncio.Event().wait()        # a fetch that takes as long as overload makes it
            return []

    sync = make_sync([SlowPeer("a", 50)], Clock())
    sync.intake.sync_wanted = asyncio.Event()
    task = asyncio.create_task(sync.round())
    try:
        for _ in range(100):
            if sync.behind() != "the peers not heard yet since the start":
                break
            await asyncio.sleep(0.01)
        assert not task.done() and sync.behind() == "a peer's final height is 50, ours 10"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


class ForkedPeer(Peer):
    """A peer far ahead whose chain forks below our final height (a split's other side, a
    misconfigured peer): its blocks never connect to ours."""

    async def tip(self) -> PeerTip:
        if self.down:
            raise ConnectionError("down")
        return PeerTip(60, b"theirs", self.final_height)

    async def block_encodings(self, from_height: int, limit: int) -> list[bytes]:
        return [b"block"]


def _unconnected_block(_: bytes) -> SimpleNamespace:
    return SimpleNamespace(height=11, hash=b"theirs-11", header=SimpleNamespace(previous_hash=b"theirs-10"))


def test_a_peer_whose_chain_we_cannot_follow_does_not_make_us_behind_for_good():
    # It did: its final height, far above ours, kept the node answering 503 `behind` to
    # every client for as long as that peer answered, though no sync could ever close the gap.
    forked, level = ForkedPeer("a", 50), Peer("b", 10)
    sync = make_sync([forked, level], Clock())
    sync.intake.chain.hash_at = {10: b"tip"}.get
    sync.intake.decode_timed = _unconnected_block
    sync.intake.sync_wanted = asyncio.Event()
    asyncio.run(sync.round())
    assert sync.behind() is None


def test_a_peer_that_served_an_invalid_block_does_not_count_until_a_block_of_its_applies():
    from qmemo.errors import InvalidBlock

    class Intake(SimpleNamespace):
        refuse = True

        async def validate_and_apply(self, branch):
            if self.refuse:
                raise InvalidBlock("a bad signature", code="bad_signature")
            self.chain.height = self.chain.final_height = 60
            return "accepted"

    peer = ForkedPeer("a", 50)
    sync = make_sync([peer], Clock())
    chain = sync.intake.chain
    chain.hash_at = lambda height: b"theirs-10" if height == 10 else None
    sync.intake = Intake(chain=chain, decode_timed=_unconnected_block, sync_wanted=asyncio.Event())
    asyncio.run(sync.round())
    assert sync.behind() is None and sync.metrics.blocks_rejected["bad_signature"] == 1
    sync.intake.refuse = False
    asyncio.run(sync.round())             # its blocks apply now: it counts again
    chain.final_height = 10               # (as if we fell behind it once more)
    assert sync.behind() == "a peer's final height is 50, ours 10"


def test_a_peer_that_claims_a_higher_chain_and_serves_no_block_does_not_count():
    class EmptyPeer(ForkedPeer):
        async def block_encodings(self, from_height: int, limit: int) -> list[bytes]:
            return []

    sync = make_sync([EmptyPeer("a", 50)], Clock())
    sync.intake.chain.hash_at = {10: b"tip"}.get
    sync.intake.sync_wanted = asyncio.Event()
    asyncio.run(sync.round())
    assert sync.behind() is None


def test_a_peer_that_claims_a_higher_chain_and_serves_only_our_blocks_does_not_count():
    class EchoPeer(ForkedPeer):
        async def block_encodings(self, from_height: int, limit: int) -> list[bytes]:
            return [b"ours"]

    sync = make_sync([EchoPeer("a", 50)], Clock())
    sync.intake.chain.hash_at = {9: b"tip-9", 10: b"tip"}.get
    sync.intake.decode_timed = lambda _: SimpleNamespace(height=10, hash=b"tip",
                                                         header=SimpleNamespace(previous_hash=b"tip-9"))
    sync.intake.sync_wanted = asyncio.Event()
    asyncio.run(sync.round())
    assert sync.behind() is None
