"""Whether a process's memory and open files grow: the soak's rule, pure.

A timeline of samples ({"t_s", "rss_bytes", "fds"}) is judged "flat" or "growing" by one
rule (`FLAT_RULE`), used by the soak (qmemo.devnet.soak: a devnet under steady load) and
by the chaos scenario's `resources_flat` (qmemo.scenario.invariants: each node's process
lives between faults), so the two can never disagree on what growing means.

The rule: the first `WARMUP_SHARE` of the samples are left out (caches, the mempool and
the first blocks fill up there); over the rest, a node's RSS (and its open fds) grows
when the least-squares slope is above `MAX_RSS_GROWTH_PER_HOUR` of its mean RSS per hour
(fds: `MAX_FD_GROWTH_PER_HOUR`) *and* the rise that slope makes over the window stands
out of the samples' noise (above `NOISE_SIGMAS` standard deviations of the residuals): a
mempool that fills and drains with every block moves RSS by a hundred MiB, and in ten
minutes that swing alone fits a slope of hundreds of MiB per hour. A steady leak of one
socket a minute, or of 2% of the process's memory in ten minutes, fails it.

A second rule (`COST_RULE`, the soak's) judges a stage's CPU per transaction from one
window under load to the next: the store's, in the last full window, at most
`MAX_COST_RISE` above the first's.

Pure: arithmetic on the samples given; no processes, files or clocks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

WARMUP_SHARE = 0.2
MAX_RSS_GROWTH_PER_HOUR = 0.10      # of the mean RSS
MAX_FD_GROWTH_PER_HOUR = 10.0
NOISE_SIGMAS = 2.0
FLAT_RULE = (f"after the first {WARMUP_SHARE:.0%} of the samples, on every node: no least-squares slope of RSS "
             f"above {MAX_RSS_GROWTH_PER_HOUR:.0%} of the mean RSS per hour, nor of open fds above "
             f"{MAX_FD_GROWTH_PER_HOUR:g} per hour, whose rise over the window exceeds {NOISE_SIGMAS:g} standard "
             f"deviations of the samples around that line")
FLAT = "flat"
GROWING = "growing"
TOO_FEW = "too few samples"


def slope_per_hour(times_s: Sequence[float], values: Sequence[float]) -> float:
    """Least-squares slope of `values` over `times_s`, per hour (0 for fewer than two points)."""
    n = len(times_s)
    if n < 2:
        return 0.0
    mean_t, mean_v = sum(times_s) / n, sum(values) / n
    spread = sum((t - mean_t) ** 2 for t in times_s)
    if spread == 0:
        return 0.0
    return sum((t - mean_t) * (v - mean_v) for t, v in zip(times_s, values)) / spread * 3600


def node_summary(samples: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One node's figures and verdict from its samples ({"t_s", "rss_bytes", "fds"})."""
    kept = list(samples[int(len(samples) * WARMUP_SHARE):])
    if len(kept) < 3:           # two points always lie on a line: no trend can be told from noise
        return {"samples": len(samples), "verdict": TOO_FEW}
    times = [s["t_s"] for s in kept]
    rss = [s["rss_bytes"] for s in kept]
    fds = [s["fds"] for s in kept]
    mean_rss = sum(rss) / len(rss)
    rss_slope = slope_per_hour(times, rss)
    fd_slope = slope_per_hour(times, fds)
    rss_grows = rss_slope >= MAX_RSS_GROWTH_PER_HOUR * mean_rss and _stands_out(times, rss, rss_slope)
    fds_grow = fd_slope >= MAX_FD_GROWTH_PER_HOUR and _stands_out(times, fds, fd_slope)
    flat = not rss_grows and not fds_grow
    return {"samples": len(samples), "rss_first_bytes": samples[0]["rss_bytes"], "rss_last_bytes": rss[-1],
            "rss_max_bytes": max(s["rss_bytes"] for s in samples), "rss_mean_bytes": round(mean_rss),
            "rss_slope_bytes_per_hour": round(rss_slope), "rss_slope_share_per_hour": rss_slope / mean_rss,
            "fds_first": samples[0]["fds"], "fds_last": fds[-1], "fds_max": max(s["fds"] for s in samples),
            "fds_slope_per_hour": fd_slope, "verdict": FLAT if flat else GROWING}


def _stands_out(times_s: Sequence[float], values: Sequence[float], slope_per_h: float) -> bool:
    """Whether the rise the fitted line makes over the window exceeds NOISE_SIGMAS standard
    deviations of the values around that line (a trend, not a swing)."""
    n = len(times_s)
    mean_t, mean_v = sum(times_s) / n, sum(values) / n
    slope_s = slope_per_h / 3600
    residuals = [v - (mean_v + slope_s * (t - mean_t)) for t, v in zip(times_s, values)]
    sigma = (sum(r * r for r in residuals) / n) ** 0.5
    return slope_s * (times_s[-1] - times_s[0]) > NOISE_SIGMAS * sigma


# --- a stage's cost per transaction over the run ---------------------------------------------------
#
# The store's CPU per transaction must not rise as the chain grows: a store whose appends
# or look-ups slow down with its size would lower the chain's capacity minute by minute.
# The soak reads each node's stage costs (`/metrics` `stages`) once a window under load;
# the rule compares the last full window's figure with the first's.

COST_STAGE = "store"
MAX_COST_RISE = 0.10
COST_RULE = (f"on every node, the {COST_STAGE} stage's CPU per admitted transaction in the last full window under "
             f"load at most {MAX_COST_RISE:.0%} above the first full window's")


def stage_cost_summary(windows: Sequence[dict[str, Any]], stage: str = COST_STAGE) -> dict[str, Any]:
    """One node's `stage` cost per transaction, first against last, from its full windows
    under load in order ({"us_per_tx": {stage: µs}, ...}; windows that admitted nothing have
    no figure and are left out)."""
    figures = [w["us_per_tx"][stage] for w in windows if w.get("us_per_tx") and stage in w["us_per_tx"]]
    if len(figures) < 2:
        return {"stage": stage, "windows": len(figures), "verdict": TOO_FEW}
    first, last = figures[0], figures[-1]
    change = last / first - 1 if first > 0 else (float("inf") if last > 0 else 0.0)
    return {"stage": stage, "windows": len(figures), "first_us_per_tx": first, "last_us_per_tx": last,
            "max_us_per_tx": max(figures), "change": change, "verdict": GROWING if change > MAX_COST_RISE else FLAT}
