"""ML-DSA signatures with z over FIPS 204's bound (tests/native/mldsa_zsign.c), for the
tests that hold verifiers and devnets to refusing them.

The signer is built on first use from liboqs 0.13's own ref sign.c as mldsa_vt.mk already
compiles it for the differential harness (libqmemo_mldsa_test.a, under .deps/native/mldsa:
never in the repo), with its z check turned round so that only a z at or over
gamma1 - beta is kept. `z_infinity_norm` reads z back out of a signature, so a test can
see that the signature breaks the bound it is meant to break.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np

from tests.conftest import REPO_ROOT, run_command

BUILD = REPO_ROOT / ".deps" / "native" / "mldsa"
SOURCE = REPO_ROOT / "tests" / "native" / "mldsa_zsign.c"
PROGRAM = BUILD / "mldsa_zsign"
LIBOQS_LIB = REPO_ROOT / ".deps" / "liboqs" / "lib"
MAKEFILE = REPO_ROOT / "qmemo" / "crypto" / "native" / "mldsa_vt.mk"

# FIPS 204, Table 1: (gamma1, beta, l, bytes of c~) per parameter set.
PARAMETERS = {44: (1 << 17, 78, 4, 32), 65: (1 << 19, 196, 5, 48), 87: (1 << 19, 120, 7, 64)}


def build() -> Path:
    """The signer, built if it is missing or older than its source or the archives."""
    archives = [BUILD / "libqmemo_mldsa_test.a", BUILD / "libqmemo_mldsa.a"]
    if not all(a.is_file() for a in archives):
        done = run_command(["make", "-s", "-f", str(MAKEFILE), "tools"], timeout=900)
        assert done.returncode == 0, f"make tools failed:\n{done.stdout}\n{done.stderr}"
    newest = max(p.stat().st_mtime for p in (SOURCE, *archives))
    if PROGRAM.is_file() and PROGRAM.stat().st_mtime >= newest:
        return PROGRAM
    partial = PROGRAM.with_name(f"{PROGRAM.name}.{os.getpid()}")
    done = run_command(["cc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", str(SOURCE), *map(str, archives),
                        f"-L{LIBOQS_LIB}", "-loqs", f"-Wl,-rpath,{LIBOQS_LIB}", "-pthread", "-o", str(partial)],
                       timeout=300)
    assert done.returncode == 0, f"building {SOURCE.name} failed:\n{done.stderr}"
    partial.replace(PROGRAM)
    return PROGRAM


def sign_z_over_bound(level: int, items: list[tuple[bytes, bytes]]) -> list[bytes]:
    """One signature per (secret key, message) of ML-DSA-`level`, each with ||z||inf >= gamma1 - beta."""
    lines = "".join(f"{level} {sk.hex()} {msg.hex()}\n" for sk, msg in items)
    done = subprocess.run([str(build())], input=lines, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"mldsa_zsign failed: {done.stderr}"
    return [bytes.fromhex(line) for line in done.stdout.split()]


def z_infinity_norm(level: int, signature: bytes) -> int:
    """max |z_i| of an ML-DSA signature (FIPS 204 Algorithm 27 sigDecode: z = gamma1 - BitUnpack)."""
    gamma1, _, l, ctilde = PARAMETERS[level]
    width = 18 if gamma1 == 1 << 17 else 20
    packed = np.frombuffer(signature[ctilde:ctilde + l * 256 * width // 8], dtype=np.uint8)
    bits = np.unpackbits(packed, bitorder="little").reshape(-1, width)
    values = (bits.astype(np.int64) << np.arange(width)).sum(axis=1)
    return int(np.abs(gamma1 - values).max())


def bound(level: int) -> int:
    gamma1, beta, _, _ = PARAMETERS[level]
    return gamma1 - beta
