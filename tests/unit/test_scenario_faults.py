"""`qmemo scenario faults` (qmemo.scenario.faults): the rate from a sweep's highest sustained
stage, a share of it, and the overrides that run each fault manifest there."""

from __future__ import annotations

from pathlib import Path

import pytest

from qmemo.errors import ConfigError
from qmemo.load.summary import Sweep, SweepRow
from qmemo.scenario.faults import FAULT_SCENARIOS, fault_overrides, fault_rate, saturation_tps
from qmemo.scenario.manifest import load_manifest

SCENARIOS = Path(__file__).parents[2] / "scenarios"


def row(target: float, limited: bool) -> SweepRow:
    return SweepRow(target, target * (0.8 if limited else 1.0), 3000.0, 4500.0, 0, 0, 0, limited, False, False,
                    "committed < 90% of target" if limited else "", f"stage-{target:g}")


def test_the_saturation_rate_is_the_highest_stage_nothing_limited():
    sweep = Sweep("qmemo-sweep/3", (row(4000, False), row(5000, False), row(6250, True)))
    assert saturation_tps(sweep) == 5000
    assert fault_rate(5000, 0.8) == 4000


def test_a_sweep_limited_from_its_first_stage_gives_no_rate():
    with pytest.raises(ConfigError, match="no stage that nothing limited"):
        saturation_tps(Sweep("qmemo-sweep/3", (row(4000, True),)))


@pytest.mark.parametrize("share", [0.0, 1.5, float("nan")])
def test_a_share_outside_zero_to_one_is_refused(share):
    with pytest.raises(ConfigError, match="--share"):
        fault_rate(5000, share)


@pytest.mark.parametrize("name", FAULT_SCENARIOS)
def test_every_fault_manifest_runs_at_the_rate_for_a_minute_with_its_floor_in_proportion(name):
    manifest = load_manifest(SCENARIOS / f"{name}.toml", SCENARIOS / "profiles.toml", fault_overrides(4000, 60))
    assert (manifest.load.tps, manifest.load.duration_s) == (4000, 60)
    assert manifest.invariants.min_committed_tps == 2400        # 300 of 500 in the manifests
    assert manifest.perturbations and all(p.end_s <= 35 for p in manifest.perturbations)


def test_a_load_too_short_for_the_faults_is_refused():
    with pytest.raises(ConfigError, match="--duration must be at least 45 s"):
        fault_overrides(4000, 30)
