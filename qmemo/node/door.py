"""The door: how much client work a node takes in before it refuses more (503 `busy`).

A node past its capacity that keeps accepting does not commit more: it answers late,
its blocks leave late and arrive after the next validator's fallback turn, and what it
accepted waits behind work it cannot finish. So a client's batch is judged at the door,
from the request's headers, before its body is read or a signature verified, against
three bounds, each derived from what the node knows or measures:

- **the pool**: pending transactions and those on their way in (client batches let in
  and not yet out of admission: read, decoded, verified, journaled - counted at this
  door's measured bytes per transaction, so batches judged at once cannot together
  overshoot), at most what the next block carries (the block
  budget: the genesis's `max_block_transactions`, lowered to what the validators validate
  in time, qmemo.node.pace). Held ones (waiting for a nonce gap) do not count: they have
  caps of their own, and the batch that fills their gap must get in. A budget at or above
  the mempool's own cap leaves the pool to it (429 `mempool_full`).
  Past it a transaction would wait for a second block before one could take it: with
  the pool at most one block, what is accepted is in the next block and final one
  interval later.
- **the admission queue**: bytes of client batches inside admission at once (read and
  being decoded, verified, journaled; a body still arriving does not count), at most what
  this node admits in
  `QUEUE_INTERVALS` of a block interval at its measured rate. The rate is measured, not
  set: bytes admitted per second of time admission was busy (some batch inside), one
  sample per `RATE_WINDOW_S`, smoothed. So a block pushed by a peer waits behind at most
  that much admission work, and a client hears within about that long.

- **the intake rate**, once a peer's block came late: client bytes admitted per second,
  at most a cap found the way TCP finds a path's capacity. A block a peer pushed that was
  stored here later than `LATE_SHARE` of a block interval after its timestamp (qmemo.node.pace)
  says the cores are past what the chain carries in time - admission here and at the peers,
  relays, blocks, all on the same cores - and lowers the cap to `DECREASE` x what this door
  admitted lately; each block on time raises it by `INCREASE`, and once it is well above
  what clients send it is lifted. Without it a node past saturation keeps its queues
  within bounds but fills every core, and blocks arrive seconds late. While a cap stands
  the pool bound is also at most a quarter above the largest of the last peers' blocks:
  what the blocks really carry, below the budget the validation rate alone allows.

An idle door never refuses: a batch arriving at an empty queue is always taken, so the
first batches measure the rate. A refused batch is answered at once with how long to
wait (`retry_after_s`: the next block for the pool, the queue's drain time for the
queue); the client sends it again later, unchanged, and nothing of it was admitted.
Peers' relayed batches do not pass the door: they are what other doors admitted.

No clock of its own: `monotonic` is injected (tests drive it). Never imports aiohttp.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from qmemo.errors import NodeBusy

POOL_BLOCKS = 1            # the pool holds at most what this many blocks carry
QUEUE_INTERVALS = 0.125    # the admission queue holds at most this share of a block interval's work
RATE_WINDOW_S = 0.5        # one rate sample per this much wall time with admission busy in it
MIN_BUSY_SAMPLE_S = 0.05   # a window busier than this gives a sample (a quiet one says nothing)
RATE_WEIGHT = 0.3          # the new sample's weight in the smoothed rate
# A late block cuts the cap by 15%, one on time raises it by 10%: at equilibrium about a third
# of the blocks are late by more than LATE_SHARE - the cap sits just under where lateness begins.
DECREASE = 0.85
INCREASE = 1.1
LIFT_ABOVE = 3.0           # the cap is lifted once this many times what clients are admitted
MIN_CAP_BYTES_S = 200_000  # a cap never shuts the door (~100 Falcon-512 transactions a second)
BURST_S = 0.1              # the intake cap lets this much of a second's worth in at once
RECENT_BLOCKS = 4          # while capped, the pool holds at most CAPPED_POOL_GROWTH x the largest of these
CAPPED_POOL_GROWTH = 1.25  # ... so a block may grow a quarter on the last ones, where demand is
MIN_POOL_TXS = 500
IDLE_S = 2.0               # an intake window with no batch for this long starts afresh
POOL = "pool"
QUEUE = "queue"
RATE = "rate"


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why the door refused a batch, and how long the client should wait."""

    bound: str              # POOL, QUEUE or RATE
    detail: str
    retry_after_s: float


