"""How often sync asks the peers' tips: every `interval_s`, but once a block interval while
the node is idle (an empty pool) and the last round found every peer on our tip. Peers,
chain and pool are stand-ins: no network."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace

import pytest

from qmemo.node.metrics import LAG_BUCKETS_S, Distribution, NodeMetrics, VerifyMetrics
from qmemo.node.peers import PeerTip, PeerView
from qmemo.node.sync import IDLE_WATCH_S, PAUSE_S, PROBE_INTERVAL_S, Sync


class Peer:
    """Answers with the tip hash it is set to; with None, fails like a peer that is down."""

    def __init__(self, url: str) -> None:
        self.url, self.tip_hash = url, b"tip"

    async def tip(self) -> PeerTip:
        if self.tip_hash is None:
            raise ConnectionError("down")
        return PeerTip(10, self.tip_hash, 9)

    async def block_encodings(self, from_height: int, limit: int) -> list[bytes]:
        return []


def make_sync(peers: list[Peer], pending: int = 0) -> Sync:
    chain = SimpleNamespace(final_height=9, height=10, tip_hash=b"tip", hash_at=lambda height: b"tip")
    intake = SimpleNamespace(chain=chain, admission=SimpleNamespace(pending_count=lambda: pending),
                             genesis=SimpleNamespace(block_interval_ms=2000))
    return Sync(intake, peers, {peer.url: PeerView(peer.url) for peer in peers},
                NodeMetrics(VerifyMetrics(threads=1)), logging.LoggerAdapter(logging.getLogger("test"), {}),
                interval_s=0.5, batch_blocks=20)


def test_an_idle_node_level_with_every_peer_asks_once_a_block_interval():
    sync = make_sync([Peer("a"), Peer("b")])
    assert sync.next_round_s() == 0.5                 # nothing heard yet
    asyncio.run(sync.round())
    assert sync.next_round_s() == 2.0


def test_a_pool_with_transactions_keeps_the_sync_interval():
    sync = make_sync([Peer("a"), Peer("b")], pending=1)
    asyncio.run(sync.round())
    assert sync.next_round_s() == 0.5


def test_a_peer_down_or_on_another_tip_keeps_the_sync_interval():
    up, other = Peer("a"), Peer("b")
    sync = make_sync([up, other])
    other.tip_hash = None
    asyncio.run(sync.round())
    assert sync.next_round_s() == 0.5
    other.tip_hash = b"another"
    asyncio.run(sync.round())
    assert sync.next_round_s() == 0.5
    other.tip_hash = b"tip"
    asyncio.run(sync.round())
    assert sync.next_round_s() == 2.0


async def watch_periods(sync: Sync, monkeypatch: pytest.MonkeyPatch, turns: int = 3) -> list[float]:
    """What the loop watch sleeps, turn by turn (the sleeps stand-ins: no waiting)."""
    periods: list[float] = []

    async def sleep(seconds: float) -> None:
        periods.append(seconds)
        if len(periods) == turns:
            raise asyncio.CancelledError

    lag = Distribution(LAG_BUCKETS_S, 10)
    with monkeypatch.context() as patched:
        patched.setattr(asyncio, "sleep", sleep)
        try:
            await sync.watch_loop(lag)
        except asyncio.CancelledError:
            pass
    assert lag.count == turns - 1          # a lag sample after each sleep that returned
    return periods


async def test_the_loop_watch_turns_every_50_ms_unless_the_node_is_idle(monkeypatch):
    peers = [Peer("a"), Peer("b")]
    level = make_sync(peers)
    await level.round()
    assert await watch_periods(level, monkeypatch) == [IDLE_WATCH_S] * 3
    assert IDLE_WATCH_S <= PAUSE_S / 10    # a pause is still told from a slow turn
    busy = make_sync(peers, pending=1)
    await busy.round()
    assert await watch_periods(busy, monkeypatch) == [PROBE_INTERVAL_S] * 3
    assert await watch_periods(make_sync(peers), monkeypatch) == [PROBE_INTERVAL_S] * 3     # peers not heard yet
    peers[1].tip_hash = None
    await level.round()
    assert await watch_periods(level, monkeypatch) == [PROBE_INTERVAL_S] * 3              # a peer down
