"""Send schedules: exact counts, spacing, steps, ramps, Poisson, and bad input."""

import random
import statistics

import pytest

from qmemo.errors import ConfigError
from qmemo.load.schedule import (
    BATCH_WINDOW_S,
    MAX_BATCH,
    RatePoint,
    batch_size,
    constant_offsets,
    parse_schedule,
    poisson_offsets,
    rate_at,
    sweep_rates,
    varying_offsets,
)


def test_constant_rate_sends_evenly_and_exactly():
    offsets = constant_offsets(500, 2.0)
    assert len(offsets) == 1000
    assert offsets[0] == 0.0
    assert offsets[1] == pytest.approx(0.002)
    assert offsets[-1] == pytest.approx(1.998)


def test_steps_hold_exact_counts_per_segment():
    offsets = varying_offsets(parse_schedule("0:500,30:1000,60:2000"), 90)
    assert sum(1 for o in offsets if o < 30) == 15_000
    assert sum(1 for o in offsets if 30 <= o < 60) == 30_000
    assert sum(1 for o in offsets if o >= 60) == 60_000


def test_ramp_interpolates_linearly_between_points():
    points = parse_schedule("0:0,10:1000")
    assert rate_at(points, 5, ramp=True) == pytest.approx(500)
    assert rate_at(points, 5, ramp=False) == 0
    offsets = varying_offsets(points, 10, ramp=True)
    # The integral of a 0 -> 1000 TPS ramp over 10 s is 5,000 sends; a quarter of them
    # fall in the first half (the integral up to 5 s is 1,250).
    assert len(offsets) == 5000
    assert sum(1 for o in offsets if o < 5) == pytest.approx(1250, abs=1)


def test_offsets_are_sorted_and_within_the_duration():
    offsets = varying_offsets(parse_schedule("0:300,1:50,2:700"), 3, ramp=True)
    assert offsets == sorted(offsets)
    assert all(0 <= o < 3 for o in offsets)


def test_zero_rate_segment_sends_nothing():
    offsets = varying_offsets(parse_schedule("0:0,1:100"), 2)
    assert len(offsets) == 100 and offsets[0] == pytest.approx(1.0)


def test_poisson_arrivals_have_the_mean_rate_and_exponential_gaps():
    offsets = poisson_offsets(1000, 20, random.Random(7))
    assert len(offsets) == pytest.approx(20_000, rel=0.03)
    gaps = [b - a for a, b in zip(offsets, offsets[1:])]
    # For exponential gaps the standard deviation equals the mean.
    assert statistics.stdev(gaps) == pytest.approx(statistics.mean(gaps), rel=0.05)


def test_poisson_schedule_is_reproducible_from_its_seed():
    assert poisson_offsets(100, 5, random.Random(1)) == poisson_offsets(100, 5, random.Random(1))


@pytest.mark.parametrize("text", ["", "abc", "0:100,0:200", "5:100", "0:-1", "0:100,x:1", "0:nan", "0:1e9"])
def test_bad_schedules_are_config_errors(text):
    with pytest.raises(ConfigError):
        parse_schedule(text)


def test_sweep_rates_grow_by_the_factor_up_to_the_maximum():
    assert sweep_rates(500, 2, 4000) == [500, 1000, 2000, 4000]
    with pytest.raises(ConfigError):
        sweep_rates(0, 2, 100)


def test_rate_at_after_the_last_point_keeps_the_last_rate():
    assert rate_at([RatePoint(0, 10), RatePoint(5, 20)], 100) == 20


@pytest.mark.parametrize("mean_tps, expected", [(10_000, 200), (7_000, 140), (2_000, 40), (40, 1), (1, 1),
                                                (100_000, MAX_BATCH)])
def test_a_batch_is_the_windows_worth_of_schedule_up_to_the_cap(mean_tps, expected):
    assert batch_size(MAX_BATCH, mean_tps) == expected


def test_the_window_is_20_ms_and_a_smaller_batch_flag_caps_the_batch_below_it():
    assert BATCH_WINDOW_S == 0.02
    assert batch_size(50, 10_000) == 50 and batch_size(50, 1_000) == 20
