"""The fault scenarios at full speed: `qmemo scenario faults`.

The fault tests in the suite (tests/integration/test_faults.py, test_failover.py) kill,
pause and cut off nodes under a few hundred transactions per second; the journal's group
commit and the store work hardest near saturation. This runs the four shipped fault
scenarios - SIGKILL of the next producer, SIGKILL of every node, SIGSTOP of one, a
partition of one from the others - with their own invariants, at `share` (default 0.8)
of the machine's saturation rate, a minute of load each.

The saturation rate is a parameter (`--tps`), or is read from a sweep's `sweep.json`
(`./devnet.sh --sweep ...` or `qmemo gen --sweep ...`): the highest stage that nothing
limited below the first limited one (qmemo.load.summary's verdicts). The manifests' committed-TPS floor, written as
60% of their 500 TPS (a third of the load goes to the faulty node while it is down), is
kept in that proportion to the rate; every other invariant is the manifest's own.

Pure: the runs themselves are the command's (qmemo.commands.scenario).
"""

from __future__ import annotations

import math

from qmemo.errors import ConfigError
from qmemo.load.summary import Sweep

FAULT_SCENARIOS = ("kill-producer", "kill-all", "pause-node", "partition-minority")
DEFAULT_SHARE = 0.8
DEFAULT_DURATION_S = 60.0
# The shipped manifests' min_committed_tps / tps (300 of 500).
COMMITTED_FLOOR_SHARE = 0.6


def saturation_tps(sweep: Sweep) -> float:
    """The highest rate a sweep sustained: its highest stage with no verdict (committed short
    of the target, p99 past 3 blocks, the generator behind) below its first limited one - a
    stage past that one that nothing limited is overload, not a sustained rate. The same
    stage as the report's headline (qmemo.analysis.devnet.held_and_limit)."""
    from qmemo.analysis.devnet import held_and_limit, sweep_points

    held, _ = held_and_limit(sweep_points(sweep))
    if held is None:
        raise ConfigError("the sweep has no stage that nothing limited: start it lower to find a sustained rate")
    return held.target_tps


def fault_rate(saturation: float, share: float) -> float:
    if not (math.isfinite(saturation) and saturation > 0):
        raise ConfigError(f"the saturation rate must be a positive number of TPS, got {saturation}")
    if not 0 < share <= 1:
        raise ConfigError(f"--share must be in (0, 1], got {share}")
    return round(saturation * share)


def fault_overrides(tps: float, duration_s: float) -> list[str]:
    """The `--set` overrides that run a fault manifest at `tps` for `duration_s`."""
    if not (math.isfinite(duration_s) and duration_s >= 45):
        # every shipped fault ends by 35 s into the load (partition-minority: 15 + 20 s), and
        # the chain must be seen carrying load again after it
        raise ConfigError(f"--duration must be at least 45 s (the faults end by 35 s), got {duration_s}")
    return [f"load.tps={tps:g}", f"load.duration_s={duration_s:g}",
            f"invariants.min_committed_tps={COMMITTED_FLOOR_SHARE * tps:g}"]
