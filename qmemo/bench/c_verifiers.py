"""The `verify_implementations` step of `qmemo bench c`: every scheme's verifiers side by side.

Why a step of its own: "which scheme can a shard afford" depends on which verifier runs,
and the figures only compare when they come from one run on one machine. This step
measures, in one run:

- every post-quantum scheme of the registry through liboqs 0.13 (`OQS_SIG_verify`, its
  own dispatch: the AVX2 code where the CPU has it) - the reference of every ratio. The
  setup builds it with its AVX2 ML-DSA verify made FIPS 204's (scripts/liboqs/
  mldsa_conformance.cmake), and every row names that build (`build_name()`);
- ML-DSA's AVX2 verify as liboqs 0.13 ships it, without that patch (bench_c's
  mldsa-conformance, a reference row `shipped` per parameter set): timed in one program
  with the conforming build's OQS_SIG_verify, round by round, its ratio to that the
  patch's cost, with a control (the conforming objects linked as the shipped ones) that
  shows the figure's resolution; the rows say when it looks disturbed (CONFORMANCE_SPREAD);
- qMEMO's own verifiers where a scheme has one, uncached and cached, one signature per
  call and in batches: the fast Falcon verifier (qmemo/crypto/native/falcon_vt.c:
  variable-time hash-to-point, decoded keys cached, four points hashed at once in a
  batch) and the ML-DSA verifier (native/mldsa_vt.c: expanded keys cached);
- Pornin's fn-dsa 0.4 (qmemo.bench.c_fndsa): FN-DSA, NOT signature-compatible with
  Falcon round 3, a speed reference only, labelled so in every row.

Each scheme's modes are timed by one counter (bench_c/verify_count.h: falcon_count,
mldsa_count, or oqs-count for a scheme with liboqs's verifier only), interleaved round by
round, so a busy machine slows a scheme's modes alike; the counters and fn-dsa take turns
in short slices (SLICES per profile), and each rate is all its verifies over all its
time. Every row says what its time depends on (`timing`): qMEMO's rows are variable-time
where they are - a variable-time hash-to-point, or a cached key that a verify finds
faster than a new one - and say so.

Instructions per verify come from callgrind when valgrind is installed (noise-free, the
same on every run of one build): bench_c/count.sh counts only each counter's measured
verifies. The keys and signatures are made once per step (QMEMO_COUNT_INPUTS), not per
turn: signing SPHINCS+-128s takes a third of a second a signature. Without valgrind the
counts are null; without a counter its rows are missing and the step log says why.

It writes `verify_implementations.json` (SCHEMA), which qmemo.bench.c_collect copies
into summary.json. Nothing is printed; the log gets every command and its output.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from qmemo.bench import c_fndsa
from qmemo.bench.c_tools import json_lines, run_logged
from qmemo.paths import BENCH_C_DIR, DEPS_DIR

SCHEMA = "qmemo-verify-implementations/1"   # rows gained mode, timing and calls: optional, so still /1
FILE = "verify_implementations.json"
FALCON_COUNT = DEPS_DIR / "native" / "falcon" / "falcon_count"
MLDSA_COUNT = DEPS_DIR / "native" / "mldsa" / "mldsa_count"
OQS_COUNT = BENCH_C_DIR / "build" / "oqs-count"        # built with qmemo-bench (bench_c/Makefile)
# Built by bench_c/Makefile where the setup installed liboqs's ML-DSA archives (AVX2 CPUs).
MLDSA_CONFORMANCE = BENCH_C_DIR / "build" / "mldsa-conformance"
CONFORMANCE_MODES = ("liboqs", "conforming", "shipped")   # mldsa_conformance.c's modes, in its order
COUNT_SCRIPT = BENCH_C_DIR / "count.sh"
MESSAGE_BYTES = 64      # the counters' message size (a BLAKE3-512 signing digest): fn-dsa gets the same
OURS = ("liboqs", "uncached", "cached", "batch")        # falcon_count's and mldsa_count's modes


@dataclass(frozen=True, slots=True)
class Target:
    """One scheme's counter and sizes."""

    scheme: str
    program: Path
    modes: tuple[str, ...]
    ring: int           # distinct signatures per pass
    weight: float       # its share of the profile's seconds (the headline schemes get all of it)
    counted: int        # verifies counted under callgrind at the quick size


