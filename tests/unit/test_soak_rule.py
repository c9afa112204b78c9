"""The soak's verdict rule (qmemo.devnet.growth): slopes, warm-up, flat or growing; and the
soak's load and rate judgements (qmemo.devnet.soak)."""

from __future__ import annotations

import pytest

from qmemo.devnet.growth import MAX_FD_GROWTH_PER_HOUR, node_summary, slope_per_hour, stage_cost_summary
from qmemo.devnet.soak import full_windows, load_judgement, saturation_tps
from qmemo.errors import ConfigError
from qmemo.load.summary import SWEEP_SCHEMA, Sweep, SweepRow

MIB = 2**20


def samples(rss_per_s: float, fds_per_s: float = 0.0, count: int = 121, warmup_rss: int = 0) -> list[dict]:
    """Every 5 s for 10 minutes from 100 MiB and 30 fds; the first fifth `warmup_rss` higher per sample."""
    out = []
    for i in range(count):
        t = i * 5.0
        rss = 100 * MIB + rss_per_s * t + (warmup_rss * i if i < count // 5 else 0)
        out.append({"t_s": t, "rss_bytes": int(rss), "fds": 30 + round(fds_per_s * t)})
    return out


def test_slope_per_hour_of_a_straight_line_is_its_rate_times_3600():
    assert slope_per_hour([0, 10, 20], [5, 6, 7]) == pytest.approx(360.0)
    assert slope_per_hour([1], [5]) == 0.0 and slope_per_hour([3, 3], [1, 2]) == 0.0


def test_steady_memory_and_files_are_flat():
    assert node_summary(samples(0.0))["verdict"] == "flat"


def test_growth_during_the_warm_up_is_left_out():
    assert node_summary(samples(0.0, warmup_rss=MIB))["verdict"] == "flat"


def test_memory_growing_by_2_percent_in_ten_minutes_is_not_flat():
    summary = node_summary(samples(2 * MIB / 600))       # 2 MiB of 100 in 10 min: 12%/h
    assert summary["verdict"] == "growing" and summary["rss_slope_share_per_hour"] == pytest.approx(0.12, rel=0.05)


def test_one_file_descriptor_a_minute_is_not_flat():
    summary = node_summary(samples(0.0, fds_per_s=1 / 60))
    assert summary["fds_slope_per_hour"] > MAX_FD_GROWTH_PER_HOUR and summary["verdict"] == "growing"


def test_too_few_samples_give_no_verdict():
    assert node_summary(samples(0.0, count=2))["verdict"] == "too few samples"


def _stage(committed_tps: float, *, limited: bool = False) -> SweepRow:
    return SweepRow(committed_tps, committed_tps, 3000.0, 4500.0, 0, 0, 0, False, limited, limited,
                    "p99 > 3 block intervals" if limited else "", "stage")


def test_saturation_is_the_highest_unlimited_stage_and_a_sweep_without_one_is_refused():
    # The 60 s sweep of 2026-11-25: the stage above 5,859 committed more, at p99 92 s.
    sweep = Sweep(SWEEP_SCHEMA, (_stage(3000.0), _stage(4687.5), _stage(5859.4), _stage(7270.2, limited=True)))
    assert saturation_tps(sweep) == 5859.4
    with pytest.raises(ConfigError):
        saturation_tps(Sweep(SWEEP_SCHEMA, (_stage(7270.2, limited=True),)))
    with pytest.raises(ConfigError):
        saturation_tps(Sweep(SWEEP_SCHEMA, (_stage(0.0),)))


def test_a_mempool_swinging_around_a_level_is_flat_and_a_leak_under_the_same_swing_is_not():
    swing = [(-1) ** i * 60 * MIB for i in range(121)]          # +-60 MiB with every sample
    level = [dict(s, rss_bytes=s["rss_bytes"] + d) for s, d in zip(samples(0.0), swing)]
    assert node_summary(level)["verdict"] == "flat"
    leak = [dict(s, rss_bytes=s["rss_bytes"] + d) for s, d in zip(samples(400 * MIB / 600), swing)]
    assert node_summary(leak)["verdict"] == "growing"          # +400 MiB in 10 min stands out of +-60


def test_a_soak_whose_load_collapsed_is_not_held_even_with_the_identity_intact():
    # The 2026-11-23 soak at 5,400 TPS: the identity held, memory was flat, the load was not.
    collapsed = {"planned": 3_240_000, "committed": 503_649}
    assert load_judgement(collapsed)["held"] is False
    assert load_judgement(collapsed)["committed_share"] == pytest.approx(0.1554, abs=1e-4)
    assert load_judgement({"planned": 1000, "committed": 990})["held"] is True
    assert load_judgement({"planned": 1000, "committed": 989})["held"] is False
    assert load_judgement({"planned": 0, "committed": 0})["held"] is False


def window(store_us: float | None, start: float = 0.0, end: float = 60.0, admitted: int = 1000) -> dict:
    return {"node": "node-0", "t_start_s": start, "t_end_s": end, "admitted": 0 if store_us is None else admitted,
            "us_per_tx": None if store_us is None else {"store": store_us, "verify": 5.0}}


def test_the_store_cost_is_judged_last_full_window_against_the_first():
    flat = stage_cost_summary([window(7.0), window(9.0), window(7.69)])          # +9.9%: within the limit
    assert flat["verdict"] == "flat" and flat["first_us_per_tx"] == 7.0 and flat["last_us_per_tx"] == 7.69
    assert flat["max_us_per_tx"] == 9.0 and flat["change"] == pytest.approx(0.0986, abs=1e-4)
    assert stage_cost_summary([window(7.0), window(7.8)])["verdict"] == "growing"
    assert stage_cost_summary([window(7.0), window(None), window(6.0)])["verdict"] == "flat"    # idle left out
    assert stage_cost_summary([window(7.0), window(None)])["verdict"] == "too few samples"
    assert stage_cost_summary([window(7.0), window(9.0)], stage="verify")["verdict"] == "flat"


def test_only_whole_windows_that_ended_under_load_are_judged():
    windows = [window(7.0, 0, 60), window(7.1, 60, 120.4), window(7.2, 120.4, 150), window(30.0, 150, 211),
               window(7.3, 215, 275)]
    kept = full_windows(windows, 60.0, duration_s=200.0, slack_s=10.0)
    assert [w["us_per_tx"]["store"] for w in kept] == [7.0, 7.1]     # a 29.6 s window; two ending after 200 + 10 s


def test_a_window_that_admitted_well_below_the_others_is_not_judged():
    # The first window holds the generator's start: fewer admitted, a block's fixed costs
    # over fewer transactions, a higher first figure that would hide growth.
    windows = [window(14.0, 0, 60, admitted=391_000), window(13.3, 60, 120, admitted=540_900),
               window(13.5, 120, 180, admitted=541_000), window(13.8, 180, 240, admitted=540_500)]
    kept = full_windows(windows, 60.0, duration_s=240.0, slack_s=10.0)
    assert [w["us_per_tx"]["store"] for w in kept] == [13.3, 13.5, 13.8]
    assert stage_cost_summary([window(0.0), window(2.0)])["verdict"] == "growing"      # from nothing to something
