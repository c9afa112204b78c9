"""A bounded libFuzzer run of the admission kernel (tests/native/fuzz_admit.sh).

The kernel parses bytes straight from clients; the fuzzer runs it under AddressSanitizer
and UBSan with its own invariant checks (tests/native/fuzz_admit.c). Here: a short run
from the vector bodies, so every suite run fuzzes a little; the long run is documented
in the script and in docs/methodology.md.
"""

from __future__ import annotations

import shutil

import pytest

from tests.conftest import REPO_ROOT, run_command

FUZZ_SECONDS = 15
PROBE = "#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return 0; }\n"


def libfuzzer_missing(tmp_path) -> str | None:
    """Why the fuzzer cannot be built here, or None (clang and its libFuzzer runtime present)."""
    if shutil.which("clang") is None:
        return "clang is not installed (apt-get install clang libclang-rt-14-dev)"
    probe = tmp_path / "probe.c"
    probe.write_text(PROBE)
    built = run_command(["clang", "-fsanitize=fuzzer,address,undefined", str(probe), "-o", str(tmp_path / "probe")])
    if built.returncode != 0:
        return f"clang cannot link a libFuzzer target (apt-get install libclang-rt-14-dev): {built.stderr[-300:]}"
    return None


@pytest.mark.slow
def test_a_short_fuzz_run_of_the_admission_kernel_finds_nothing(tmp_path):
    missing = libfuzzer_missing(tmp_path)
    if missing:
        pytest.skip(missing)
    if not (REPO_ROOT / ".deps" / "blake3" / "blake3.h").is_file():
        pytest.skip("no BLAKE3 sources in .deps/blake3: run scripts/setup.sh")
    result = run_command(["bash", str(REPO_ROOT / "tests" / "native" / "fuzz_admit.sh"), str(FUZZ_SECONDS),
                          str(tmp_path)], timeout=FUZZ_SECONDS + 240)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    assert "Done" in output and "ERROR" not in output, output[-4000:]
    assert not list(tmp_path.glob("crash-*"))
