"""Send schedules: when each transaction is *meant* to be sent.

An open-loop load generator decides every send time in advance, from the schedule,
never from the replies. Latency is then measured from that intended time, so a server
that stalls cannot hide its stall by slowing the generator down (coordinated omission).

Every function here is pure: the schedule functions return the intended send offsets in
seconds from the start of the run, sorted; `batch_size` says how many of them one request
carries. Randomness (Poisson arrivals) comes from a seeded
`random.Random` passed in, so a schedule is reproducible.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from qmemo.errors import ConfigError

# A rate above this is a typo, not a plan: no node on one machine gets near it.
MAX_RATE_TPS = 1_000_000

# A batch never spans more than this much of the schedule: at low rates a full batch
# would hold transactions back for seconds (their latency counts it, honestly, but it
# would measure the generator's batching rather than the chain).
BATCH_WINDOW_S = 0.02
# --batch's default: the most transactions per request, so that at high rates a batch is
# BATCH_WINDOW_S of schedule (200 at 10,000 TPS), not a fixed count. A request costs a
# node ~0.55 ms of CPU whatever it carries (`qmemo bench node --threads 1 --batch
# 10 / 50 / 200`: 71-79 / 28-29 / 20 µs per transaction), and the window bounds what batching
# adds to a transaction's latency, as it did when the default was 50 (which the window
# gave anyway below 2,500 TPS): docs/devnet.md, "Open-loop sending".
MAX_BATCH = 500


@dataclass(frozen=True, slots=True)
class RatePoint:
    """From `at_s` seconds on, send at `tps` transactions per second."""

    at_s: float
    tps: float


def parse_schedule(text: str) -> list[RatePoint]:
    """Parse `"0:500,30:1000,60:2000"` (seconds:tps, increasing times, first at 0)."""
    points = []
    for item in text.split(","):
        at, sep, tps = item.strip().partition(":")
        try:
            point = RatePoint(float(at), float(tps))
        except ValueError:
            raise ConfigError(f"schedule entry {item.strip()!r} is not SECONDS:TPS") from None
        if not sep or not (math.isfinite(point.at_s) and math.isfinite(point.tps)):
            raise ConfigError(f"schedule entry {item.strip()!r} is not SECONDS:TPS")
        points.append(point)
    _check_points(points)
    return points


def _check_points(points: list[RatePoint]) -> None:
    if not points:
        raise ConfigError("a schedule needs at least one SECONDS:TPS entry")
    if points[0].at_s != 0:
        raise ConfigError("a schedule's first entry must start at 0 s")
    for before, after in zip(points, points[1:]):
        if after.at_s <= before.at_s:
            raise ConfigError(f"schedule times must increase ({before.at_s} then {after.at_s})")
    for point in points:
        if not 0 <= point.tps <= MAX_RATE_TPS:
            raise ConfigError(f"rate {point.tps} TPS is outside 0..{MAX_RATE_TPS}")


def rate_at(points: list[RatePoint], t_s: float, *, ramp: bool = False) -> float:
    """The rate at time `t_s`: a step function, or linear between points with `ramp`."""
    current = points[0]
    for index, point in enumerate(points):
        if point.at_s > t_s:
            if ramp and index > 0:
                prev = points[index - 1]
                share = (t_s - prev.at_s) / (point.at_s - prev.at_s)
                return prev.tps + share * (point.tps - prev.tps)
            return current.tps
        current = point
    return current.tps


def batch_size(most: int, mean_tps: float) -> int:
    """Transactions per request: `most` (--batch), or fewer so that one batch spans at most
    BATCH_WINDOW_S of schedule at `mean_tps`; at least 1."""
    return max(1, min(most, int(mean_tps * BATCH_WINDOW_S)))


def constant_offsets(tps: float, duration_s: float) -> list[float]:
    """Evenly spaced sends: transaction i at i / tps."""
    return varying_offsets([RatePoint(0, tps)], duration_s)


def poisson_offsets(tps: float, duration_s: float, rng: random.Random) -> list[float]:
    """Poisson arrivals at mean rate `tps`: exponential gaps, as independent clients make."""
    _check_points([RatePoint(0, tps)])
    offsets: list[float] = []
    if tps == 0:
        return offsets
    t = rng.expovariate(tps)
    while t < duration_s:
        offsets.append(t)
        t += rng.expovariate(tps)
    return offsets


def varying_offsets(points: list[RatePoint], duration_s: float, *, ramp: bool = False) -> list[float]:
    """Sends for a time-varying rate: send k goes out where the integral of the rate reaches k.

    Integrating the rate (rather than stepping 1/rate from the previous send) keeps the
    count exact across rate changes: 30 s at 500 TPS holds exactly 15,000 sends. Within
    a segment the rate is constant (steps) or linear (`ramp`), so the integral is linear
    or quadratic and each send time is solved in closed form.
    """
    _check_points(points)
    offsets: list[float] = []
    due_before = 0.0  # sends due before the current segment starts
    k = 0             # index of the next send
    ends = [p.at_s for p in points[1:]] + [duration_s]
    for point, segment_end in zip(points, ends):
        start, end = point.at_s, min(segment_end, duration_s)
        if start >= end:
            break
        r0 = point.tps
        r1 = rate_at(points, end, ramp=True) if ramp else r0
        slope = (r1 - r0) / (end - start)
        due_in_segment = (r0 + r1) / 2 * (end - start)
        while k < due_before + due_in_segment - 1e-9:
            need = k - due_before
            dt = need / r0 if slope == 0 else (math.sqrt(r0 * r0 + 2 * slope * need) - r0) / slope
            offsets.append(start + dt)
            k += 1
        due_before += due_in_segment
    return offsets


def sweep_rates(start_tps: float, factor: float, max_tps: float) -> list[float]:
    """The rates a sweep tries: start, start*factor, ... up to max (inclusive)."""
    if start_tps <= 0 or factor <= 1 or max_tps < start_tps:
        raise ConfigError("a sweep needs start > 0, factor > 1 and max >= start")
    rates = []
    rate = start_tps
    while rate <= max_tps * (1 + 1e-9):
        rates.append(round(rate, 3))
        rate *= factor
    return rates
