"""The block pace: how big a block the validators validate in time, and how late blocks come.

Two validators' blocks compete for a height when one arrives (or is validated) after the
next validator's fallback turn began. Under load that is what happens if nothing holds it
back: the bigger the block and the busier the validators, the later it is applied on the
others. So each node measures, from every block a peer pushed and it applied:

- its **validation rate**: the block's transactions over the wall time from its arrival
  to stored (decode, signatures, Merkle root, state, store), smoothed. The producer caps
  its next block (`block_budget`) at what that rate validates in `VALIDATE_SHARE` of a
  producer timeout - a block the others apply well within the turn before theirs. Never
  above the genesis's `max_block_transactions` (the chain's rule); never below
  `MIN_BUDGET_TXS`, so a slow sample cannot choke the chain.
- its **arrival delay**: from the block's timestamp (when its producer made it) to stored
  here. A validator whose fallback turn comes waits `fallback_grace` into it - twice the
  largest recent delay, at most `MAX_GRACE_SHARE` of the turn - before producing, so a
  primary's block that is on its way is applied, not raced. The turn is still its own
  (docs/protocol.md section 8: a block stamped anywhere in the window is the fallback's),
  so the wait costs latency only when the primary is really gone.
- **late blocks**: a block stored more than `LATE_SHARE` of an interval after its
  timestamp says the cores are past what the chain carries in time, whatever the
  validation rate says (it times a block alone; the cores are shared with admission,
  relays and the other nodes). The budget is then also capped, the way TCP finds a path's
  capacity: a late block of n transactions that takes at least `WORK_SHARE` of an
  interval to validate at the measured rate cuts the cap to `SHRINK` x the smaller of n and the cap; each block on time raises it by `GROW`,
  and once it is `LIFT_ABOVE` times the largest recent block it is lifted. Without the
  cap, blocks past saturation grow to what the pools hold; the biggest arrive seconds
  late, after the next validator's fallback block, and the validators' chains fork.
- **its own late blocks** (`own_block_stored`): a peer answers a pushed block once it
  stored it, so the producer learns how late its block was there. A late one cuts its own
  cap the same way (never raises it: its peers' blocks on time do that). Without it the
  cap fell only at the validators that received a late block: the one that made it kept
  its cap lifted, took what the others' smaller blocks left, and its blocks grew until
  every one came late.

The node's own blocks are not timed for the validation rate: it built them, it did not validate them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

VALIDATE_SHARE = 0.5        # a block is validated within this share of a producer timeout
MAX_GRACE_SHARE = 0.5       # a fallback producer waits at most this share of its turn
MIN_BUDGET_TXS = 500
RATE_WEIGHT = 0.3           # the newest block's weight in the smoothed rate
RECENT_BLOCKS = 16          # delays remembered
LATE_SHARE = 0.35           # a peer's block stored later than this share of an interval after its timestamp is late
SHRINK = 0.85               # a late block cuts the budget's cap by 15%, one on time raises it by 10%
GROW = 1.1
LIFT_ABOVE = 3.0            # the cap is lifted once this many times the largest recent block
WORK_SHARE = 0.1            # a late block whose validation takes this share of an interval lowers the cap


class BlockPace:
    """The validation rate and arrival delays of the blocks this node applied from its peers."""

    def __init__(self, block_interval_s: float, max_block_txs: int, producer_timeout_s: float,
                 on_delay: Callable[[int, bool], None] | None = None) -> None:
        """The chain's interval, block limit and producer timeout (its genesis); `on_delay`:
        told each observed block's size and whether it came late (the node's door)."""
        self.block_interval_s = block_interval_s
        self.max_block_txs = max_block_txs
        self.producer_timeout_s = producer_timeout_s
        self.on_delay = on_delay
        self.rate_txs_s: float | None = None
        self.cap_txs: float | None = None       # the late blocks' cap on the budget; None: none
        self._delays_s: deque[float] = deque(maxlen=RECENT_BLOCKS)
        self._sizes: deque[int] = deque(maxlen=RECENT_BLOCKS)
        self._own_cut_height = 0      # the last own block that cut the cap (once per block)

    def observe(self, tx_count: int, validate_s: float, delay_s: float) -> None:
        """A peer's block of `tx_count` transactions took `validate_s` from arrival to
        stored, and was stored `delay_s` after its timestamp."""
        self._delays_s.append(max(0.0, delay_s))
        self._sizes.append(tx_count)
        late = delay_s > LATE_SHARE * self.block_interval_s
        if late and self._too_big(tx_count):
            self._cut(tx_count)
        elif not late and self.cap_txs is not None:
            self.cap_txs *= GROW
            if self.cap_txs > LIFT_ABOVE * max(self._sizes):
                self.cap_txs = None
        if self.on_delay is not None:
            self.on_delay(tx_count, late)
        if tx_count and validate_s > 0:
            sample = tx_count / validate_s
            self.rate_txs_s = sample if self.rate_txs_s is None else \
                (1 - RATE_WEIGHT) * self.rate_txs_s + RATE_WEIGHT * sample

    def own_block_stored(self, height: int, tx_count: int, delay_s: float) -> None:
        """A peer stored this node's block at `height` (`tx_count` transactions) `delay_s`
        after its timestamp (the push's answer): a late one cuts the cap, once per block."""
        if delay_s > LATE_SHARE * self.block_interval_s and height > self._own_cut_height \
                and self._too_big(tx_count):
            self._own_cut_height = height
            self._cut(tx_count)

    def _too_big(self, tx_count: int) -> bool:
        # Only a late block with real validation work in it says blocks this big are too big:
        # a small one came late for some other reason (a stalled machine, a slow start), and
        # capping blocks below what the pools hold would then refuse clients the chain can carry.
        return bool(self.rate_txs_s) and tx_count / self.rate_txs_s >= WORK_SHARE * self.block_interval_s

    def _cut(self, tx_count: int) -> None:
        self.cap_txs = max(MIN_BUDGET_TXS, SHRINK * min(tx_count, self.cap_txs or tx_count))

    def block_budget(self) -> int:
        """Transactions the next block may carry."""
        budget = float(self.max_block_txs)
        if self.rate_txs_s is not None:
            budget = min(budget, self.rate_txs_s * self.producer_timeout_s * VALIDATE_SHARE)
        if self.cap_txs is not None:
            budget = min(budget, self.cap_txs)
        return max(min(MIN_BUDGET_TXS, self.max_block_txs), int(budget))

    def fallback_grace(self, producer_timeout_s: float) -> float:
        """Seconds a fallback producer waits into its turn."""
        if not self._delays_s:
            return 0.0
        return min(MAX_GRACE_SHARE * producer_timeout_s, 2 * max(self._delays_s))

    def recent_delay_s(self) -> float | None:
        return max(self._delays_s) if self._delays_s else None
