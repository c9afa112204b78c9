"""When the report calls a devnet run's committed rate a capacity (qmemo.analysis): only
when the chain's throughput saturated; latency past its bound or a generator behind its
schedule leaves it a lower bound."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from qmemo.analysis.devnet import DevnetRun, SweepPoint
from qmemo.analysis.report_memo import devnet_capacities

RUN = DevnetRun(source=Path("/tmp/run/summary.json"), run_id="run", measured_s=10.0, target_tps=600.0,
                committed_tps=600.0, counts={}, latency_ms={}, generator_fell_behind=False, schedule_lag_ms={},
                throughput_saturated=False, latency_saturated=False)


def label(run: DevnetRun) -> str:
    [capacity] = devnet_capacities([run])
    return capacity.label


@pytest.mark.parametrize("run", [
    replace(RUN, latency_saturated=True),          # committed 600 of 600, only slow
    replace(RUN, generator_fell_behind=True, committed_tps=300.0),   # the generator limited it
    replace(RUN, sweep=(SweepPoint(300.0, 300.0, 1e3, 2e3, False), SweepPoint(600.0, 600.0, 6e3, 9e3, False))),
])
def test_a_run_whose_throughput_kept_up_is_a_lower_bound(run):
    assert label(run) == "devnet run, node end to end (lower bound)"


def test_a_run_whose_throughput_saturated_is_a_capacity():
    assert label(replace(RUN, committed_tps=400.0, throughput_saturated=True)) == "devnet run, node end to end"
    stage = SweepPoint(1200.0, 700.0, 8e3, 9e3, True)
    assert label(replace(RUN, sweep=(stage,))) == "devnet run, node end to end"
