"""liboqs 0.13's AVX2 ML-DSA verify as shipped, beside the setup's conforming one, for tests
that must show which of the two checks a signature breaks.

bench_c/build/mldsa-conformance links the two static archives the setup's liboqs step
installs (scripts/liboqs/mldsa_conformance.cmake: the conforming objects and the files as
shipped, same flags) and answers `verdicts VARIANT`: for each stdin line "pk sig msg"
(hex), "liboqs conforming shipped" as 1 (valid) / 0. The archives exist only where liboqs
has AVX2 ML-DSA code, so the program is built only there; `missing_reason()` says why a
test cannot run it here.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

from qmemo.crypto.liboqs import cpu_extensions
from tests.conftest import REPO_ROOT, run_command

BENCH_DIR = REPO_ROOT / "bench_c"
PROGRAM = BENCH_DIR / "build" / "mldsa-conformance"


def missing_reason() -> str | None:
    """Why the as-shipped AVX2 verify cannot run on this machine, or None where it can."""
    extensions = cpu_extensions()
    if not (extensions["AVX2"] and extensions["POPCNT"]):
        return "no AVX2 here: liboqs runs its portable ML-DSA, and the as-shipped AVX2 archive is not built"
    return None


def verdicts(name: str, items: Sequence[tuple[bytes, bytes, bytes]]) -> list[tuple[int, int, int]]:
    """(liboqs, conforming, shipped) verdicts, 1 or 0, of each (public key, message, signature)."""
    built = run_command(["make", "-s", "-C", str(BENCH_DIR), str(PROGRAM.relative_to(BENCH_DIR))], timeout=300)
    assert built.returncode == 0, f"make failed:\n{built.stdout}\n{built.stderr}"
    lines = "".join(f"{pk.hex()} {sig.hex()} {msg.hex()}\n" for pk, msg, sig in items)
    done = subprocess.run([str(PROGRAM), "verdicts", name], input=lines, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, f"{PROGRAM.name} verdicts {name} failed:\n{done.stderr}"
    rows = []
    for line in done.stdout.splitlines():
        liboqs, conforming, shipped = (int(v) for v in line.split())
        rows.append((liboqs, conforming, shipped))
    assert len(rows) == len(items), done.stdout[:300]
    return rows
