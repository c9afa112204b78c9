"""The generator's live status: one document a second, for live.json and the progress line.

A run or a sweep stage lasts tens of seconds; without this a person watches a silent
terminal until it ends. Each second the run builds one status document (`status`, pure:
counters in, dict out), writes it to live.json for the dashboard and hands it to the
progress line (`LiveLine`): offered, accepted, included, final and p99 so far, on one
line that updates in place. The line is off when stdout is not a terminal (a log, a
pipe, devnet.sh's background generator) or with --quiet.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from qmemo.load.latency import FAILED, REJECTED, Timings

# Called once a second with the status document (and once more, running=False, at the end).
OnStatus = Callable[[dict[str, Any]], None]
LAG_WINDOW_S = 10.0      # the live send lag covers what was due in the last 10 s


def percentiles(values: Sequence[float] | np.ndarray, *ps: float) -> list[float]:
    """The order statistics at `ps` percent of `values` (any order): a partition, not a
    sort - a second of 10,000 TPS brings 100,000 latencies."""
    array = np.asarray(values, dtype=np.float64)
    ranks = [min(len(array) - 1, int(len(array) * p / 100)) for p in ps]
    chosen = np.partition(array, ranks)
    return [float(chosen[rank]) for rank in ranks]


def status(*, elapsed_s: float, duration_s: float, timings: Timings, sent: int, answered: int, in_flight: int,
           included: int, committed: int, blocks_seen: int, failovers: int, node_failures: dict[str, int],
           recent_latencies_s: Sequence[float], resend_txs: int = 0) -> dict[str, Any]:
    """The live document. `recent_latencies_s`: intended->committed of the last window, any order."""
    # Answered transactions that the node did not refuse: accepted (or already known) ones.
    accepted = answered - timings.status.count(REJECTED) - timings.status.count(FAILED)
    p50, p99 = percentiles(recent_latencies_s, 50, 99) if len(recent_latencies_s) else (None, None)
    # The send lag (sent - due) of what was due in the last window: whether this process keeps its schedule.
    due_from = bisect.bisect_left(timings.intended, elapsed_s - LAG_WINDOW_S)
    due_to = bisect.bisect_right(timings.intended, elapsed_s)
    lag = (np.frombuffer(timings.sent, dtype=np.float64)[due_from:due_to]
           - np.frombuffer(timings.due, dtype=np.float64)[due_from:due_to])
    lag = lag[~np.isnan(lag)]
    lag_p99 = percentiles(lag, 99)[0] if len(lag) else None
    return {
        "running": True, "elapsed_s": elapsed_s, "target_tps": len(timings) / max(duration_s, 1e-9),
        "planned": len(timings),
        # Due by the schedule so far (the intended times are in order): what was offered.
        "offered": bisect.bisect_right(timings.intended, elapsed_s),
        "sent": sent, "answered": answered, "accepted": max(0, accepted), "in_flight": in_flight,
        "included": included, "committed": committed, "blocks_seen": blocks_seen,
        "failovers": failovers, "node_failures": node_failures, "resend_txs": resend_txs,
        "p50_ms": p50 * 1e3 if p50 is not None else None,
        "p99_ms": p99 * 1e3 if p99 is not None else None,
        "schedule_lag_p99_ms": lag_p99 * 1e3 if lag_p99 is not None else None,
    }


def progress_line(document: dict[str, Any], label: str = "") -> str:
    """"stage 1,500 TPS (2 of 4)  12 s of 20  offered 18,000  accepted ...": one line, no colour."""
    def count(key: str) -> str:
        value = document.get(key)
        return f"{value:,}" if isinstance(value, int) else "-"

    p99 = document.get("p99_ms")
    elapsed = max(0.0, document.get("elapsed_s") or 0.0)   # the run starts 0.2 s after the first status
    duration = document.get("planned", 0) / document["target_tps"] if document.get("target_tps") else None
    if duration and elapsed > duration:   # all sent: the run waits for its transactions to be final
        clock = f"{duration:4.0f} s sent, waiting for final {elapsed - duration:.0f} s"
    else:
        clock = f"{elapsed:4.0f} s" + (f" of {duration:.0f}" if duration else "")
    parts = [f"{label}  " if label else "", clock, f"  offered {count('offered')}", f"  accepted {count('accepted')}",
             f"  included {count('included')}", f"  final {count('committed')}",
             f"  p99 {p99:,.0f} ms" if isinstance(p99, (int, float)) else "  p99 -",
             f"  resent {count('resend_txs')}" if document.get("resend_txs") else ""]
    return "".join(parts)


class LiveLine:
    """One terminal line that the status callback rewrites in place (rich's Live).

    `enabled=False` (not a terminal, --quiet) makes every call a no-op, so callers need
    no conditionals of their own.
    """

    def __init__(self, console: Any, *, enabled: bool) -> None:
        self._console = console
        self._live: Any = None
        self._enabled = enabled
        self.label = ""

    def __enter__(self) -> LiveLine:
        if self._enabled:
            from rich.live import Live

            self._live = Live("", console=self._console, auto_refresh=False, transient=True)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)
            self._live = None

    def update(self, document: dict[str, Any]) -> None:
        if self._live is not None and document.get("running"):
            from rich.text import Text

            self._live.update(Text(progress_line(document, self.label)), refresh=True)
