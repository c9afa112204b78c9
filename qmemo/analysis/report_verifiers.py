"""Report section: every scheme's verifiers side by side, each scheme's best honest one, and
MEMO's headroom for those.

Why a section of its own: which verifier runs changes the answer to "which scheme can a
shard afford" as much as the hardware does, and a variable-time figure set next to a
constant-time one without saying so would mislead. So every rate here carries what its
time depends on (`timing`: a variable-time hash-to-point, a cached key, ...) and its key
handling; "best honest" means the fastest verifier of the scheme that gives liboqs's
verdicts on liboqs's signatures (never FN-DSA's, which is another scheme), with its
timing said next to it.

Figures come from summary.json's `verify_implementations` (qmemo.bench.c_verifiers: one
run, each scheme's modes interleaved, fn-dsa right after); the headroom is the pure
model's (qmemo.analysis.headroom) on those rates. Runs from before ML-DSA's verifier hold
Falcon-512's rows only, without `mode`/`timing`: those are read from the row's other
fields. The only arithmetic here is the model's, ratios the rows carry, and differences
of instruction counts the tables show. This module never reads anything but the Results
it is handed and never draws a plot.
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
from qmemo.bench.c_summary import VerifyImplementation
from qmemo.bench.c_verifiers import FILE

TITLE = "Verify implementations"
# The loads each implementation is set against: MEMO's two sharded scenarios at its own
# cross-shard share, and the whole target load on one shard.
SCENARIOS = (
    Scenario("conservative", CONSERVATIVE_TPS, CONSERVATIVE_SHARDS, CROSS_SHARD_SHARE),
    Scenario("target", TARGET_TPS, TARGET_SHARDS, CROSS_SHARD_SHARE),
    Scenario("single shard, target load", TARGET_TPS, 1, 0.0),
)


def mode(row: VerifyImplementation) -> str:
    """The row's mode; for a run from before the field, read from its other fields."""
    if row.mode:
        return row.mode
    if not row.signature_compatible_with_liboqs:
        return "decoded" if row.public_key.startswith("cached") else "encoded"
    if row.hash_to_point == "constant-time":
        return "liboqs"
    return "cached" if row.public_key.startswith("cached") else "uncached"


def timing(row: VerifyImplementation) -> str:
    """What the row's time depends on (older runs: from its hash-to-point and key)."""
    if row.timing:
        return row.timing
    cached = "; cached key" if row.public_key.startswith("cached") else ""
    return f"{row.hash_to_point} hash-to-point{cached}"


def constant_time(row: VerifyImplementation) -> str:
    """"yes" or "no: <why>" - never left for the reader to infer from a rate."""
    said = timing(row)
    if "variable-time" in said:
        return "no: " + said
    if "constant-time" in said:
        return "yes: " + said
    return "in the message: " + said if "independent of the message" in said else said


def label(row: VerifyImplementation) -> str:
    """A short name that always says its timing, and whether it is FN-DSA."""
    m = mode(row)
    who = ("liboqs" if m in ("liboqs", "shipped") else "qMEMO" if row.signature_compatible_with_liboqs
           else "fn-dsa (FN-DSA, not compatible)")
    return f"{row.scheme} {who} {m}, {timing(row)}"


# A scheme's best verifier is the one a node runs: qMEMO's in batches, else one at a time with a
# cached key, else liboqs's. Chosen by what it is, not by which rate came out highest: on a
# busy machine a single run can rank an uncached verify above a cached one.
_BEST = ("batch", "cached", "uncached", "liboqs")


def best_honest(rows: tuple[VerifyImplementation, ...]) -> list[tuple[VerifyImplementation, VerifyImplementation]]:
    """Per scheme, in the run's order: (its liboqs row, its best liboqs-compatible row)."""
    schemes = list(dict.fromkeys(r.scheme for r in rows if r.signature_compatible_with_liboqs))
    pairs = []
    for scheme in schemes:
        own = {mode(r): r for r in rows if r.scheme == scheme and r.signature_compatible_with_liboqs and r.ops_per_s}
        if "liboqs" in own:
            pairs.append((own["liboqs"], next(own[m] for m in _BEST if m in own)))
    return pairs


