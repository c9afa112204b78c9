"""The node's door (qmemo.node.door) and the block pace (qmemo.node.pace): what a node refuses
before reading a client's batch, and how big and how late its blocks may be."""

from __future__ import annotations

import orjson
import pytest

from qmemo.errors import NodeBusy
from qmemo.node.door import (BURST_S, DECREASE, INCREASE, LIFT_ABOVE, MIN_CAP_BYTES_S, POOL, QUEUE, RATE,
                              RATE_WINDOW_S, Door)
from qmemo.node.pace import (GROW, LATE_SHARE, MAX_GRACE_SHARE, MIN_BUDGET_TXS, SHRINK, VALIDATE_SHARE, WORK_SHARE,
                             BlockPace)


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def measured_door(rate_bytes_s: float) -> tuple[Door, Clock]:
    """A door that admitted `rate_bytes_s` for one busy window."""
    clock = Clock()
    door = Door(2.0, 50_000, monotonic=clock)
    door.enter(int(rate_bytes_s * RATE_WINDOW_S))
    clock.t += RATE_WINDOW_S
    door.leave(int(rate_bytes_s * RATE_WINDOW_S), admitted=True)
    return door, clock


def test_the_pool_bound_is_one_block_of_the_budget_and_a_full_mempool_is_left_to_its_429():
    door = Door(2.0, 50_000)
    assert door.judge(1000, 3_999, 4_000, 1.5) is None
    refusal = door.judge(1000, 4_000, 4_000, 1.5)
    assert refusal is not None and refusal.bound == POOL and refusal.retry_after_s == 1.5
    assert door.pool_limit == 4_000 and door.refused == {POOL: 1, QUEUE: 0, RATE: 0}
    assert door.judge(1000, 50_000, 100_000, 1.5) is None      # past the mempool's cap: its own 429 answers
    assert door.judge(1000, 4_000, 4_000, -3.0).retry_after_s == 0.1     # the block is late: look again soon


def test_batches_let_in_and_not_yet_out_count_against_the_pool_at_the_measured_bytes_per_transaction():
    door = Door(2.0, 50_000)
    with door.incoming(400_000):                       # no batch decoded yet: bytes say nothing of transactions
        assert door.incoming_txs == 0 and door.judge(1000, 3_000, 4_000, 1.5) is None
    door.decoded(200_000, 100)                         # 2,000 bytes a transaction
    with door.incoming(1_000_000), door.incoming(1_000_000):    # two 500-transaction batches being read at once
        assert door.incoming_txs == 1_000
        assert door.judge(2_000, 2_999, 4_000, 1.5) is None
        refusal = door.judge(2_000, 3_000, 4_000, 1.5)           # 3,000 pending + 1,000 on their way in
        assert refusal is not None and refusal.bound == POOL and "on their way in" in refusal.detail
    assert door.incoming_bytes == 0 and door.judge(2_000, 3_000, 4_000, 1.5) is None
    with pytest.raises(ValueError), door.incoming(1_000_000):      # a request that fails still goes out
        raise ValueError
    assert door.incoming_bytes == 0


def test_an_idle_door_takes_any_batch_and_no_queue_bound_exists_before_a_rate_is_measured():
    door = Door(2.0, 50_000)
    assert door.queue_limit_bytes is None
    door.enter(10 << 20)
    assert door.judge(10 << 20, 0, 4_000, 1.0) is None       # no rate yet: only the pool bounds
    measured, _ = measured_door(8_000_000)
    assert measured.queue_bytes == 0
    assert measured.judge(64 << 20, 0, 4_000, 1.0) is None   # empty queue: always in, whatever its size


def test_the_queue_bound_is_the_measured_rate_over_an_eighth_of_an_interval():
    door, _ = measured_door(8_000_000)
    assert door.rate_bytes_s == pytest.approx(8_000_000)
    assert door.queue_limit_bytes == 2_000_000                # 8 MB/s x 0.25 s
    door.enter(1_500_000)
    assert door.judge(400_000, 0, 4_000, 1.0) is None
    refusal = door.judge(600_000, 0, 4_000, 1.0)
    assert refusal is not None and refusal.bound == QUEUE
    assert refusal.retry_after_s == pytest.approx(1_500_000 / 8_000_000)
    assert door.refused_bytes[QUEUE] == 600_000


def test_the_rate_counts_busy_time_only_and_a_failed_batch_adds_no_bytes():
    door, clock = measured_door(4_000_000)
    clock.t += 10.0                         # idle: no batch inside, no sample
    door.enter(1_000_000)
    clock.t += 0.1
    door.leave(1_000_000, admitted=False)   # failed: its time counts, its bytes do not
    assert door.rate_bytes_s == pytest.approx(4_000_000)
    door.enter(2_000_000)
    clock.t += RATE_WINDOW_S
    door.leave(2_000_000, admitted=True)    # 4 MB/s again
    assert door.rate_bytes_s == pytest.approx(4_000_000)


