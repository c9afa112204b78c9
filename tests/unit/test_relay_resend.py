"""Relay (qmemo.node.peers): a batch a peer left unanswered (a timeout) is sent to it once
more before the next batch; one it refused, or whose resend failed too, is dropped and
counted. Peers are stand-ins that fail on a script."""

from __future__ import annotations

import asyncio
import logging

import pytest

from qmemo.errors import PeerError, PeerRefused
from qmemo.frames import decode_frames, encode_frames
from qmemo.node.metrics import NodeMetrics, VerifyMetrics
from qmemo.node.peers import Relay


class Peer:
    """Fails its first sends with the errors in `failures`, then takes everything."""

    url = "http://peer"

    def __init__(self, failures: list[Exception]) -> None:
        self.failures = list(failures)
        self.attempts: list[list[bytes]] = []
        self.taken: list[bytes] = []

    async def send_txs(self, frames: bytes, count: int) -> None:
        encodings = decode_frames(frames, count)
        self.attempts.append(list(encodings))
        if self.failures:
            raise self.failures.pop(0)
        self.taken.extend(encodings)


async def relay_through(peer: Peer, batches: list[list[bytes]], settled) -> Relay:
    """Enqueue `batches` one after the other, run the relay until `settled(relay)`."""
    relay = Relay([peer], NodeMetrics(VerifyMetrics(threads=1)), logging.LoggerAdapter(logging.getLogger("t"), {}),
                  flush_s=0.001, max_batch_txs=2, max_batch_bytes=1 << 20)
    task = asyncio.create_task(relay.run())
    try:
        for batch in batches:
            relay.enqueue(encode_frames(batch), len(batch))
        for _ in range(500):
            if settled(relay):
                break
            await asyncio.sleep(0.01)
        assert settled(relay), f"attempts {peer.attempts}, dropped {relay.dropped}"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return relay


async def test_a_batch_left_unanswered_is_sent_once_more_before_the_next():
    peer = Peer([PeerError("GET http://peer/peer/txs: TimeoutError")])
    relay = await relay_through(peer, [[b"a", b"b"], [b"c"]], lambda r: len(peer.taken) == 3)
    assert peer.attempts == [[b"a", b"b"], [b"a", b"b"], [b"c"]]
    assert (relay.resent, relay.dropped) == (2, 0)


async def test_a_batch_whose_resend_fails_too_is_dropped_and_counted():
    peer = Peer([PeerError("timeout"), PeerError("timeout again")])
    relay = await relay_through(peer, [[b"a", b"b"], [b"c"]], lambda r: peer.taken == [b"c"])
    assert peer.attempts == [[b"a", b"b"], [b"a", b"b"], [b"c"]]
    assert (relay.resent, relay.dropped) == (0, 2)


@pytest.mark.parametrize("error", [PeerRefused("no", peer_code="body_too_large", peer_status=413),
                                   RuntimeError("a bug of ours")])
async def test_a_batch_the_peer_refused_or_a_bug_broke_is_not_sent_again(error):
    peer = Peer([error])
    relay = await relay_through(peer, [[b"a", b"b"], [b"c"]], lambda r: peer.taken == [b"c"])
    assert peer.attempts == [[b"a", b"b"], [b"c"]]
    assert (relay.resent, relay.dropped) == (0, 2)


async def test_a_batch_the_peer_answered_with_an_error_is_refused_not_unanswered():
    # The HTTP client raised a plain PeerError for any answered status, so the relay's
    # "refused: dropped" case never happened: a peer answering 429 (mempool full) got every
    # batch twice, doubling its load just when it was full.
    from aiohttp import ClientSession, web
    from aiohttp.test_utils import TestServer

    from qmemo.net.lean_post import LeanPosts
    from qmemo.net.peer_client import HttpPeer

    answers = [web.json_response({"error": "mempool_full", "detail": "full"}, status=429),
               web.Response(status=413, body=b"too large"), web.json_response({"results": []})]
    seen: list[int] = []

    async def peer_txs(request: web.Request) -> web.Response:
        assert request.headers["X-Qmemo-Origin"] == "http://us"
        assert request.content_type == "application/octet-stream"
        seen.append(len(await request.read()))
        return answers.pop(0)

    app = web.Application()
    app.router.add_post("/peer/txs", peer_txs)
    async with TestServer(app) as server, ClientSession() as session:
        peer = HttpPeer(str(server.make_url("")), session, NodeMetrics(VerifyMetrics(threads=1)), origin="http://us",
                        posts=LeanPosts(2))
        with pytest.raises(PeerRefused) as full:
            await peer.send_txs(encode_frames([b"tx"]), 1)
        assert (full.value.peer_code, full.value.peer_status) == ("mempool_full", 429)
        with pytest.raises(PeerRefused) as large:
            await peer.send_txs(encode_frames([b"tx"]), 1)
        assert (large.value.peer_code, large.value.peer_status) == ("unreadable", 413)
        await peer.send_txs(encode_frames([b"tx"]), 1)
        await server.close()
        with pytest.raises(PeerError) as unanswered:
            await peer.send_txs(encode_frames([b"tx"]), 1)
        assert not isinstance(unanswered.value, PeerRefused)
    assert len(seen) == 3
