"""Running the helper programs of `qmemo bench c`'s verify_implementations step: each
command and its output go to the run's log, and a failure is None, never an exception.

Shared by qmemo.bench.c_verifiers (the counters: falcon_count, mldsa_count, oqs-count)
and qmemo.bench.c_fndsa (the FN-DSA reference).
"""

from __future__ import annotations

import json
import subprocess
import time
from typing import IO, Any


def run_logged(argv: list[str], log: IO[str], env: dict[str, str] | None = None) -> str | None:
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


def json_lines(text: str | None) -> list[dict[str, Any]] | None:
    """One JSON object per non-empty line, or None if the text is missing or not JSON."""
    if text is None:
        return None
    try:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except ValueError:
        return None