def test_admitting_leaves_the_queue_however_the_batch_ends():
    door = Door(2.0, 50_000)
    with pytest.raises(ValueError):
        with door.admitting(5_000):
            assert door.queue_bytes == 5_000
            raise ValueError
    assert door.queue_bytes == 0


def test_a_refusal_is_a_503_busy_that_says_how_long_to_wait():
    door = Door(2.0, 50_000)
    with pytest.raises(NodeBusy) as caught:
        door.check("node-0", 1000, 4_000, 4_000, tip_age_s=0.75)
    error = caught.value
    assert error.http_status == 503 and error.code == "busy"
    document = orjson.loads(orjson.dumps(error.to_json()))
    assert document["error"] == "busy" and document["retry_after_ms"] == 1250 and "node-0" in document["detail"]


def test_the_block_budget_is_what_the_peers_blocks_validate_in_half_a_turn():
    pace = BlockPace(2.0, 100_000, 2.0)
    assert pace.block_budget() == 100_000                    # nothing measured: the genesis's limit
    pace.observe(20_000, 0.5, 0.3)                           # 40,000 tx/s
    assert pace.block_budget() == int(40_000 * 2.0 * VALIDATE_SHARE)
    small = BlockPace(2.0, 4_000, 2.0)
    small.observe(20_000, 0.5, 0.3)
    assert small.block_budget() == 4_000                     # never above the chain's rule
    pace.observe(1_000, 10.0, 0.3)                           # a slow sample is smoothed, and floored
    assert MIN_BUDGET_TXS <= pace.block_budget() < 40_000


def test_late_blocks_near_full_cap_the_budget_below_what_the_validation_rate_allows_until_they_come_on_time():
    pace = BlockPace(2.0, 100_000, 2.0)
    pace.observe(20_000, 0.25, 0.3)                          # 80,000 tx/s, on time: the rate alone
    assert pace.cap_txs is None and pace.block_budget() == 80_000
    late_s = LATE_SHARE * 2.0 + 0.01
    small = int(WORK_SHARE * 2.0 * 80_000) - 100             # validates in under a tenth of an interval
    pace.observe(small, small / 80_000, late_s)              # late, but small: no cap
    assert pace.cap_txs is None
    pace.observe(40_000, 0.5, late_s)                        # a 40,000 block came late: 85% of it
    assert pace.block_budget() == int(SHRINK * 40_000)
    pace.observe(60_000, 0.75, late_s)                       # a bigger one late: the cap only falls
    assert pace.cap_txs == pytest.approx(SHRINK ** 2 * 40_000)
    for _ in range(40):                                       # late, at a validation rate that makes every block count
        pace.observe(pace.block_budget(), 1.0, late_s * 10)
    assert pace.block_budget() == MIN_BUDGET_TXS             # floored, never shut
    pace.observe(400, 0.01, 0.1)                             # on time: up by GROW
    assert pace.cap_txs == pytest.approx(GROW * MIN_BUDGET_TXS)
    while pace.cap_txs is not None:                          # on time for long: lifted above the blocks
        pace.observe(400, 0.01, 0.1)
    assert pace.block_budget() > 4_000


def test_a_producer_whose_own_block_came_late_at_a_peer_cuts_its_cap_once_and_never_raises_it():
    """Its peers' caps fall on its late block; its own must too, or it alone keeps taking
    what their smaller blocks leave (the push's answer says when the peer stored it)."""
    pace = BlockPace(2.0, 100_000, 2.0)
    pace.observe(20_000, 0.25, 0.3)                          # 80,000 tx/s, on time: no cap
    late_s = LATE_SHARE * 2.0 + 0.01
    pace.own_block_stored(7, 40_000, 0.3)                    # on time at a peer: nothing changes
    assert pace.cap_txs is None
    pace.own_block_stored(7, 40_000, late_s)                 # late at a peer: 85% of it
    assert pace.cap_txs == pytest.approx(SHRINK * 40_000)
    pace.own_block_stored(7, 40_000, late_s * 2)             # the other peer's answer: once per block
    assert pace.cap_txs == pytest.approx(SHRINK * 40_000)
    pace.own_block_stored(10, 40_000, late_s)                # the next own block, late too
    assert pace.cap_txs == pytest.approx(SHRINK ** 2 * 40_000)
    small = int(WORK_SHARE * 2.0 * 80_000) - 100
    pace.own_block_stored(13, small, late_s)                 # late, but small: no cut
    assert pace.cap_txs == pytest.approx(SHRINK ** 2 * 40_000)
    pace.own_block_stored(16, 30_000, 0.1)                   # on time: the peers' blocks raise it, not ours
    assert pace.cap_txs == pytest.approx(SHRINK ** 2 * 40_000)