TARGETS = (
    Target("Falcon-512", FALCON_COUNT, OURS, 200, 1.0, 100),
    Target("Falcon-padded-512", FALCON_COUNT, OURS, 100, 0.3, 20),
    Target("Falcon-1024", FALCON_COUNT, OURS, 100, 0.3, 20),
    Target("Falcon-padded-1024", FALCON_COUNT, OURS, 100, 0.3, 20),
    Target("ML-DSA-44", MLDSA_COUNT, OURS, 200, 1.0, 100),
    Target("ML-DSA-65", MLDSA_COUNT, OURS, 100, 0.3, 20),
    Target("ML-DSA-87", MLDSA_COUNT, OURS, 100, 0.3, 20),
    Target("SPHINCS+-SHA2-128f-simple", OQS_COUNT, ("liboqs",), 20, 0.3, 4),
    Target("SPHINCS+-SHA2-128s-simple", OQS_COUNT, ("liboqs",), 6, 0.3, 2),
    Target("MAYO-1", OQS_COUNT, ("liboqs",), 100, 0.3, 20),
    Target("MAYO-2", OQS_COUNT, ("liboqs",), 100, 0.3, 20),
)
# The as-shipped ML-DSA verify against the conforming one; its own programs, so keyed apart.
CONFORMANCE_TARGETS = (
    Target("ML-DSA-44", MLDSA_CONFORMANCE, CONFORMANCE_MODES, 200, 1.0, 100),
    Target("ML-DSA-65", MLDSA_CONFORMANCE, CONFORMANCE_MODES, 100, 0.3, 20),
    Target("ML-DSA-87", MLDSA_CONFORMANCE, CONFORMANCE_MODES, 100, 0.3, 20),
)
# The two checks cost well under 1% of a verify (about a thousand instructions in 250,000
# to 680,000), so a turn-to-turn spread of the shipped/liboqs ratio past this, or the
# control (identical code) this far from 1, says the machine or the code's placement, not
# the patch, moved the figure: the row and the step's notes say so.
CONFORMANCE_SPREAD = 0.03
HEADLINE = ("Falcon-512", "ML-DSA-44")       # the verify-only first-screen run times these only
FNDSA_RING = 200

# Per profile: seconds of timing for a weight-1 program (fn-dsa included), turns each, and
# how many times the quick count of verifies callgrind counts (0: none - the smoke profile
# keeps the test suite short; its figures mean nothing anyway).
SECONDS = {"full": 3.0, "quick": 1.0, "smoke": 0.1}
SLICES = {"full": 6, "quick": 4, "smoke": 1}
COUNTED_SCALE = {"full": 2, "quick": 1, "smoke": 0}


def run_verify_implementations(folder: Path, profile: str, log: IO[str], *,
                               headline_only: bool = False) -> tuple[bool, str | None]:
    """Measure, write FILE into `folder`; (ok, why not). A missing cargo is a note, not a failure.

    `headline_only` (the verify-only first-screen baseline): Falcon-512's and ML-DSA-44's
    verifiers timed, nothing else - no callgrind counts and no fn-dsa build, which would
    take longer than everything else in that run together.
    """
    notes: list[str] = []
    targets = [t for t in TARGETS if t.scheme in HEADLINE] if headline_only else list(TARGETS)
    conformance = [] if headline_only else _conformance_targets(notes)
    load_at_start = os.getloadavg()[0]
    seconds, slices = SECONDS[profile], SLICES[profile]
    scale = 0 if headline_only else COUNTED_SCALE[profile]
    with tempfile.TemporaryDirectory(prefix="qmemo-verify-inputs-") as inputs:
        env = {**os.environ, "QMEMO_COUNT_INPUTS": inputs}
        fndsa_built = False if headline_only else c_fndsa.build(log, notes)
        timed, fndsa = _take_turns(targets + conformance, seconds / slices, slices, fndsa_built, env, log, notes)
        counts = _instructions(targets + conformance, scale, log, notes)
    rows: list[dict[str, Any]] = []
    for target in targets:
        raw = [_raw_row(target, line, counts.get(_key(target) + (line["mode"],)))
               for line in timed.get(_key(target), [])]
        rows += _rows(raw, f"{seconds * target.weight / slices:g} s x {slices}")
        shipped = next((t for t in conformance if t.scheme == target.scheme), None)
        if shipped is not None and _key(shipped) in timed:
            rows.append(_shipped_row(shipped, timed[_key(shipped)], counts, f"{seconds * shipped.weight / slices:g} s x "
                                     f"{slices}", load_at_start, notes))
    if not headline_only:
        liboqs_512 = next((r["ops_per_s"] for r in rows if r["scheme"] == "Falcon-512" and r["mode"] == "liboqs"), None)
        fndsa_rows = c_fndsa.rows(fndsa, f"{seconds / slices:g} s x {slices}", 100 * scale, FNDSA_RING, MESSAGE_BYTES,
                                  log, notes)
        rows += [_row(r, liboqs_512) for r in fndsa_rows]      # a speed reference: against Falcon-512's liboqs
    if headline_only:
        notes.append("verify-only run: Falcon-512 and ML-DSA-44 only, no instruction counts, no fn-dsa reference")
    ok = all(_key(t) in timed for t in targets)
    document = {"schema": SCHEMA, "ok": ok, "profile": profile, "seconds_per_program": seconds, "turns": slices,
                "message_bytes": MESSAGE_BYTES, "rows": rows, "notes": notes}
    (folder / FILE).write_text(json.dumps(document, indent=2) + "\n")
    for note in notes:
        log.write(f"verify_implementations: {note}\n")
    return ok, None if ok else "; ".join(notes) or "a counter gave no rows"


