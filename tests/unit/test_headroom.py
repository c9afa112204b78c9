"""The headroom model against hand-computed cases (the arithmetic is in each comment)."""

from __future__ import annotations

import pytest

from qmemo.analysis.headroom import (
    Capacity,
    Scenario,
    assess,
    cores_needed,
    cycles_from_rate,
    headroom,
    headroom_table,
    memo_scenarios,
    projected_verify_rate,
    required_verify_rate,
    verdict,
    verifications_per_tx,
)
from qmemo.errors import ConfigError


def test_conservative_scenario_needs_2500_verifications_per_shard():
    # 10,000 TPS / 4 shards = 2,500 tx/s per shard, each verified once
    assert required_verify_rate(10_000, 4, 0.0) == 2_500


@pytest.mark.parametrize("share, expected", [
    (0.2, 3_000),   # 2,500 x (1 + 0.2)
    (0.5, 3_750),   # 2,500 x (1 + 0.5)
    (0.8, 4_500),   # 2,500 x (1 + 0.8)
])
def test_cross_shard_share_multiplies_conservative_requirement(share, expected):
    assert required_verify_rate(10_000, 4, share) == pytest.approx(expected)


def test_target_scenario_needs_about_198_verifications_per_shard():
    # 50,700 / 256 = 198.046875; with 20% cross-shard: 198.046875 x 1.2 = 237.65625
    assert required_verify_rate(50_700, 256, 0.0) == pytest.approx(198.046875)
    assert required_verify_rate(50_700, 256, 0.2) == pytest.approx(237.65625)


def test_single_shard_carries_the_whole_load():
    # 50,700 / 1 x (1 + 0) = 50,700
    assert required_verify_rate(50_700, 1, 0.0) == 50_700


def test_cross_shard_transaction_is_verified_by_two_shards():
    assert verifications_per_tx(0.0) == 1.0
    assert verifications_per_tx(1.0) == 2.0   # every tx touches two shards


@pytest.mark.parametrize("tps, shards, share", [
    (0, 4, 0.2),        # no load
    (-1, 4, 0.2),       # negative load
    (10_000, 0, 0.2),   # no shard
    (10_000, 4, 1.5),   # share above 1
    (10_000, 4, -0.1),  # negative share
    (10_000, 1, 0.2),   # one shard has nothing to cross into
])
def test_impossible_scenarios_are_refused(tps, shards, share):
    with pytest.raises(ConfigError):
        required_verify_rate(tps, shards, share)


def test_headroom_is_rate_over_requirement():
    # 30,000 verifications/s against 3,000 needed = 10x
    assert headroom(30_000, 3_000) == 10.0


def test_headroom_refuses_a_zero_requirement():
    with pytest.raises(ConfigError):
        headroom(30_000, 0)


@pytest.mark.parametrize("x, expected", [
    (2.0, "meets"),    # verification takes exactly half the capacity
    (1.99, "tight"),
    (1.0, "tight"),    # verification takes all of it
    (0.99, "short"),
])
def test_verdict_thresholds(x, expected):
    assert verdict(x) == expected


def test_cores_needed_rounds_up():
    # 50,700 / 20,000 = 2.535 -> 3 cores; a tiny requirement still needs one core
    assert cores_needed(50_700, 20_000) == 3
    assert cores_needed(1, 20_000) == 1
    assert cores_needed(40_000, 20_000) == 2


def test_assess_fills_every_column():
    row = assess(Scenario("conservative", 10_000, 4, 0.2), Capacity("single core", 30_000, "x.json"))
    # needed 2,500 x 1.2 = 3,000; headroom 30,000 / 3,000 = 10; utilisation 3,000 / 30,000 = 0.1
    assert row.required_verify_rate == pytest.approx(3_000)
    assert row.headroom == pytest.approx(10)
    assert row.utilisation == pytest.approx(0.1)
    assert row.verdict == "meets"


def test_memo_scenarios_cover_both_loads_at_every_share_and_the_single_shard_extremes():
    scenarios = memo_scenarios()
    # 2 sharded loads x 4 shares + 2 single-shard extremes = 10
    assert len(scenarios) == 10
    assert [(s.tps, s.shards, s.cross_shard_share) for s in scenarios if s.name == "conservative"] == [
        (10_000, 4, 0.0), (10_000, 4, 0.2), (10_000, 4, 0.5), (10_000, 4, 0.8)]
    assert [(s.tps, s.shards) for s in scenarios if s.shards == 1] == [(10_000, 1), (50_700, 1)]


def test_headroom_table_is_every_scenario_against_every_capacity():
    capacities = [Capacity("one", 10_000, "a"), Capacity("two", 20_000, "b", cores=2)]
    rows = headroom_table(memo_scenarios(), capacities)
    assert len(rows) == 10 * 2
    # first row: conservative 0% (2,500 needed) against 10,000/s -> 4x
    assert rows[0].headroom == pytest.approx(4.0)
    assert rows[1].headroom == pytest.approx(8.0)   # 20,000 / 2,500


def test_projection_scales_with_clock():
    # 3.0 GHz / 100,000 cycles per verify = 30,000 verifications/s
    assert projected_verify_rate(100_000, 3.0e9) == pytest.approx(30_000)
    # and back: 3.0e9 cycles/s / 30,000 verifications/s = 100,000 cycles each
    assert cycles_from_rate(30_000, 3.0e9) == pytest.approx(100_000)


def test_projection_refuses_nonsense():
    with pytest.raises(ConfigError):
        projected_verify_rate(0, 3e9)
    with pytest.raises(ConfigError):
        cycles_from_rate(0, 3e9)