def test_a_fallback_waits_twice_the_latest_recent_arrival_at_most_half_its_turn():
    pace = BlockPace(2.0, 100_000, 2.0)
    assert pace.fallback_grace(2.0) == 0.0
    pace.observe(100, 0.01, 0.2)
    pace.observe(100, 0.01, 0.1)
    assert pace.fallback_grace(2.0) == pytest.approx(0.4)
    pace.observe(100, 0.01, 5.0)
    assert pace.fallback_grace(2.0) == MAX_GRACE_SHARE * 2.0


def intake_door(bytes_s: float) -> tuple[Door, Clock]:
    """A door that admitted `bytes_s` of client batches per second for two windows."""
    clock = Clock()
    door = Door(2.0, 50_000, monotonic=clock)
    for _ in range(20):
        door.enter(int(bytes_s * RATE_WINDOW_S / 2))
        clock.t += RATE_WINDOW_S / 2
        door.leave(int(bytes_s * RATE_WINDOW_S / 2), admitted=True)
    return door, clock


def test_a_late_block_caps_the_intake_below_what_was_admitted_and_blocks_on_time_lift_it():
    door, clock = intake_door(4_000_000)
    assert door.cap_bytes_s is None and door.intake_bytes_s == pytest.approx(4_000_000, rel=0.05)
    door.block_delay(20_000, False)                         # on time: no cap
    assert door.cap_bytes_s is None
    door.block_delay(20_000, True)                          # late
    assert door.cap_bytes_s == pytest.approx(DECREASE * door.intake_bytes_s)
    door.block_delay(20_000, True)                          # late again: lower still
    assert door.cap_bytes_s == pytest.approx(DECREASE ** 2 * door.intake_bytes_s)
    capped = door.cap_bytes_s
    door.block_delay(20_000, False)
    assert door.cap_bytes_s == pytest.approx(INCREASE * capped)
    while door.cap_bytes_s is not None:                     # on time for long: lifted
        assert door.cap_bytes_s <= LIFT_ABOVE * door.intake_bytes_s * INCREASE
        door.block_delay(20_000, False)


def test_under_a_cap_a_batch_beyond_its_tokens_is_refused_for_the_time_they_take():
    door, clock = intake_door(4_000_000)
    door.block_delay(20_000, True)                          # late: a cap, and its bucket full
    door.cap_bytes_s = 1_000_000
    clock.t += 1.0                                          # a full bucket: a tenth of a second's worth
    door.enter(50_000)                                      # something is inside: the cap applies
    assert door.judge(40_000, 0, 4_000, 1.0) is None
    door.enter(40_000)
    refusal = door.judge(100_000, 0, 4_000, 1.0)
    assert refusal is not None and refusal.bound == RATE
    assert 0.05 <= refusal.retry_after_s <= 100_000 / 1_000_000      # the missing tokens' time, at least 50 ms
    door.block_delay(20_000, True)
    assert door.cap_bytes_s >= MIN_CAP_BYTES_S              # never shut


def test_an_empty_door_takes_a_batch_under_a_cap():
    door, _ = intake_door(4_000_000)
    door.block_delay(20_000, True)
    door.cap_bytes_s = MIN_CAP_BYTES_S
    assert door.judge(10 << 20, 0, 4_000, 1.0) is None


def test_tokens_overdrawn_by_an_empty_queues_batch_cost_at_most_one_bucket_and_a_wait_within_an_interval():
    door, clock = intake_door(4_000_000)
    door.block_delay(20_000, True)
    door.cap_bytes_s = MIN_CAP_BYTES_S
    for _ in range(50):                                     # serial batches, each into an empty queue
        assert door.judge(1_000_000, 0, 4_000, 1.0) is None
        with door.admitting(1_000_000):
            pass
    door.enter(10_000)
    refusal = door.judge(500_000, 0, 4_000, 1.0)          # within the queue bound, over the cap's tokens
    assert refusal is not None and refusal.bound == RATE
    assert refusal.retry_after_s <= 2 * BURST_S + 1e-9     # an overdraft of one bucket, then the batch


def test_an_idle_pause_does_not_dilute_the_intake_rate():
    door, clock = intake_door(4_000_000)
    clock.t += 600.0
    for _ in range(4):
        door.enter(1_000_000)
        clock.t += RATE_WINDOW_S / 2
        door.leave(1_000_000, admitted=True)
    assert door.intake_bytes_s > 3_000_000                  # about 4-8 MB/s, not 1,000 kB over 600 s


def test_while_capped_the_pool_holds_a_quarter_more_than_the_largest_recent_block():
    door, _ = intake_door(4_000_000)
    assert door.judge(1000, 40_000, 100_000, 1.0) is None          # uncapped: the budget (100,000) bounds
    for size in (20_000, 24_000, 16_000):
        door.block_delay(size, True)                               # late: capped
    assert door.judge(1000, 29_999, 100_000, 1.0) is None           # an empty queue: no rate refusal
    refusal = door.judge(1000, 30_000, 100_000, 1.0)
    assert refusal is not None and refusal.bound == POOL and door.pool_limit == 30_000
