"""The headroom model: how many signature verifications a MEMO shard needs, against what we measured.

A shard's nodes verify every transaction routed to the shard. With `tps` spread evenly
over `shards`, a shard sees tps/shards transactions per second; a cross-shard
transaction is verified by both shards it touches, so a share `x` of cross-shard
transactions multiplies the work by (1 + x). Headroom is the verification rate a
machine delivers divided by that requirement.

Pure arithmetic on numbers handed in: this module never reads files, never measures,
and holds no measured number (MEMO's parameters live in `qmemo.analysis.memo`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from qmemo.analysis.memo import (
    CONSERVATIVE_SHARDS,
    CONSERVATIVE_TPS,
    CROSS_SHARD_SWEEP,
    TARGET_SHARDS,
    TARGET_TPS,
)
from qmemo.errors import ConfigError

# Verification is not all a node does (hashing, Merkle trees, decoding, gossip, storage),
# so a capacity that verification alone would fill is not a comfortable one. We call a
# scenario "meets" when verification needs at most half the capacity; between half and all
# of it, "tight"; above, "short". The threshold is a judgment, stated in docs/methodology.md.
COMFORT_HEADROOM = 2.0
NO_VERDICT = "no verdict: lower bound"


@dataclass(frozen=True, slots=True)
class Scenario:
    """A load on the chain: total TPS spread over shards, with a share of cross-shard transactions."""

    name: str
    tps: float
    shards: int
    cross_shard_share: float

    def __post_init__(self) -> None:
        check_scenario(self.tps, self.shards, self.cross_shard_share)

    @property
    def required_verify_rate(self) -> float:
        return required_verify_rate(self.tps, self.shards, self.cross_shard_share)


@dataclass(frozen=True, slots=True)
class Capacity:
    """A verification rate some machine or node delivered, and where the number came from."""

    label: str                 # "single core", "all 2 cores", "devnet node (end to end)"
    verify_rate: float         # verifications per second
    source: str                # the result file the number was read from
    cores: int = 1
    key: str = ""              # where in that file ("rows[3].committed_tps"), when it is one figure of many
    # A rate the capacity is at least (a devnet run that did not saturate): no verdict is
    # drawn from it, since the real capacity may be any amount higher.
    lower_bound: bool = False


@dataclass(frozen=True, slots=True)
class HeadroomRow:
    scenario: Scenario
    capacity: Capacity
    required_verify_rate: float
    headroom: float
    utilisation: float         # share of the capacity verification would take
    verdict: str


def check_scenario(tps: float, shards: int, cross_shard_share: float) -> None:
    """Raise ConfigError for a load the model cannot describe."""
    if not (math.isfinite(tps) and tps > 0):
        raise ConfigError(f"TPS must be a positive number, got {tps}")
    if not isinstance(shards, int) or shards < 1:
        raise ConfigError(f"shards must be a whole number >= 1, got {shards}")
    if not (math.isfinite(cross_shard_share) and 0.0 <= cross_shard_share <= 1.0):
        raise ConfigError(f"the cross-shard share is a fraction in [0, 1], got {cross_shard_share}")
    if shards == 1 and cross_shard_share > 0:
        # With one shard there is no other shard for a transaction to cross into.
        raise ConfigError("a single shard has no cross-shard transactions: use --cross-shard 0")


def _positive(**values: float) -> None:
    for name, value in values.items():
        if not value > 0:
            raise ConfigError(f"{name.replace('_', ' ')} must be positive, got {value}")


def verifications_per_tx(cross_shard_share: float) -> float:
    """Verifications per transaction across the chain: a cross-shard one is verified twice."""
    return 1.0 + cross_shard_share


def required_verify_rate(tps: float, shards: int, cross_shard_share: float) -> float:
    """Verifications per second one shard must sustain."""
    check_scenario(tps, shards, cross_shard_share)
    return tps / shards * verifications_per_tx(cross_shard_share)


def headroom(verify_rate: float, required: float) -> float:
    """How many times over a verification rate covers a requirement."""
    _positive(requirement=required)
    return verify_rate / required


def cores_needed(required: float, per_core_rate: float) -> int:
    """Whole cores of `per_core_rate` verifications/s needed for `required` (perfect scaling)."""
    _positive(per_core_rate=per_core_rate)
    return max(1, math.ceil(required / per_core_rate))


def verdict(headroom_x: float) -> str:
    """The one-word answer for a headroom, see COMFORT_HEADROOM."""
    if headroom_x >= COMFORT_HEADROOM:
        return "meets"
    if headroom_x >= 1.0:
        return "tight"
    return "short"


def assess(scenario: Scenario, capacity: Capacity) -> HeadroomRow:
    required = scenario.required_verify_rate
    x = headroom(capacity.verify_rate, required)
    return HeadroomRow(scenario, capacity, required, x, required / capacity.verify_rate,
                       NO_VERDICT if capacity.lower_bound else verdict(x))


def headroom_table(scenarios: Iterable[Scenario], capacities: Sequence[Capacity]) -> list[HeadroomRow]:
    """Every scenario against every capacity, scenario-major."""
    return [assess(s, c) for s in scenarios for c in capacities]


def memo_scenarios(cross_shard_shares: Sequence[float] = CROSS_SHARD_SWEEP) -> list[Scenario]:
    """MEMO's scenarios: conservative and target at each cross-shard share, and the
    single-shard extremes (all of each load on one shard; no cross-shard traffic exists there)."""
    scenarios = []
    for name, tps, shards in [("conservative", CONSERVATIVE_TPS, CONSERVATIVE_SHARDS),
                              ("target", TARGET_TPS, TARGET_SHARDS)]:
        scenarios += [Scenario(name, tps, shards, x) for x in cross_shard_shares]
    scenarios += [Scenario("single shard, conservative load", CONSERVATIVE_TPS, 1, 0.0),
                  Scenario("single shard, target load", TARGET_TPS, 1, 0.0)]
    return scenarios


# --- hardware sensitivity -------------------------------------------------------------

def projected_verify_rate(cycles_per_verify: float, clock_hz: float) -> float:
    """A PROJECTION, not a measurement: the verify rate at another clock if the cycles per
    verify stay what we measured (same microarchitecture and code path, compute-bound)."""
    _positive(cycles_per_verify=cycles_per_verify, clock_hz=clock_hz)
    return clock_hz / cycles_per_verify


def cycles_from_rate(verify_rate: float, clock_hz: float) -> float:
    """Cycles of a `clock_hz` counter per verification at `verify_rate` verifications/s."""
    _positive(verify_rate=verify_rate)
    return clock_hz / verify_rate