def verify_implementations_section(results: Results, plot_dir: Path) -> Section:
    rows = results.baseline.summary.verify_implementations
    if not rows:
        return Section(TITLE, "This run has no `verify_implementations` (a `qmemo bench c` from before the fast "
                              "verifier, or the step did not run): run `.venv/bin/qmemo bench c` again.")
    source = results.source("verify_implementations") if "verify_implementations" in \
        results.baseline.summary.steps else FILE
    pairs = best_honest(rows)
    body = [
        "One run of `qmemo bench c` (step `verify_implementations`): each scheme's liboqs 0.13 verify and qMEMO's "
        "own verifiers where it has one, timed interleaved round by round (a busy machine slows them alike), then "
        "Pornin's fn-dsa on messages of the same size. **Timing** says what a verify's time depends on: Falcon's "
        "**constant-time** hash-to-point protects a secret message, and a transaction is public, so the fast Falcon "
        "verifier uses the **variable-time** one; a **cached key** makes a verify of a key seen before faster than "
        "one of a new key. The liboqs rows are the build the setup makes, named in each row (liboqs 0.13.0 + qMEMO "
        "ML-DSA conformance patch <id>: its AVX2 ML-DSA verify made FIPS 204's); an ML-DSA row of mode `shipped` is "
        "that verify as liboqs 0.13 ships it, which accepts signatures FIPS 204 rejects - a reference only, its "
        "\"x liboqs\" against the conforming build timed with it, so it is the patch's cost (docs/methodology.md, "
        "section 11b). qMEMO's verifiers give the same verdicts as those liboqs rows. "
        "**FN-DSA is not signature-compatible with Falcon round 3**: its rows are a speed reference only.",
        "### Each scheme's best honest verifier",
        "The verifier a qMEMO node runs for each scheme (qMEMO's own in batches where the scheme has one, else "
        "liboqs's) - one that gives liboqs's verdicts on liboqs's signatures - against liboqs's own, same run.",
        table(("scheme", "best verifier", "constant-time?", "verify/s", "x liboqs", "instructions/verify",
               "liboqs verify/s", "liboqs instructions/verify"),
              [(best.scheme, f"{'liboqs' if mode(best) == 'liboqs' else 'qMEMO'} {mode(best)}", constant_time(best),
                num(best.ops_per_s), times(best.ratio_to_liboqs, 2), num(best.instructions_per_verify),
                num(liboqs.ops_per_s), num(liboqs.instructions_per_verify)) for liboqs, best in pairs], "lllrrrrr"),
        source_note(results.summary_source, source),
        "### Every verifier",
        table(("scheme", "implementation", "mode", "hash-to-point", "public key", "timing", "verify/s", "µs/verify",
               "x liboqs (same run)", "instructions/verify"),
              [(r.scheme, r.implementation, mode(r), r.hash_to_point, r.public_key, timing(r), num(r.ops_per_s),
                num(r.us_per_op, 2), times(r.ratio_to_liboqs, 2), num(r.instructions_per_verify)) for r in rows],
              "llllllrrrr"),
        *_instruction_steps(rows),
        source_note(results.summary_source, source),
        "### Headroom per implementation",
        "MEMO's loads (needed per shard = TPS / shards x (1 + cross-shard share)) against one core verifying "
        "with each scheme's liboqs verify and its best honest verifier; the same model as the headroom section.",
        _headroom_table(pairs, results.summary_source),
        source_note(results.summary_source),
    ]
    return Section(TITLE, "\n\n".join(body))


# What each cheaper mode saves over the one before it, per family (the rows' own counts).
_STEPS = {
    "Falcon-512": (("liboqs", "liboqs: constant-time hash-to-point, key decoded per verify"),
                   ("uncached", "variable-time hash-to-point instead"),
                   ("cached", "the key's decoded NTT form cached"),
                   ("batch", "four signatures' points hashed at once (four-lane Keccak)")),
    "ML-DSA-44": (("liboqs", "liboqs: A expanded, H(pk) and NTT(t1) computed per verify"),
                  ("uncached", "qMEMO's verifier, key expanded per verify (FIPS 204's checks)"),
                  ("cached", "A-hat, tr and NTT(t1 * 2^d) cached"),
                  ("batch", "in a batch call (nothing shared between signatures)")),
}


def _instruction_steps(rows: tuple[VerifyImplementation, ...]) -> list[str]:
    """Where liboqs's instructions go, read from the differences between a scheme's rows."""
    out = []
    for scheme, steps in _STEPS.items():
        counts = {mode(r): r.instructions_per_verify for r in rows if r.scheme == scheme
                  and r.signature_compatible_with_liboqs}
        present = [(m, what) for m, what in steps if counts.get(m) is not None]
        if len(present) < 2:
            continue
        cells, before = [], None
        for m, what in present:
            cells.append((what, num(counts[m]), num(before - counts[m]) if before is not None else ""))
            before = counts[m]
        out.append(table((f"step ({scheme}, callgrind)", "instructions/verify", "saved"), cells, "lrr"))
    return out or ["Instruction counts need valgrind (callgrind) on the machine that ran the benchmark."]


def _headroom_table(pairs: list[tuple[VerifyImplementation, VerifyImplementation]], source: str) -> str:
    chosen = []
    for liboqs, best in pairs:
        chosen += [liboqs] if best is liboqs else [liboqs, best]
    capacities = [Capacity(label(r), r.ops_per_s, source) for r in chosen if r.ops_per_s]
    cells = []
    for scenario in SCENARIOS:
        assessed = [assess(scenario, c) for c in capacities]
        cells.append((scenario_label(scenario), num(assessed[0].required_verify_rate, 1) if assessed else None,
                      *(f"{headroom_x(a.headroom)} {a.verdict}" for a in assessed)))
    return table(("scenario", "needed/s per shard", *(c.label for c in capacities)), cells,
                 "lr" + "l" * len(capacities))
