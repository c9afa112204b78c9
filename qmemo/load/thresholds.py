"""Pass/fail thresholds on a finished run, and `qmemo gen`'s exit codes.

A load test in CI needs an answer a script can branch on: `qmemo gen --max-p99-ms X
--min-committed-share Y` judges the run's summary against the user's bounds, and a
missed bound has an exit code of its own, so "the chain was too slow" is never mistaken
for "the generator broke". The judgement reads summary.json's figures (the honest
intended -> committed p99, committed TPS over target TPS) and re-measures nothing.

Pure: no I/O.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from qmemo.load.summary import LoadSummary

# Every exit status of `qmemo gen` (docs/devnet.md lists them; tests check each).
EXIT_OK = 0                 # the run ended and every planned transaction is accounted for
EXIT_FAILED = 1             # an error (one red line) or planned transactions unaccounted for
EXIT_USAGE = 2              # argparse: unknown flag or a value of the wrong type
EXIT_THRESHOLD_MISSED = 3   # the run is sound but missed --max-p99-ms or --min-committed-share
EXIT_INVARIANTS = 4         # a sharded run whose invariants failed: supply not conserved, or a
                            # cross-shard transfer not credited exactly once (qmemo.load.shard_summary)
EXIT_INTERRUPTED = 130      # Ctrl-C before the run could finish its files


@dataclass(frozen=True, slots=True)
class Thresholds:
    max_p99_ms: float | None = None            # intended -> committed p99, at most
    min_committed_share: float | None = None   # committed TPS / target TPS, at least

    @property
    def any(self) -> bool:
        return self.max_p99_ms is not None or self.min_committed_share is not None


def missed(summary: LoadSummary, thresholds: Thresholds) -> list[str]:
    """One sentence per threshold the run missed (none: it met them all).

    A run that committed nothing measured no p99: that misses a p99 bound, since
    "unknown" cannot pass a gate.
    """
    out = []
    if thresholds.max_p99_ms is not None:
        p99 = summary.latency_ms.intended_to_committed.percentiles_ms.get("p99")
        if p99 is None or not math.isfinite(p99) or p99 > thresholds.max_p99_ms:
            shown = "not measured (nothing committed)" if p99 is None or not math.isfinite(p99) else f"{p99:,.1f} ms"
            out.append(f"p99 intended -> committed latency {shown} > --max-p99-ms {thresholds.max_p99_ms:g}")
    if thresholds.min_committed_share is not None:
        share = summary.committed_tps / summary.target_tps if summary.target_tps else 0.0
        if share < thresholds.min_committed_share:
            out.append(f"committed share {share:.3f} ({summary.committed_tps:,.1f} of {summary.target_tps:,.1f} TPS) "
                       f"< --min-committed-share {thresholds.min_committed_share:g}")
    return out


def exit_code(all_accounted: bool, missed_thresholds: list[str], invariants_hold: bool = True) -> int:
    """A broken run (transactions unaccounted for) outranks broken invariants, which outrank
    a missed threshold."""
    if not all_accounted:
        return EXIT_FAILED
    if not invariants_hold:
        return EXIT_INVARIANTS
    return EXIT_THRESHOLD_MISSED if missed_thresholds else EXIT_OK
