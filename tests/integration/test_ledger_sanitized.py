"""The node's ledger under AddressSanitizer and UBSan (tests/native/ledger_sanitized.sh): the
differential tests against qmemo.core run on a sanitizer build of the C, so a read past a
buffer or an overflow in the pool, the maps or a block's apply fails the suite, not a node."""

from __future__ import annotations

from tests.conftest import REPO_ROOT, run_command


def test_the_ledgers_differential_tests_pass_under_the_sanitizers():
    done = run_command(["bash", str(REPO_ROOT / "tests" / "native" / "ledger_sanitized.sh")], timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert " passed" in done.stdout and "failed" not in done.stdout
