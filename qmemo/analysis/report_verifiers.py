"""Report section: the Falcon-512 verify implementations side by side, and MEMO's headroom for each.

Why a section of its own: which verifier runs changes the answer to "can a shard afford
post-quantum verification" as much as the hardware does, and a constant-time figure set
next to a variable-time one without saying so would mislead. So every Falcon speed here
carries its hash-to-point (constant-time or variable-time) and its key handling.

Figures come from summary.json's `verify_implementations` (qmemo.bench.c_falcon: one
run, liboqs and the fast verifier interleaved, fn-dsa right after); the headroom is the
pure model's (qmemo.analysis.headroom) on those rates. The only arithmetic here is the
model's and the difference between two instruction counts the table shows. This module
never reads anything but the Results it is handed and never draws a plot.
"""

from __future__ import annotations

from pathlib import Path

from qmemo.analysis.headroom import Capacity, Scenario, assess
from qmemo.analysis.markdown import Section, headroom_x, num, source_note, table, times
from qmemo.analysis.memo import (
    CONSERVATIVE_SHARDS,
    CONSERVATIVE_TPS,
    CROSS_SHARD_SHARE,
    TARGET_SHARDS,
    TARGET_TPS,
)
from qmemo.analysis.report_memo import scenario_label
from qmemo.analysis.results import Results
from qmemo.bench.c_falcon import FILE
from qmemo.bench.c_summary import VerifyImplementation

TITLE = "Falcon verify implementations"
# The loads each implementation is set against: MEMO's two sharded scenarios at its own
# cross-shard share, and the whole target load on one shard.
SCENARIOS = (
    Scenario("conservative", CONSERVATIVE_TPS, CONSERVATIVE_SHARDS, CROSS_SHARD_SHARE),
    Scenario("target", TARGET_TPS, TARGET_SHARDS, CROSS_SHARD_SHARE),
    Scenario("single shard, target load", TARGET_TPS, 1, 0.0),
)


def label(row: VerifyImplementation) -> str:
    """A short name that always says constant- or variable-time, and whether it is FN-DSA."""
    who = ("liboqs" if row.hash_to_point == "constant-time" and row.signature_compatible_with_liboqs
           else "fast verifier" if row.signature_compatible_with_liboqs else "fn-dsa (FN-DSA, not compatible)")
    key = "cached key" if row.public_key.startswith("cached") else "key per verify"
    return f"{who}, {row.hash_to_point} h2p, {key}"


def verify_implementations_section(results: Results, plot_dir: Path) -> Section:
    rows = results.baseline.summary.verify_implementations
    if not rows:
        return Section(TITLE, "This run has no `verify_implementations` (a `qmemo bench c` from before the fast "
                              "verifier, or the step did not run): run `.venv/bin/qmemo bench c` again.")
    source = results.source("verify_implementations") if "verify_implementations" in \
        results.baseline.summary.steps else FILE
    body = [
        "One run of `qmemo bench c` (step `verify_implementations`): liboqs's Falcon-512 verify and qMEMO's fast "
        "verifier, timed interleaved round by round (a busy machine slows them alike), then Pornin's fn-dsa on "
        "messages of the same size. **Constant-time** hash-to-point protects a secret message; a transaction is "
        "public, so the fast verifier uses the **variable-time** one and gives liboqs's verdict for every input "
        "(docs/methodology.md, section 11). **FN-DSA is not signature-compatible with Falcon round 3**: its rows "
        "are a speed reference only.",
        table(("scheme", "implementation", "hash-to-point", "public key", "verify/s", "µs/verify",
               "x liboqs (same run)", "instructions/verify"),
              [(r.scheme, r.implementation, r.hash_to_point, r.public_key, num(r.ops_per_s), num(r.us_per_op, 2),
                times(r.ratio_to_liboqs, 2), num(r.instructions_per_verify)) for r in rows], "llllrrrr"),
        *_instruction_steps(rows),
        source_note(results.summary_source, source),
        "### Headroom per implementation",
        "MEMO's loads (needed per shard = TPS / shards x (1 + cross-shard share)) against one core verifying "
        "with each implementation; the same model as the headroom section.",
        _headroom_table(rows, results.summary_source),
        source_note(results.summary_source),
    ]
    return Section(TITLE, "\n\n".join(body))


def _instruction_steps(rows: tuple[VerifyImplementation, ...]) -> list[str]:
    """Where liboqs's instructions go, read from the differences between the Falcon rows."""
    falcon = [r for r in rows if r.signature_compatible_with_liboqs]
    counts = [r.instructions_per_verify for r in falcon]
    if len(falcon) != 3 or None in counts:
        return ["Instruction counts need valgrind (callgrind) on the machine that ran the benchmark."]
    liboqs, uncached, cached = counts
    return [table(("step (Falcon-512, callgrind)", "instructions/verify", "saved"), [
        ("liboqs: constant-time hash-to-point, key decoded per verify", num(liboqs), ""),
        ("variable-time hash-to-point instead", num(uncached), num(liboqs - uncached)),
        ("the key's decoded NTT form cached", num(cached), num(uncached - cached)),
    ], "lrr")]


def _headroom_table(rows: tuple[VerifyImplementation, ...], source: str) -> str:
    measured = [r for r in rows if r.ops_per_s]
    capacities = [Capacity(label(r), r.ops_per_s, source) for r in measured]
    cells = []
    for scenario in SCENARIOS:
        assessed = [assess(scenario, c) for c in capacities]
        cells.append((scenario_label(scenario), num(assessed[0].required_verify_rate, 1) if assessed else None,
                      *(f"{headroom_x(a.headroom)} {a.verdict}" for a in assessed)))
    return table(("scenario", "needed/s per shard", *(c.label for c in capacities)), cells,
                 "lr" + "l" * len(capacities))
