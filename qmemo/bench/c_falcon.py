"""The `verify_implementations` step of `qmemo bench c`: every Falcon-512 verifier side by side.

Why a step of its own: the question "how much verification can a shard afford" depends
on which verifier runs, and the figures only compare when they come from one run. This
step measures, on one machine in one run:

- liboqs 0.13 Falcon-512 (`OQS_SIG_verify`: constant-time hash-to-point, key decoded
  per call), the fast verifier without and with a cached key (qmemo/crypto/native/
  falcon_vt.c: variable-time hash-to-point, liboqs's verdict for every input) - all
  three timed by `falcon_count time`, interleaved round by round, so a busy machine
  slows all three alike (bench_c/falcon_vt/falcon_count.c);
- Pornin's fn-dsa 0.4 (bench_c/fndsa, built here with cargo), verify with a decoded and
  with an encoded key, on messages of the same size (64 bytes, a qMEMO signing digest).
  FN-DSA (FIPS 206 draft) is NOT signature-compatible with Falcon round 3 / liboqs: a
  speed reference only, labelled so in every row.

The two programs take turns in short slices (falcon_count, fn-dsa, falcon_count, ...;
SLICES per profile, the same total seconds each), and each rate is all its verifies
over all its time: on a machine shared with other work the load moves within seconds,
and a program timed in one block while the other ran in another would be compared
across different loads - the same reason falcon_count interleaves its three modes.

Instructions per verify come from callgrind when valgrind is installed (noise-free,
the same on every run of one build): bench_c/falcon_vt/count.sh counts only the
verifies of falcon_count; fn-dsa's count mode has no such marker, so it is run at two
counts and the difference is divided by the difference of the counts (key generation
and signing, identical in both runs, cancel out). Without valgrind the counts are null.
Without cargo the fn-dsa rows are null and the step log says why; the step still passes.

It writes `verify_implementations.json` ("qmemo-verify-implementations/1"), which
qmemo.bench.c_collect copies into summary.json. Nothing is printed; the log gets every
command and its output.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from qmemo.crypto.falcon_vt import CODE_PATHS
from qmemo.paths import BENCH_C_DIR, DEPS_DIR

SCHEMA = "qmemo-verify-implementations/1"
FILE = "verify_implementations.json"
FALCON_COUNT = DEPS_DIR / "native" / "falcon" / "falcon_count"
COUNT_SCRIPT = BENCH_C_DIR / "falcon_vt" / "count.sh"
FNDSA_DIR = BENCH_C_DIR / "fndsa"
FNDSA_TARGET = BENCH_C_DIR / "build" / "fndsa"          # CARGO_TARGET_DIR: gitignored with bench_c/build/
FNDSA_BINARY = FNDSA_TARGET / "release" / "qmemo-fndsa-bench"
MESSAGE_BYTES = 64      # falcon_count's message size (a BLAKE3-512 signing digest): fn-dsa gets the same
RING = 200              # distinct signatures per round, for both programs

# Per profile: seconds of timing per program, and verifies counted under callgrind (0: not
# counted - the smoke profile keeps the test suite short; its figures mean nothing anyway).
SECONDS = {"full": 3.0, "quick": 1.0, "smoke": 0.1}
SLICES = {"full": 6, "quick": 4, "smoke": 1}      # turns per program (see the module docstring)
COUNTED = {"full": 200, "quick": 100, "smoke": 0}

PER_VERIFY, CACHED = "key decoded per verify", "cached decoded key"
# falcon_count's modes -> how the row describes them.
_FALCON_MODES = {
    "liboqs": ("constant-time", PER_VERIFY),
    "uncached": ("variable-time", PER_VERIFY),
    "cached": ("variable-time", CACHED),
}


def run_verify_implementations(folder: Path, profile: str, log: IO[str], *,
                               falcon_only: bool = False) -> tuple[bool, str | None]:
    """Measure, write FILE into `folder`; (ok, why not). A missing cargo is a note, not a failure.

    `falcon_only` (the verify-only first-screen baseline): the three liboqs-compatible
    Falcon verifiers timed, nothing else - no callgrind counts and no fn-dsa build, which
    would take longer than everything else in that run together.
    """
    notes: list[str] = []
    seconds, slices = SECONDS[profile], SLICES[profile]
    counted = 0 if falcon_only else COUNTED[profile]
    fndsa_built = False if falcon_only else _build_fndsa(log, notes)
    timed_falcon, timed_fndsa = _take_turns(seconds / slices, slices, fndsa_built, log, notes)
    falcon = _falcon_rows(timed_falcon, f"{seconds / slices:g} s x {slices}", counted, log, notes)
    fndsa = [] if falcon_only else _fndsa_rows(timed_fndsa, f"{seconds / slices:g} s x {slices}", counted, log, notes)
    if falcon_only:
        notes.append("verify-only run: no instruction counts, no fn-dsa reference")
    liboqs_rate = next((r["ops_per_s"] for r in falcon if r["mode"] == "liboqs"), None)
    rows = [_row(r, liboqs_rate) for r in falcon + fndsa]
    document = {"schema": SCHEMA, "ok": bool(falcon), "profile": profile, "seconds_per_program": seconds,
                "turns": slices, "message_bytes": MESSAGE_BYTES, "ring": RING, "counted_verifies": COUNTED[profile] or None,
                "rows": rows, "notes": notes}
    (folder / FILE).write_text(json.dumps(document, indent=2) + "\n")
    for note in notes:
        log.write(f"verify_implementations: {note}\n")
    return bool(falcon), None if falcon else "; ".join(notes) or "falcon_count gave no rows"


def read_rows(folder: Path) -> list[dict[str, Any]] | None:
    """The rows of FILE in `folder` if the step wrote it and it completed, else None."""
    try:
        document = json.loads((folder / FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(document, dict) or document.get("schema") != SCHEMA or not document.get("ok"):
        return None
    return document["rows"]


def _row(raw: dict[str, Any], liboqs_rate: float | None) -> dict[str, Any]:
    rate = raw["ops_per_s"]
    return {
        "scheme": raw["scheme"], "implementation": raw["implementation"],
        "ops_per_s": rate, "us_per_op": 1e6 / rate if rate else None,
        "ratio_to_liboqs": rate / liboqs_rate if rate and liboqs_rate else None,
        "instructions_per_verify": raw["instructions_per_verify"],
        "hash_to_point": raw["hash_to_point"], "public_key": raw["public_key"],
        "signature_compatible_with_liboqs": raw["compatible"], "source": raw["source"],
    }


# --- timing: the two programs take turns --------------------------------------------------

def _take_turns(slice_s: float, slices: int, fndsa_built: bool, log: IO[str],
                notes: list[str]) -> tuple[list[dict[str, Any]] | None, dict[str, dict[str, Any]]]:
    """falcon_count's lines and fn-dsa's modes, each summed over `slices` alternating turns
    (verifies and seconds added up, so a rate is all verifies over all time); None / {}
    for a program that is missing or failed in any turn."""
    falcon: dict[str, dict[str, Any]] | None = {} if FALCON_COUNT.exists() else None
    fndsa: dict[str, dict[str, Any]] | None = {} if fndsa_built else None
    if falcon is None:
        notes.append(f"{FALCON_COUNT} is missing (run scripts/setup.sh): no Falcon rows")
    for _ in range(slices):
        if falcon is not None:
            lines = _json_lines(_run([str(FALCON_COUNT), "time", f"{slice_s:g}", str(RING), "Falcon-512"], log))
            if lines is None:
                notes.append("falcon_count time failed (see the log)")
                falcon = None
            else:
                for line in lines:
                    _add_turn(falcon, line["mode"], line, line["verifies"], line["verifies"] / line["ops_per_s"])
        if fndsa is not None:
            measured = _json_lines(_run([str(FNDSA_BINARY), "--seconds", f"{slice_s:g}", "--ring", str(RING),
                                         "--msg-bytes", str(MESSAGE_BYTES)], log))
            if measured is None:
                notes.append("qmemo-fndsa-bench failed (see the log): FN-DSA rows are null")
                fndsa = None
            else:
                for mode in measured[0]["modes"]:
                    _add_turn(fndsa, mode["mode"], mode, mode["ops"], mode["seconds"])
    return (list(_rates(falcon).values()) if falcon else None), (_rates(fndsa) if fndsa else {})


def _rates(turns: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each mode's last turn's record, its rate replaced by all verifies over all seconds."""
    return {mode: {**t["last"], "ops_per_s": t["verifies"] / t["seconds"]} for mode, t in turns.items()}


