"""What the node needs from a peer, and how accepted transactions reach the peers.

`PeerLink` is the node's view of one peer; `qmemo.net.peer_client.HttpPeer` implements
it over HTTP with binary bodies. The node never sees a URL path or a status code.

Relay: transactions a client sent us are relayed once, to every peer, in batches
(`relay_flush_s` of collection, at most `max_batch_txs` per request, one request in
flight per peer, so a slow peer gets bigger batches, not more connections). A peer
does not relay what it got from a peer: the devnet is a full mesh, where one hop
reaches everyone; a node outside the mesh still gets every transaction in a block,
through sync. If a peer is down, its queue is bounded (`max_queue_txs`, oldest
dropped and counted): the transactions are still in our mempool and reach the chain
through us.

A batch that failed without an answer (a timeout, a dropped connection: `PeerError`) is
sent to that peer once more, before the next batch: the peer may have taken it or not,
and admission is idempotent by transaction id, so a copy it took is answered
"duplicate". Without the resend a timed-out batch never reached the peer: the
peer saw those transactions only in a block, and a client that failed over to it meanwhile
met a nonce gap there. A batch the peer answered and refused (`PeerRefused`) is not sent
again, nor one whose resend failed too: it is dropped and counted.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from qmemo.errors import PeerError, PeerRefused
from qmemo.frames import decode_frames, encode_frames
from qmemo.node.metrics import NodeMetrics

_FRAME_PREFIX_BYTES = 4     # each frame's u32 length in a binary batch (qmemo.frames)


@dataclass(frozen=True, slots=True)
class PeerTip:
    height: int
    tip_hash: bytes
    final_height: int = 0     # a peer ahead of us in finality may be on the branch to follow


class PeerLink(Protocol):
    url: str

    async def send_txs(self, frames: bytes, count: int) -> None: ...

    async def send_block(self, encoded: bytes) -> str: ...

    async def send_block_ids(self, encoded_ids: bytes) -> str: ...

    async def tip(self) -> PeerTip: ...

    async def block_encodings(self, from_height: int, limit: int) -> list[bytes]: ...


@dataclass(slots=True)
class PeerView:
    """What we last heard from a peer (shown in /status)."""

    url: str
    height: int | None = None
    tip_hash: bytes | None = None
    final_height: int = 0
    reachable: bool = False
    last_seen_monotonic: float | None = None
    error: str | None = None


class Relay:
    """Per-peer queues of framed transactions, each drained by its own task.

    A queue holds chunks - one admitted request's relayed transactions, framed once by the
    ledger - so relaying costs no Python per transaction; a batch to a peer is as many whole
    chunks as fit its caps (a chunk over them is cut in frames, which only a peer with a
    smaller cap than ours causes)."""

    def __init__(self, peers: Sequence[PeerLink], metrics: NodeMetrics, log: logging.LoggerAdapter, *,
                 flush_s: float, max_batch_txs: int, max_batch_bytes: int, max_queue_txs: int = 200_000) -> None:
        self._peers = list(peers)
        self._queues = {peer.url: deque[tuple[bytes, int]]() for peer in self._peers}
        self._queued = dict.fromkeys(self._queues, 0)       # transactions in each queue
        self._ready = {peer.url: asyncio.Event() for peer in self._peers}
        self._metrics = metrics
        self._log = log
        self._flush_s = flush_s
        self._max_batch = max_batch_txs
        self._max_bytes = max_batch_bytes      # a peer takes relays under its client body cap
        self._max_queue = max_queue_txs
        self.dropped = 0
        self.resent = 0          # transactions sent a second time after a batch failed unanswered

    def enqueue(self, frames: bytes, count: int) -> None:
        """Relay `count` framed transactions to every peer."""
        if not count:
            return
        for url, queue in self._queues.items():
            queue.append((frames, count))
            self._queued[url] += count
            while self._queued[url] > self._max_queue and len(queue) > 1:    # a down peer: oldest first
                _, dropped = queue.popleft()
                self._queued[url] -= dropped
                self.dropped += dropped
            self._ready[url].set()

    async def run(self) -> None:
        """Drain every peer's queue until cancelled."""
        await asyncio.gather(*(self._drain(peer) for peer in self._peers))

    def _next_batch(self, url: str) -> tuple[bytes, int]:
        """Whole chunks from the front of the queue, within `max_batch_txs` and
        `max_batch_bytes` (always at least one transaction)."""
        queue = self._queues[url]
        parts: list[bytes] = []
        count = size = 0
        while queue:
            frames, n = queue[0]
            if parts and (count + n > self._max_batch or size + len(frames) > self._max_bytes):
                break
            if not parts and (n > self._max_batch or len(frames) > self._max_bytes):
                return self._cut_front(url)
            queue.popleft()
            parts.append(frames)
            count += n
            size += len(frames)
        self._queued[url] -= count
        return b"".join(parts), count

    def _cut_front(self, url: str) -> tuple[bytes, int]:
        """The front chunk is over a cap: send its first frames that fit, keep the rest."""
        queue = self._queues[url]
        frames, count = queue.popleft()
        records = decode_frames(frames, count, "relayed transaction")
        taken: list[bytes] = []
        size = 0
        for record in records:
            if taken and (len(taken) >= self._max_batch or size + _FRAME_PREFIX_BYTES + len(record) > self._max_bytes):
                break
            taken.append(record)
            size += _FRAME_PREFIX_BYTES + len(record)
        rest = records[len(taken):]
        if rest:
            queue.appendleft((encode_frames(rest), len(rest)))
        self._queued[url] -= len(taken)
        return encode_frames(taken), len(taken)

    async def _drain(self, peer: PeerLink) -> None:
        queue, ready = self._queues[peer.url], self._ready[peer.url]
        failing = False
        retry: tuple[bytes, int] | None = None      # a batch that failed unanswered, to send once more
        while True:
            if retry is None:
                await ready.wait()
            await asyncio.sleep(self._flush_s)
            resend = retry is not None
            if retry is not None:
                (frames, count), retry = retry, None
            else:
                frames, count = self._next_batch(peer.url)
                if not queue:
                    ready.clear()
                if not count:
                    continue
            try:
                await peer.send_txs(frames, count)
                self._metrics.relayed_txs += count
                self.resent += count if resend else 0
                if failing:
                    self._log.info("relay to %s works again", peer.url)
                failing = False
            except Exception as exc:   # PeerError, or a bug: never let one batch stop the relay
                if isinstance(exc, PeerError) and not isinstance(exc, PeerRefused) and not resend:
                    retry = (frames, count)
                else:
                    self.dropped += count
                if not isinstance(exc, PeerError):
                    self._log.exception("relay to %s failed", peer.url)
                if not failing:   # one line per outage, not one per batch
                    self._log.warning("relay to %s failed (%s); each batch is sent once more, then dropped, "
                                      "until it answers", peer.url, exc)
                failing = True
