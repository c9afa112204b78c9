"""The ML-DSA verifier's proofs in C: differential harness, sanitizers, fuzzing, counts.

Every test runs a program built from tests/native/ and qmemo/crypto/native/mldsa_vt.mk
against the setup's liboqs. The harness prints its case count and the per-class
tallies (shown with `pytest -s` or on failure); any disagreement with liboqs's portable
verify - or a difference from OQS_SIG_verify it cannot explain - fails the test with the
case printed. The suite runs a short harness (a few seconds); the documented longer
command (docs/methodology.md) runs 240,000 cases. The sanitizer/fuzz build takes a
minute the first time (cached in .deps/native/mldsa afterwards). Nothing here asserts a
speed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from qmemo.crypto.liboqs import build_info, cpu_extensions
from tests.conftest import REPO_ROOT, run_command

pytestmark = pytest.mark.slow

BUILD = REPO_ROOT / ".deps" / "native" / "mldsa"
MAKEFILE = REPO_ROOT / "qmemo" / "crypto" / "native" / "mldsa_vt.mk"
COUNT_SCRIPT = REPO_ROOT / "bench_c" / "count.sh"
SETS = ("ML-DSA-44", "ML-DSA-65", "ML-DSA-87")


def build(target: str) -> None:
    """`make` one mldsa_vt.mk target (a no-op when it is up to date)."""
    assert (BUILD / "config.mk").is_file(), "run scripts/setup.sh first (it writes .deps/native/mldsa/config.mk)"
    done = run_command(["make", "-s", "-j", str(os.cpu_count() or 1), "-f", str(MAKEFILE), target], timeout=900)
    assert done.returncode == 0, f"make {target} failed:\n{done.stdout}\n{done.stderr}"


def run_harness(program: Path, cases_44: int, cases_other: int, stride: int = 1) -> str:
    done = run_command([str(program), str(cases_44), str(cases_other), "20261127", str(stride)], timeout=600)
    print(done.stdout)
    assert done.returncode == 0, f"{program.name} found disagreements:\n{done.stdout}\n{done.stderr[-20000:]}"
    total = int(re.search(r"mldsa_diff: (\d+) cases, 0 disagreements", done.stdout).group(1))
    assert total == cases_44 + 2 * cases_other
    return done.stdout


def test_differential_harness_agrees_with_liboqs_portable_verify_and_explains_the_avx2_one():
    build("tools")
    out = run_harness(BUILD / "mldsa_diff", 3_600, 900)
    for name in SETS:
        assert re.search(rf"^{name}: \d+ cases, 0 disagreements; implementations ", out, re.M), name
    # Every mutation class ran, and the harness saw both verdicts.
    for line in re.findall(r"^  (\S+)\s+(\d+) cases\s+(\d+) valid\s+(\d+) oqs-differs$", out, re.M):
        assert int(line[1]) > 0, f"mutation class {line[0]} never ran"
    assert re.search(r"^  valid\s+(\d+) cases\s+\1 valid\s+0 oqs-differs$", out, re.M)
    # use_hint, value by value: ours never differs from the ref code; liboqs's AVX2 only at r0 == 0.
    for gamma2 in ("(q-1)/88", "(q-1)/32"):
        assert f"use_hint gamma2={gamma2}: 16760834 values, ours differs from ref at 0;" in out
        assert re.search(rf"gamma2={re.escape(gamma2)}: .* \(0 not r0 == 0 with the hint set\)", out)
    # The setup's liboqs has its AVX2 verify patched to FIPS 204's (scripts/liboqs/
    # mldsa_conformance.cmake), so OQS_SIG_verify refuses every lenient signature too. A
    # liboqs 0.13 without the patch, on an AVX2 CPU, runs the verify that skips the z
    # bound: the lenient signatures show it (accepted by OQS_SIG_verify, refused by ours).
    differs = sum(int(n) for n in re.findall(r"OQS_SIG_verify accepted (\d+) that FIPS 204 rejects", out))
    skips_z_bound = cpu_extensions()["AVX2"] and cpu_extensions()["POPCNT"] and \
        "ml_dsa_conformance_patch" not in build_info()
    assert (differs > 0) == skips_z_bound
    assert re.search(r"^  lenient\s+\d+ cases\s+\d+ valid", out, re.M)


@pytest.mark.skipif(shutil.which("clang") is None, reason="clang (sanitizers) is not installed; scripts/setup.sh installs it")
def test_differential_harness_is_clean_under_address_and_undefined_behaviour_sanitizers():
    build("asan")
    run_harness(BUILD / "mldsa_diff_asan", 720, 180, stride=97)   # use_hint sampled: ASan is slow


@pytest.mark.skipif(shutil.which("clang") is None, reason="clang (libFuzzer) is not installed; scripts/setup.sh installs it")
def test_fuzz_target_finds_no_disagreement_in_a_bounded_run(tmp_path: Path):
    build("fuzz")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    done = run_command([str(BUILD / "mldsa_fuzz"), "-max_total_time=10", "-print_final_stats=1", str(corpus)],
                       env={"QMEMO_FUZZ_SEEDS": str(corpus)}, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, f"the fuzzer found something:\n{done.stderr[-20000:]}"
    runs = int(re.search(r"stat::number_of_executed_units: (\d+)", done.stderr).group(1))
    assert runs > 0
    assert len(list(corpus.iterdir())) >= 3 * 8 * 4  # every set's signed and lenient seeds, both key forms


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed; scripts/setup.sh installs it")
def test_callgrind_counts_the_cached_verify_below_liboqs():
    build("tools")
    done = run_command(["bash", str(COUNT_SCRIPT), str(BUILD / "mldsa_count"), "10", "ML-DSA-44",
                        "liboqs", "uncached", "cached", "batch"], timeout=600)
    assert done.returncode == 0, done.stderr
    counts = {row["mode"]: row for row in map(json.loads, done.stdout.splitlines())}
    print(counts)
    assert all(row["valid"] == row["verifies"] == 10 for row in counts.values())
    per_verify = {mode: row["instructions_per_verify"] for mode, row in counts.items()}
    # Exact for one build: a cached key skips ExpandA, H(pk) and four NTTs of t1.
    assert per_verify["cached"] < per_verify["uncached"] and per_verify["cached"] < per_verify["liboqs"]
