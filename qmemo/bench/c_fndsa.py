"""The FN-DSA reference of `qmemo bench c`'s verify_implementations: Pornin's fn-dsa 0.4.

Built here with cargo (bench_c/fndsa), timed in turns with the other verifiers
(qmemo.bench.c_verifiers), and counted under callgrind. FN-DSA (FIPS 206 draft) is NOT
signature-compatible with Falcon round 3 / liboqs: a speed reference only, labelled so
in every row. Its count mode has no toggle marker, so it is run at two counts and the
difference is divided by the difference of the counts (key generation and signing,
identical in both runs, cancel out). Without cargo the rows are null and the step log
says why.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import IO, Any

from qmemo.bench.c_tools import json_lines, run_logged
from qmemo.paths import BENCH_C_DIR

FNDSA_DIR = BENCH_C_DIR / "fndsa"
FNDSA_TARGET = BENCH_C_DIR / "build" / "fndsa"          # CARGO_TARGET_DIR: gitignored with bench_c/build/
FNDSA_BINARY = FNDSA_TARGET / "release" / "qmemo-fndsa-bench"
MODES = (("decoded", "cached decoded key"), ("encoded", "key decoded per verify"))


def build(log: IO[str], notes: list[str]) -> bool:
    """Build the reference with cargo; False (and a note) when it cannot be."""
    cargo = shutil.which("cargo") or (str(Path.home() / ".cargo" / "bin" / "cargo")
                                      if (Path.home() / ".cargo" / "bin" / "cargo").exists() else None)
    if cargo is None:
        notes.append("cargo is not installed: the fn-dsa reference was not built, its rows are null")
        return False
    env = {**os.environ, "CARGO_TARGET_DIR": str(FNDSA_TARGET)}
    if run_logged([cargo, "build", "--release", "--locked", "--manifest-path", str(FNDSA_DIR / "Cargo.toml")], log,
                  env=env) is None:
        notes.append("cargo could not build bench_c/fndsa (see the log): FN-DSA rows are null")
        return False
    return True


def time_turn(slice_s: float, ring: int, message_bytes: int, log: IO[str]) -> list[dict[str, Any]] | None:
    """One turn's modes ({mode, ops, seconds, ...}), or None if the program failed."""
    measured = json_lines(run_logged([str(FNDSA_BINARY), "--seconds", f"{slice_s:g}", "--ring", str(ring),
                                      "--msg-bytes", str(message_bytes)], log))
    return None if measured is None else measured[0]["modes"]


def rows(rates: dict[str, float], timing: str, counted: int, ring: int, message_bytes: int, log: IO[str],
         notes: list[str]) -> list[dict[str, Any]]:
    """The two FN-DSA rows (raw, as qmemo.bench.c_verifiers makes them): rates from the turns."""
    counts = _instructions(counted, ring, message_bytes, log, notes) if rates else {}
    return [{"scheme": "FN-DSA-512", "mode": mode, "ops_per_s": rates.get(mode),
             "implementation": f"fn-dsa 0.4.0 (Pornin; FN-DSA, not signature-compatible with Falcon round 3), "
                               f"variable-time hash-to-point, {key}",
             "instructions_per_verify": counts.get(mode), "hash_to_point": "variable-time", "public_key": key,
             "timing": "variable-time hash-to-point" + ("; cached key" if mode == "decoded" else ""),
             "calls": "single", "compatible": False,
             "source": f"qmemo-fndsa-bench ({timing}, in turns with the other verifiers) --ring {ring}"}
            for mode, key in MODES]


def _instructions(counted: int, ring: int, message_bytes: int, log: IO[str], notes: list[str]) -> dict[str, int]:
    if not counted or shutil.which("valgrind") is None:
        return {}
    counts: dict[str, int] = {}
    for mode, _ in MODES:
        totals = [callgrind_total([str(FNDSA_BINARY), "--ring", str(ring), "--msg-bytes", str(message_bytes),
                                   "--count", str(n), "--mode", mode], log) for n in (counted, 2 * counted)]
        if None in totals:
            notes.append(f"callgrind of fn-dsa ({mode}) failed (see the log): its instructions are null")
            continue
        counts[mode] = round((totals[1] - totals[0]) / counted)    # type: ignore[operator]
    return counts


def callgrind_total(argv: list[str], log: IO[str]) -> int | None:
    """Instructions of a whole run of `argv` under callgrind (its "summary:" line)."""
    with tempfile.TemporaryDirectory(prefix="qmemo-callgrind-") as tmp:
        out = Path(tmp) / "callgrind.out"
        if run_logged(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *argv], log) is None:
            return None
        for line in out.read_text().splitlines():
            if line.startswith("summary:"):
                return int(line.split()[1])
    return None