def conformance_lines(rows: Sequence[Any]) -> list[str]:
    """One line per ML-DSA set with a `shipped` row (VerifyImplementation rows): the
    conforming liboqs build's rate and the as-shipped code's, timed in one program (the
    row's ratio is between the two), and whether that looks disturbed. Both are
    constant-time in the message (nothing cached)."""
    lines = []
    for shipped in (r for r in rows if r.mode == "shipped" and r.ops_per_s and r.ratio_to_liboqs):
        disturbed = shipped.source.split("LOOKS DISTURBED: ", 1)
        lines.append(
            f"{shipped.scheme} liboqs verify: conforming build {shipped.ops_per_s / shipped.ratio_to_liboqs:,.0f}/s, "
            f"as shipped {shipped.ops_per_s:,.0f}/s (one program, round by round; both constant-time in the message): "
            f"conforming / as shipped {1 / shipped.ratio_to_liboqs:.3f}"
            + (f" - looks disturbed: {disturbed[1]}" if len(disturbed) == 2 else ""))
    return lines


def read_rows(folder: Path) -> list[dict[str, Any]] | None:
    """The rows of FILE in `folder` if the step wrote it and it completed, else None."""
    try:
        document = json.loads((folder / FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(document, dict) or document.get("schema") != SCHEMA or not document.get("ok"):
        return None
    return document["rows"]


def _rows(raw: list[dict[str, Any]], timing: str) -> list[dict[str, Any]]:
    """One scheme's rows, each ratio to its own liboqs row."""
    liboqs = next((r["ops_per_s"] for r in raw if r["mode"] == "liboqs"), None)
    return [_row({**r, "source": r["source"].format(timing=timing)}, liboqs) for r in raw]


def _row(raw: dict[str, Any], liboqs_rate: float | None) -> dict[str, Any]:
    rate = raw["ops_per_s"]
    return {
        "scheme": raw["scheme"], "implementation": raw["implementation"],
        "ops_per_s": rate, "us_per_op": 1e6 / rate if rate else None,
        "ratio_to_liboqs": rate / liboqs_rate if rate and liboqs_rate else None,
        "instructions_per_verify": raw["instructions_per_verify"],
        "hash_to_point": raw["hash_to_point"], "public_key": raw["public_key"],
        "signature_compatible_with_liboqs": raw["compatible"], "source": raw["source"],
        "mode": raw["mode"], "timing": raw["timing"], "calls": raw["calls"],
    }


# --- what each row is --------------------------------------------------------------------------

def _raw_row(target: Target, line: dict[str, Any], instructions: int | None) -> dict[str, Any]:
    """A counter's JSON line as a row: which code, its timing, its key handling."""
    mode, family = line["mode"], target.scheme.split("-")[0]
    cached = mode in ("cached", "batch")
    calls = ("batch: four points hashed at once" if family == "Falcon" else "batch") if mode == "batch" else "single"
    if family == "Falcon":
        from qmemo.crypto.falcon_vt import CODE_PATHS

        key = "cached decoded key" if cached else "key decoded per verify"
        h2p = "constant-time" if mode == "liboqs" else "variable-time"
        timing = f"{h2p} hash-to-point" + ("; cached key" if cached else "")
        code = (f"{build_name()} PQClean {_cpu_path()}" if mode == "liboqs" else
                f"qMEMO fast verifier ({CODE_PATHS.get(line['implementation'], line['implementation'])})")
        implementation = f"{code}, {h2p} hash-to-point, {key}"
    elif family == "ML":
        from qmemo.crypto.mldsa_vt import CODE_PATHS

        key, h2p = ("cached expanded key" if cached else "key expanded per verify"), "none"
        timing = "variable-time: cached key" if cached else "no cache; time independent of the message"
        code = (f"{build_name()} pq-crystals {_cpu_path()}" if mode == "liboqs" else
                f"qMEMO ML-DSA verifier ({CODE_PATHS.get(line['implementation'], line['implementation'])})")
        implementation = f"{code}, {key}"
    else:
        key, h2p, timing = "key per verify", "none", "liboqs as shipped; no cache"
        implementation = f"{build_name()} {_cpu_path()}"
    return {"scheme": target.scheme, "mode": mode, "ops_per_s": line["ops_per_s"], "implementation": implementation,
            "instructions_per_verify": instructions, "hash_to_point": h2p, "public_key": key, "timing": timing,
            "calls": calls, "compatible": True,
            "source": f"{target.program.name} time ({{timing}}, in turns with the other verifiers) {target.ring}"}


def _cpu_path() -> str:
    from qmemo.crypto.liboqs import cpu_extensions

    return "AVX2" if cpu_extensions()["AVX2"] else "portable"


def build_name() -> str:
    """The liboqs build measured, as the setup names it ("liboqs 0.13.0 + qMEMO ML-DSA
    conformance patch <id>"); a liboqs without that record is named as unpatched."""
    from qmemo.crypto.liboqs import build_info, liboqs_version

    name = build_info().get("build_name")
    return str(name) if name else f"liboqs {liboqs_version()} (no qMEMO conformance patch recorded)"


def _conformance_targets(notes: list[str]) -> list[Target]:
    """The as-shipped ML-DSA A/B's targets where it can run here (else a note says why not)."""
    if _cpu_path() != "AVX2":
        notes.append("no AVX2 here: liboqs runs its portable ML-DSA, which needs no conformance patch; "
                     "no `shipped` rows")
        return []
    if not MLDSA_CONFORMANCE.exists():
        notes.append(f"{MLDSA_CONFORMANCE} is missing (scripts/setup.sh installs liboqs's ML-DSA archives, "
                     f"`make -C bench_c` builds it): no `shipped` rows")
        return []
    return list(CONFORMANCE_TARGETS)


def _key(target: Target) -> tuple[str, str]:
    """A target's turns and counts: by scheme and program (ML-DSA has two programs)."""
    return target.scheme, target.program.name


def _shipped_row(target: Target, lines: list[dict[str, Any]], counts: dict[tuple[str, str, str], int], timing: str,
                 load_at_start: float, notes: list[str]) -> dict[str, Any]:
    """The as-shipped verify's row: its rate and its ratio to OQS_SIG_verify of the
    conforming build, timed in one program round by round. The same program times the
    conforming objects linked as the shipped ones are: identical code, so their ratio to
    OQS_SIG_verify is 1 but for how the code lies in memory and the machine's noise - the
    resolution of the figure. A spread between turns, that control, or the load past
    CONFORMANCE_SPREAD / the cores marks the row as disturbed."""
    by_mode = {line["mode"]: line for line in lines}
    shipped, conforming, liboqs = by_mode["shipped"], by_mode["conforming"], by_mode["liboqs"]
    ratio = shipped["ops_per_s"] / liboqs["ops_per_s"]
    control = conforming["ops_per_s"] / liboqs["ops_per_s"]
    per_turn = [s / o for s, o in zip(shipped["turn_rates"], liboqs["turn_rates"], strict=True)]
    spread = (max(per_turn) - min(per_turn)) / ratio if len(per_turn) > 1 else 0.0
    cores = os.cpu_count() or 1
    disturbed = [why for why, bad in (
        (f"the ratio moved {spread:.1%} between turns", spread > CONFORMANCE_SPREAD),
        (f"the identical conforming objects ran at {control:.3f}x OQS_SIG_verify", abs(control - 1) > CONFORMANCE_SPREAD),
        (f"load average {load_at_start:.1f} on {cores} cores at the start", load_at_start > cores)) if bad]
    instructions = {mode: counts.get(_key(target) + (mode,)) for mode in CONFORMANCE_MODES}
    counted = (f"; callgrind: {instructions['liboqs']:,} instructions conforming (OQS_SIG_verify), "
               f"{instructions['shipped']:,} as shipped" if instructions["shipped"] and instructions["liboqs"] else "")
    verdict = f"LOOKS DISTURBED: {'; '.join(disturbed)}" if disturbed else "undisturbed"
    if disturbed:
        notes.append(f"{target.scheme} conformance A/B {verdict.lower()} (over {CONFORMANCE_SPREAD:.0%} or the "
                     f"cores): compare the instruction counts, or run `qmemo bench c` again on a quiet machine")
    source = (f"{target.program.name} time ({timing}, in turns with the other verifiers) {target.ring}: x liboqs is "
              f"against OQS_SIG_verify of the conforming build timed with it, round by round "
              f"({liboqs['ops_per_s']:,.0f}/s); control, the conforming objects linked as these: {control:.3f}x; "
              f"per-turn ratios {', '.join(f'{r:.3f}' for r in per_turn)}{counted}; {verdict}")
    return {
        "scheme": target.scheme, "implementation": "liboqs 0.13.0 pq-crystals AVX2 as shipped, NOT FIPS 204's (no z "
        "bound, use_hint r0 = 0): the conformance patch's reference only, key expanded per verify",
        "ops_per_s": shipped["ops_per_s"], "us_per_op": 1e6 / shipped["ops_per_s"], "ratio_to_liboqs": ratio,
        "instructions_per_verify": instructions["shipped"], "hash_to_point": "none",
        "public_key": "key expanded per verify", "signature_compatible_with_liboqs": True, "source": source,
        "mode": "shipped", "timing": "no cache; time independent of the message", "calls": "single",
    }


# --- timing: the programs take turns ----------------------------------------------------------

def _take_turns(targets: list[Target], slice_s: float, slices: int, fndsa_built: bool, env: dict[str, str],
                log: IO[str], notes: list[str]) -> tuple[dict[tuple[str, str], list[dict[str, Any]]], dict[str, float]]:
    """Each (scheme, program)'s counter lines, and fn-dsa's rates by mode, each summed over `slices`
    alternating turns (verifies and seconds added up, so a rate is all verifies over all
    time). A scheme whose counter is missing or failed in any turn has no lines."""
    turns: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    live = []
    for target in targets:
        if target.program.exists():
            live.append(target)
        else:
            notes.append(f"{target.program} is missing (run scripts/setup.sh): no {target.scheme} rows "
                         f"from it")
    fndsa: dict[str, dict[str, Any]] | None = {} if fndsa_built else None
    for _ in range(slices):
        for target in list(live):
            lines = json_lines(run_logged([str(target.program), "time", f"{slice_s * target.weight:g}",
                                           str(target.ring), target.scheme], log, env=env))
            if lines is None:
                notes.append(f"{target.program.name} time {target.scheme} failed (see the log): no rows from it")
                live.remove(target)
                turns.pop(_key(target), None)
                continue
            for line in lines:
                _add_turn(turns.setdefault(_key(target), {}), line["mode"], line, line["verifies"],
                          line["verifies"] / line["ops_per_s"])
        if fndsa is not None:
            modes = c_fndsa.time_turn(slice_s, FNDSA_RING, MESSAGE_BYTES, log)
            if modes is None:
                notes.append("qmemo-fndsa-bench failed (see the log): FN-DSA rows are null")
                fndsa = None
            else:
                for mode in modes:
                    _add_turn(fndsa, mode["mode"], mode, mode["ops"], mode["seconds"])
    timed = {key: list(_rates(by_mode).values()) for key, by_mode in turns.items()}
    return timed, {mode: rate["ops_per_s"] for mode, rate in _rates(fndsa or {}).items()}


def _rates(turns: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each mode's last turn's record, its rate replaced by all verifies over all seconds
    (and each turn's own rate kept, in order, as turn_rates)."""
    return {mode: {**t["last"], "ops_per_s": t["verifies"] / t["seconds"], "turn_rates": t["turn_rates"]}
            for mode, t in turns.items()}


def _add_turn(turns: dict[str, dict[str, Any]], mode: str, last: dict[str, Any], verifies: int,
              seconds: float) -> None:
    total = turns.setdefault(mode, {"verifies": 0, "seconds": 0.0, "turn_rates": []})
    total.update(verifies=total["verifies"] + verifies, seconds=total["seconds"] + seconds, last=last)
    total["turn_rates"].append(verifies / seconds if seconds else 0.0)


# --- instructions: callgrind ----------------------------------------------------------------------

def _instructions(targets: list[Target], scale: int, log: IO[str],
                  notes: list[str]) -> dict[tuple[str, str, str], int]:
    """(scheme, program, mode) -> instructions per verify, from bench_c/count.sh."""
    if not scale:
        return {}
    if shutil.which("valgrind") is None:
        notes.append("valgrind is not installed: instructions_per_verify is null")
        return {}
    counts: dict[tuple[str, str, str], int] = {}
    for target in targets:
        if not target.program.exists():
            continue
        lines = json_lines(run_logged([str(COUNT_SCRIPT), str(target.program), str(target.counted * scale),
                                       target.scheme, *target.modes], log))
        if lines is None:
            notes.append(f"count.sh failed for {target.scheme} (see the log): its instructions are null")
            continue
        counts.update({_key(target) + (line["mode"],): line["instructions_per_verify"] for line in lines})
    return counts
