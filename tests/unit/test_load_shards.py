"""The sharded generator's pure parts: the cross-shard plan, merged timings, the invariants."""

import math

from qmemo.load.latency import Timings
from qmemo.load.shard_parts import merge
from qmemo.load.shard_summary import Transfer, invariants
from qmemo.load.shard_workload import plan_recipients
from qmemo.load.workload import Account


def accounts(shard: int, n: int) -> list[Account]:
    return [Account(b"", b"", bytes([shard, i]) + bytes(30), 0) for i in range(n)]


def test_pct_of_transfers_go_to_other_shards_reproducibly():
    pools = [accounts(k, 50) for k in range(4)]
    senders = [(i % 50, i // 50) for i in range(10_000)]
    plan = plan_recipients(1, senders, pools, 20.0, seed=7)
    assert plan == plan_recipients(1, senders, pools, 20.0, seed=7)
    cross = [k for k, _ in plan if k != 1]
    assert abs(len(cross) / len(plan) - 0.20) < 0.02                       # PCT% cross-shard
    assert {0, 2, 3} == set(cross) and all(abs(cross.count(k) / len(cross) - 1 / 3) < 0.05 for k in (0, 2, 3))
    assert all(r == (a + 1) % 50 for (k, r), (a, _) in zip(plan, senders) if k == 1)    # the next own account
    assert all(k == 1 for k, _ in plan_recipients(1, senders, pools, 0.0, seed=7))


def test_merged_timings_keep_every_shards_moments_in_order():
    a, b = Timings([0.0, 0.5]), Timings([0.2])
    a.mark_committed(1, 3.0)
    b.mark_answer(0, 0.3, 3, "fee_too_low")
    merged = merge([a, b])
    assert list(merged.intended) == [0.0, 0.5, 0.2] and merged.committed[1] == 3.0
    assert math.isnan(merged.committed[0]) and merged.reasons == {2: "fee_too_low"}


ALICE, BOB, CAROL = b"a" * 32, b"b" * 32, b"c" * 32


def test_a_run_whose_transfers_all_landed_keeps_both_invariants():
    before = {ALICE: 100, BOB: 100, CAROL: 100}
    moves = [Transfer(ALICE, BOB, 5, 1, cross=False, credited=True), Transfer(ALICE, CAROL, 7, 1, cross=True, credited=True)]
    after = {ALICE: 86, BOB: 105, CAROL: 107, b"v" * 32: 2}      # the validator earned the fees
    checks = invariants(before, after, moves, [ALICE, BOB, CAROL])
    assert checks.hold and checks.supply_before == checks.supply_after == 300 and checks.in_flight == 0


def test_a_debited_transfer_not_yet_credited_is_in_flight_not_lost_supply():
    before = {ALICE: 100, CAROL: 100}
    after = {ALICE: 92, CAROL: 100, b"v" * 32: 1}
    checks = invariants(before, after, [Transfer(ALICE, CAROL, 7, 1, cross=True, credited=False)], [ALICE, CAROL])
    assert checks.supply_conserved and checks.in_flight == 7
    assert not checks.credited_exactly_once and checks.not_credited == 1


def test_a_double_credit_breaks_both_invariants():
    before = {ALICE: 100, CAROL: 100}
    after = {ALICE: 92, CAROL: 114, b"v" * 32: 1}                # credited twice
    checks = invariants(before, after, [Transfer(ALICE, CAROL, 7, 1, cross=True, credited=True)], [ALICE, CAROL])
    assert not checks.supply_conserved and not checks.credited_exactly_once and checks.accounts_off == 1