def _add_turn(turns: dict[str, dict[str, Any]], mode: str, last: dict[str, Any], verifies: int,
              seconds: float) -> None:
    total = turns.setdefault(mode, {"verifies": 0, "seconds": 0.0})
    total.update(verifies=total["verifies"] + verifies, seconds=total["seconds"] + seconds, last=last)


# --- Falcon: liboqs and the fast verifier (falcon_count) ------------------------------------

def _falcon_rows(timed: list[dict[str, Any]] | None, timing: str, counted: int, log: IO[str],
                 notes: list[str]) -> list[dict[str, Any]]:
    if timed is None:
        return []
    counts = _falcon_instructions(counted, log, notes)
    rows = []
    for line in timed:
        hash_to_point, key = _FALCON_MODES[line["mode"]]
        name = ("liboqs 0.13.0 PQClean " + _cpu_path() if line["mode"] == "liboqs" else
                f"qMEMO fast verifier ({CODE_PATHS.get(line['implementation'], line['implementation'])})")
        rows.append({"mode": line["mode"], "scheme": "Falcon-512", "ops_per_s": line["ops_per_s"],
                     "implementation": f"{name}, {hash_to_point} hash-to-point, {key}",
                     "instructions_per_verify": counts.get(line["mode"]), "hash_to_point": hash_to_point,
                     "public_key": key, "compatible": True,
                     "source": f"falcon_count time ({timing}, turns with qmemo-fndsa-bench) {RING}"})
    return rows