class Door:
    """The bounds on a node's client admission, and the measured rate behind them."""

    def __init__(self, block_interval_s: float, mempool_max_txs: int,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.block_interval_s = block_interval_s
        self.mempool_max_txs = mempool_max_txs
        self.pool_limit = mempool_max_txs     # as of the last batch judged
        self.queue_s = QUEUE_INTERVALS * block_interval_s
        self._monotonic = monotonic
        self.queue_bytes = 0           # client bytes inside admission now
        self.incoming_bytes = 0        # client bytes let in and not yet out (being read, or in admission)
        self.bytes_per_tx: float | None = None     # of the client batches admission decoded, smoothed
        self.rate_bytes_s: float | None = None
        self.refused: dict[str, int] = {POOL: 0, QUEUE: 0, RATE: 0}        # requests refused, by bound
        self.refused_bytes: dict[str, int] = {POOL: 0, QUEUE: 0, RATE: 0}
        self.cap_bytes_s: float | None = None      # the intake cap; None: none (no block came late)
        self.intake_bytes_s = 0.0                  # client bytes admitted per second, smoothed
        self._tokens = 0.0
        self._tokens_at = monotonic()
        self._intake_start = monotonic()
        self._intake_bytes = 0
        self._last_enter = -float("inf")
        self._recent_blocks: deque[int] = deque(maxlen=RECENT_BLOCKS)   # peers' blocks' sizes
        self._window_start = monotonic()
        self._window_bytes = 0
        self._busy_s = 0.0
        self._busy_since: float | None = None

    @property
    def queue_limit_bytes(self) -> int | None:
        """The queue's bound in bytes; None until a rate was measured (no bound yet)."""
        return None if self.rate_bytes_s is None else int(self.rate_bytes_s * self.queue_s)

    @property
    def incoming_txs(self) -> int:
        """The transactions of the client batches let in and not yet out, by their bytes
        (0 until a batch was decoded)."""
        return int(self.incoming_bytes / self.bytes_per_tx) if self.bytes_per_tx else 0

    def judge(self, body_bytes: int, pool_txs: int, block_txs: int, next_block_in_s: float) -> Refusal | None:
        """The refusal for a client batch of `body_bytes` (its Content-Length; 0 if not
        given) with `pool_txs` pending and blocks of `block_txs`, or None: come in (then
        `incoming`, and `admitting` once read)."""
        self.pool_limit = POOL_BLOCKS * block_txs
        if self.cap_bytes_s is not None and self._recent_blocks:
            # Capped: the blocks carry what the cores get done, less than the budget says.
            self.pool_limit = min(self.pool_limit, max(MIN_POOL_TXS, int(CAPPED_POOL_GROWTH * max(self._recent_blocks))))
        refusal = None
        pool_txs += self.incoming_txs
        if self.pool_limit < self.mempool_max_txs and pool_txs >= self.pool_limit:
            refusal = Refusal(POOL, f"the pool holds {pool_txs:,} transactions with those on their way in, what "
                                    f"the next block carries ({self.pool_limit:,}); retry after it",
                              min(self.block_interval_s, max(0.1, next_block_in_s)))
        else:
            limit = self.queue_limit_bytes
            if limit is not None and self.queue_bytes and self.queue_bytes + body_bytes > limit:
                drain_s = self.queue_bytes / self.rate_bytes_s if self.rate_bytes_s else self.queue_s
                refusal = Refusal(QUEUE, f"{self.queue_bytes:,} bytes of batches are being admitted, what this "
                                         f"node admits in {self.queue_s * 1000:.0f} ms at its measured "
                                         f"{self.rate_bytes_s / 1e6:.1f} MB/s; retry shortly",
                                  max(0.05, drain_s))
        if refusal is None and self.cap_bytes_s is not None:
            refusal = self._over_cap(body_bytes)
        if refusal is not None:
            self.refused[refusal.bound] += 1
            self.refused_bytes[refusal.bound] += body_bytes
        return refusal

    def _over_cap(self, body_bytes: int) -> Refusal | None:
        cap = self.cap_bytes_s
        assert cap is not None
        now = self._monotonic()
        self._tokens = min(cap * BURST_S, self._tokens + cap * (now - self._tokens_at))
        self._tokens_at = now
        if self._tokens >= min(body_bytes, cap * BURST_S) or not self.queue_bytes:
            return None
        wait_s = (min(body_bytes, cap * BURST_S) - self._tokens) / cap
        return Refusal(RATE, f"blocks reach the peers late: this node admits {cap / 1e6:.2f} MB/s of client batches "
                             f"for now; retry shortly", min(self.block_interval_s, max(0.05, wait_s)))

    def block_delay(self, tx_count: int, late: bool) -> None:
        """A peer's block of `tx_count` transactions was stored here, `late` or not
        (qmemo.node.pace, `LATE_SHARE`): move the intake cap."""
        self._recent_blocks.append(tx_count)
        if late:
            if self.cap_bytes_s is None:      # a new cap starts with a full bucket
                base = self.intake_bytes_s
                self._tokens, self._tokens_at = BURST_S * base, self._monotonic()
            else:
                base = min(self.cap_bytes_s, self.intake_bytes_s)
            self.cap_bytes_s = max(MIN_CAP_BYTES_S, DECREASE * base)
        elif self.cap_bytes_s is not None:
            self.cap_bytes_s *= INCREASE
            if self.cap_bytes_s > LIFT_ABOVE * max(self.intake_bytes_s, MIN_CAP_BYTES_S):
                self.cap_bytes_s = None

    def check(self, node: str, body_bytes: int, pool_txs: int, block_txs: int, tip_age_s: float) -> None:
        """`judge` with the tip `tip_age_s` old, raising NodeBusy (503 busy, with the wait) for a refusal."""
        refusal = self.judge(body_bytes, pool_txs, block_txs, self.block_interval_s - tip_age_s)
        if refusal is not None:
            raise NodeBusy(f"{node} is busy: {refusal.detail}", max(1, round(refusal.retry_after_s * 1000)))

    @contextlib.contextmanager
    def incoming(self, body_bytes: int) -> Iterator[None]:
        """A client batch let in: on its way in (counted against the pool) until it ends."""
        self.incoming_bytes += body_bytes
        try:
            yield
        finally:
            self.incoming_bytes = max(0, self.incoming_bytes - body_bytes)

    def decoded(self, body_bytes: int, txs: int) -> None:
        """A client batch of `body_bytes` held `txs` transactions: the bytes per transaction."""
        if txs:
            sample = body_bytes / txs
            self.bytes_per_tx = sample if self.bytes_per_tx is None else \
                (1 - RATE_WEIGHT) * self.bytes_per_tx + RATE_WEIGHT * sample

    @contextlib.contextmanager
    def admitting(self, body_bytes: int) -> Iterator[None]:
        """A client batch inside admission: `enter`, then `leave` however it ends."""
        self.enter(body_bytes)
        admitted = False
        try:
            yield
            admitted = True
        finally:
            self.leave(body_bytes, admitted)

    def enter(self, body_bytes: int) -> None:
        """A client batch goes into admission."""
        now = self._monotonic()
        if self.queue_bytes == 0 and self._busy_since is None:
            self._busy_since = now
        self.queue_bytes += body_bytes
        if self.cap_bytes_s is not None:      # an empty queue's batch may overdraw, by one bucket at most
            self._tokens = max(-self.cap_bytes_s * BURST_S, self._tokens - body_bytes)
        if now - self._last_enter > IDLE_S:   # after a pause: measure from here, not across it
            self._intake_start, self._intake_bytes = now, 0
        self._last_enter = now
        self._intake_bytes += body_bytes
        if now - self._intake_start >= RATE_WINDOW_S:
            sample = self._intake_bytes / (now - self._intake_start)
            self.intake_bytes_s = sample if not self.intake_bytes_s else \
                (1 - RATE_WEIGHT) * self.intake_bytes_s + RATE_WEIGHT * sample
            self._intake_start, self._intake_bytes = now, 0

    def leave(self, body_bytes: int, admitted: bool) -> None:
        """It left admission (answered, or failed); `admitted`: its bytes count toward the rate."""
        now = self._monotonic()
        self.queue_bytes = max(0, self.queue_bytes - body_bytes)
        if admitted:
            self._window_bytes += body_bytes
        if self.queue_bytes == 0 and self._busy_since is not None:
            self._busy_s += now - self._busy_since
            self._busy_since = None
        if now - self._window_start >= RATE_WINDOW_S:
            self._sample(now)

    def _sample(self, now: float) -> None:
        busy_s = self._busy_s + (now - self._busy_since if self._busy_since is not None else 0.0)
        if busy_s >= MIN_BUSY_SAMPLE_S and self._window_bytes:
            sample = self._window_bytes / busy_s
            self.rate_bytes_s = sample if self.rate_bytes_s is None else \
                (1 - RATE_WEIGHT) * self.rate_bytes_s + RATE_WEIGHT * sample
        self._window_start, self._window_bytes, self._busy_s = now, 0, 0.0
        if self._busy_since is not None:
            self._busy_since = now
