"""The fast Falcon verifier's proofs in C: differential harness, sanitizers, fuzzing, counts.

Every test runs a program built from tests/native/ and qmemo/crypto/native/falcon_vt.mk
against the setup's liboqs. The harness prints its case count and the per-class
tallies (shown with `pytest -s` or on failure); any disagreement with liboqs fails
the test with the case printed. The sanitizer and fuzz builds take a minute the first
time (they are cached in .deps/native/falcon afterwards). Nothing here asserts a speed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, run_command

pytestmark = pytest.mark.slow

BUILD = REPO_ROOT / ".deps" / "native" / "falcon"
MAKEFILE = REPO_ROOT / "qmemo" / "crypto" / "native" / "falcon_vt.mk"
COUNT_SCRIPT = REPO_ROOT / "bench_c" / "count.sh"


def build(target: str) -> None:
    """`make` one falcon_vt.mk target (a no-op when it is up to date)."""
    assert (BUILD / "config.mk").is_file(), "run scripts/setup.sh first (it writes .deps/native/falcon/config.mk)"
    done = run_command(["make", "-s", "-j", str(os.cpu_count() or 1), "-f", str(MAKEFILE), target], timeout=900)
    assert done.returncode == 0, f"make {target} failed:\n{done.stdout}\n{done.stderr}"


def run_harness(program: Path, cases_512: int, cases_other: int) -> str:
    done = run_command([str(program), str(cases_512), str(cases_other)], timeout=600)
    print(done.stdout)
    assert done.returncode == 0, f"{program.name} found disagreements:\n{done.stdout}\n{done.stderr[-20000:]}"
    total = int(re.search(r"falcon_diff: (\d+) cases, 0 disagreements", done.stdout).group(1))
    assert total == cases_512 + 3 * cases_other
    return done.stdout


def test_differential_harness_agrees_with_liboqs_on_200k_falcon_512_cases():
    build("tools")
    out = run_harness(BUILD / "falcon_diff", 200_000, 3_000)
    # Every mutation class ran, and the harness saw both verdicts.
    assert "Falcon-512: 200000 cases, 0 disagreements" in out
    for line in re.findall(r"^  (\S+)\s+(\d+) cases\s+(\d+) valid$", out, re.M):
        assert int(line[1]) > 0, f"mutation class {line[0]} never ran"
    assert re.search(r"^  valid\s+(\d+) cases\s+\1 valid$", out, re.M)


def test_differential_harness_is_clean_under_address_and_undefined_behaviour_sanitizers():
    build("asan")
    run_harness(BUILD / "falcon_diff_asan", 4_000, 400)


@pytest.mark.skipif(shutil.which("clang") is None, reason="clang (libFuzzer) is not installed; scripts/setup.sh installs it")
def test_fuzz_target_finds_no_disagreement_in_a_bounded_run(tmp_path: Path):
    build("fuzz")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    done = run_command([str(BUILD / "falcon_fuzz"), "-max_total_time=20", "-print_final_stats=1", str(corpus)],
                       env={"QMEMO_FUZZ_SEEDS": str(corpus)}, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, f"the fuzzer found something:\n{done.stderr[-20000:]}"
    runs = int(re.search(r"stat::number_of_executed_units: (\d+)", done.stderr).group(1))
    assert runs > 0
    assert len(list(corpus.iterdir())) >= 128  # the valid-signature seeds were written and kept


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed; scripts/setup.sh installs it")
def test_callgrind_counts_the_fast_verifier_below_liboqs():
    build("tools")
    done = run_command(["bash", str(COUNT_SCRIPT), str(BUILD / "falcon_count"), "20", "Falcon-512",
                        "liboqs", "uncached", "cached", "batch"], timeout=600)
    assert done.returncode == 0, done.stderr
    counts = {row["mode"]: row for row in map(json.loads, done.stdout.splitlines())}
    print(counts)
    assert set(counts) == {"liboqs", "uncached", "cached", "batch"}
    assert all(row["valid"] == row["verifies"] == 20 for row in counts.values())
    per_verify = {mode: row["instructions_per_verify"] for mode, row in counts.items()}
    # Instruction counts are exact for one build: the cached path skips the key
    # decoding, both skip the constant-time hash-to-point, and the batch hashes four
    # signatures' points per four-lane Keccak permutation.
    assert per_verify["batch"] < per_verify["cached"] < per_verify["uncached"] < per_verify["liboqs"]


def test_the_documented_mutant_still_applies_to_the_decoder():
    """docs/methodology.md reproduces the arithmetic checks' catch with this patch: it must
    keep applying to the current source (checked only, never applied here)."""
    if not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    patch = REPO_ROOT / "tests" / "native" / "mutants" / "accept-minus-zero.patch"
    done = run_command(["git", "-C", str(REPO_ROOT), "apply", "--check", str(patch)])
    assert done.returncode == 0, done.stderr
