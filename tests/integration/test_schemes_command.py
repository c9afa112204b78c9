"""`qmemo schemes --verifier`: the table names the code that verifies each scheme."""

from __future__ import annotations

import json

import pytest

from tests.conftest import VENV_BIN, run_command


def implementations(verifier: str) -> dict[str, str]:
    done = run_command([str(VENV_BIN / "qmemo"), "schemes", "--json", "--no-self-test", "--verifier", verifier])
    assert done.returncode == 0, done.stderr
    return {row["name"]: row["implementation"] for row in json.loads(done.stdout)}


@pytest.mark.parametrize("verifier", ["fast", "liboqs"])
def test_falcon_and_ml_dsa_name_their_verifier_and_other_schemes_are_unchanged(verifier):
    shown, default = implementations(verifier), implementations("fast")
    for name, implementation in shown.items():
        if name.startswith("Falcon"):
            assert ("variable-time hash-to-point, cached key" in implementation) is (verifier == "fast"), name
            assert implementation.startswith("liboqs 0.13.0")
        elif name.startswith("ML-DSA"):
            assert ("variable-time (cached expanded key)" in implementation) is (verifier == "fast"), name
            assert implementation.startswith("liboqs 0.13.0")
        else:
            assert implementation == default[name], name