def _cpu_path() -> str:
    from qmemo.crypto.liboqs import cpu_extensions

    return "AVX2" if cpu_extensions()["AVX2"] else "portable"


def _falcon_instructions(counted: int, log: IO[str], notes: list[str]) -> dict[str, int]:
    if not counted:
        return {}
    if shutil.which("valgrind") is None:
        notes.append("valgrind is not installed: instructions_per_verify is null")
        return {}
    lines = _json_lines(_run([str(COUNT_SCRIPT), str(counted), "Falcon-512"], log))
    if lines is None:
        notes.append("count.sh failed (see the log): Falcon instructions are null")
        return {}
    return {line["mode"]: line["instructions_per_verify"] for line in lines}


# --- FN-DSA: Pornin's fn-dsa (bench_c/fndsa) -----------------------------------------------

def _fndsa_rows(modes: dict[str, dict[str, Any]], timing: str, counted: int, log: IO[str],
                notes: list[str]) -> list[dict[str, Any]]:
    counts = _fndsa_instructions(counted, log, notes) if modes else {}
    rows = []
    for mode, key in (("decoded", CACHED), ("encoded", PER_VERIFY)):
        rows.append({"mode": mode, "scheme": "FN-DSA-512",
                     "implementation": f"fn-dsa 0.4.0 (Pornin; FN-DSA, not signature-compatible with "
                                       f"Falcon round 3), variable-time hash-to-point, {key}",
                     # all verifies over all time, as falcon_count reports its rates
                     "ops_per_s": modes[mode]["ops_per_s"] if mode in modes else None,
                     "instructions_per_verify": counts.get(mode), "hash_to_point": "variable-time",
                     "public_key": key, "compatible": False,
                     "source": f"qmemo-fndsa-bench ({timing}, turns with falcon_count) --ring {RING}"})
    return rows


def _build_fndsa(log: IO[str], notes: list[str]) -> bool:
    cargo = shutil.which("cargo") or (str(Path.home() / ".cargo" / "bin" / "cargo")
                                      if (Path.home() / ".cargo" / "bin" / "cargo").exists() else None)
    if cargo is None:
        notes.append("cargo is not installed: the fn-dsa reference was not built, its rows are null")
        return False
    env = {**os.environ, "CARGO_TARGET_DIR": str(FNDSA_TARGET)}
    if _run([cargo, "build", "--release", "--locked", "--manifest-path", str(FNDSA_DIR / "Cargo.toml")], log,
            env=env) is None:
        notes.append("cargo could not build bench_c/fndsa (see the log): FN-DSA rows are null")
        return False
    return True


def _fndsa_instructions(counted: int, log: IO[str], notes: list[str]) -> dict[str, int]:
    if not counted or shutil.which("valgrind") is None:
        return {}
    counts: dict[str, int] = {}
    for mode in ("decoded", "encoded"):
        totals = [_callgrind_total([str(FNDSA_BINARY), "--ring", str(RING), "--msg-bytes", str(MESSAGE_BYTES),
                                    "--count", str(n), "--mode", mode], log) for n in (counted, 2 * counted)]
        if None in totals:
            notes.append(f"callgrind of fn-dsa ({mode}) failed (see the log): its instructions are null")
            continue
        counts[mode] = round((totals[1] - totals[0]) / counted)
    return counts


def _callgrind_total(argv: list[str], log: IO[str]) -> int | None:
    """Instructions of a whole run of `argv` under callgrind (its "summary:" line)."""
    with tempfile.TemporaryDirectory(prefix="qmemo-callgrind-") as tmp:
        out = Path(tmp) / "callgrind.out"
        if _run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *argv], log) is None:
            return None
        for line in out.read_text().splitlines():
            if line.startswith("summary:"):
                return int(line.split()[1])
    return None


# --- running -----------------------------------------------------------------------------------

def _run(argv: list[str], log: IO[str], env: dict[str, str] | None = None) -> str | None:
    """stdout of `argv` (stderr into the log), or None if it failed."""
    log.write(f"\n$ {' '.join(argv)}\n")
    log.flush()
    started = time.monotonic()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.write(f"could not run: {exc}\n")
        return None
    log.write(done.stdout + done.stderr + f"(exit {done.returncode}, {time.monotonic() - started:.1f} s)\n")
    return done.stdout if done.returncode == 0 else None


def _json_lines(text: str | None) -> list[dict[str, Any]] | None:
    """One JSON object per non-empty line, or None if the text is missing or not JSON."""
    if text is None:
        return None
    try:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except ValueError:
        return None
