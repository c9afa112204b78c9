"""The setup's liboqs gives FIPS 204's ML-DSA verdicts where liboqs 0.13's AVX2 code as shipped does not.

scripts/liboqs/mldsa_conformance.cmake patches two places of the bundled pq-crystals AVX2
verify at build time: the ||z||_inf < gamma1 - beta check (FIPS 204 Algorithm 8, line 13)
and UseHint's r0 > 0 test (Algorithm 40). These tests hold the built library to the cases
of Wycheproof's ML-DSA verify files (tests/vectors/wycheproof/, sources in its README)
that exercise exactly those two places - every case flagged `InfinityNormViolation` (z at
or over the bound, all invalid) and the two "calls use_hint(1, 0)" signatures (one valid,
one invalid) - through the registry's liboqs verifier, the code a node with `--verifier
liboqs` runs. The whole files, for every verifier, are test_third_party_vectors.py's.

bench_c's mldsa-conformance program links the patched objects and the shipped ones side
by side (to time them); its `verdicts` command shows that the two differ on exactly these
cases, so the benchmark's reference row is the non-conforming code and the patch is what
changes the verdict.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import dataclass

import pytest

from qmemo.crypto import conformance, get_scheme
from qmemo.crypto.liboqs import build_info
from tests.conftest import REPO_ROOT
from tests.integration import mldsa_shipped

VECTORS = REPO_ROOT / "tests" / "vectors" / "wycheproof"
# The uncompressed files' sha256 (tests/vectors/wycheproof/README.md: C2SP/wycheproof at
# dac1dd4729fd1f8dd9e1e9f3dce51d783da6c166, testvectors_v1/mldsa_<set>_verify_test.json).
SHA256 = {
    "ML-DSA-44": "0ca1b5df4575263e29b31fae7569a3da41df9a3b6fee56720a992d0cd1153b68",
    "ML-DSA-65": "49ac366d76115eab56b7116f10d06e288e6f23fe6cfb90b26bfb2d731a8d1e02",
    "ML-DSA-87": "e9e04216d4217265a5affba2568476d35742dbd8ffc9d4c23b3441334a08a224",
}
# How many of each file's z-over-the-bound cases the shipped AVX2 verify accepts.
SHIPPED_ACCEPTS_Z = {"ML-DSA-44": 37, "ML-DSA-65": 41, "ML-DSA-87": 49}
PATCH_SOURCE = REPO_ROOT / "scripts" / "liboqs" / "mldsa_conformance.cmake"


@dataclass(frozen=True, slots=True)
class Case:
    tc_id: int
    comment: str
    public_key: bytes
    message: bytes
    signature: bytes
    valid: bool
    z_over_bound: bool


def focused_cases(name: str) -> list[Case]:
    """The file's cases that meet the two patched places (module docstring), empty context only."""
    raw = gzip.decompress((VECTORS / f"mldsa_{name[-2:]}_verify_test.json.gz").read_bytes())
    assert hashlib.sha256(raw).hexdigest() == SHA256[name], f"{name}'s Wycheproof file is not the pinned one"
    cases = []
    for group in json.loads(raw)["testGroups"]:
        for test in group["tests"]:
            z_over_bound = "InfinityNormViolation" in test["flags"]
            if test.get("ctx") or not (z_over_bound or "calls use_hint(1, 0)" in test["comment"]):
                continue
            cases.append(Case(test["tcId"], test["comment"], bytes.fromhex(group["publicKey"]),
                              bytes.fromhex(test["msg"]), bytes.fromhex(test["sig"]), test["result"] == "valid",
                              z_over_bound))
    return cases


@pytest.mark.parametrize("name", sorted(SHA256))
def test_liboqs_refuses_z_over_the_bound_and_accepts_the_use_hint_1_0_signature(name):
    cases = focused_cases(name)
    assert sum(c.z_over_bound for c in cases) >= 30, "the file lost its z-bound cases"
    assert [c.valid for c in cases if not c.z_over_bound] == [True, False], "the two use_hint(1, 0) cases"
    liboqs = get_scheme(name, verifier="liboqs")
    wrong = [f"tcId {c.tc_id} ({c.comment}): expected {'valid' if c.valid else 'invalid'}"
             for c in cases if liboqs.verify(c.public_key, c.message, c.signature) != c.valid]
    assert not wrong, f"liboqs's {name} verify disagrees with Wycheproof:\n" + "\n".join(wrong)


def test_the_installed_liboqs_is_built_with_this_checkouts_patch():
    # The patch's id is its source's hash, as scripts/setup.sh records it; an older .deps
    # (or a user-supplied liboqs without the patch) fails here, naming the fix.
    patch = build_info().get("ml_dsa_conformance_patch")
    assert patch, "this liboqs was not built with scripts/liboqs/mldsa_conformance.cmake: run scripts/setup.sh"
    assert patch["id"] == hashlib.sha256(PATCH_SOURCE.read_bytes()).hexdigest()[:12], \
        "the liboqs in .deps was built from another version of the patch: run scripts/setup.sh"
    assert build_info()["build_name"] == f"liboqs 0.13.0 + qMEMO ML-DSA conformance patch {patch['id']}"


@pytest.mark.skipif(mldsa_shipped.missing_reason() is not None, reason=str(mldsa_shipped.missing_reason()))
@pytest.mark.parametrize("name", sorted(SHA256))
def test_the_patch_is_what_turns_the_shipped_verdicts_into_fips_204s(name):
    cases = focused_cases(name)
    rows = mldsa_shipped.verdicts(name, [(c.public_key, c.message, c.signature) for c in cases])
    for case, (liboqs, conforming, _) in zip(cases, rows, strict=True):
        assert liboqs == conforming == int(case.valid), f"tcId {case.tc_id} ({case.comment})"
    # As shipped, the opposite of FIPS 204's verdict on the valid use_hint(1, 0) signature
    # and on most z-over-the-bound ones (the others fail its challenge check as well):
    # together Wycheproof's count of liboqs 0.13's disagreements, 38 / 42 / 50.
    shipped = {(c.z_over_bound, c.valid): [] for c in cases}
    for case, row in zip(cases, rows, strict=True):
        shipped[(case.z_over_bound, case.valid)].append(row[2])
    assert sum(shipped[(True, False)]) == SHIPPED_ACCEPTS_Z[name], f"{len(shipped[(True, False)])} z cases"
    assert shipped[(False, True)] == [0] and shipped[(False, False)] == [0]


@pytest.mark.skipif(mldsa_shipped.missing_reason() is not None, reason=str(mldsa_shipped.missing_reason()))
@pytest.mark.parametrize("name", sorted(SHA256))
def test_the_node_case_files_z_cases_each_catch_a_verifier_without_the_z_check(name):
    # A z case that the shipped code refuses anyway (its challenge check fails too) would
    # let a verifier without the z bound pass the node's self-test.
    z_cases = [c for c in conformance.cases_for(name).cases if ": violate index" in c.name]
    assert len(z_cases) >= 2
    rows = mldsa_shipped.verdicts(name, [(c.public_key, c.message, c.signature) for c in z_cases])
    assert rows == [(0, 0, 1)] * len(z_cases), [(c.name, row) for c, row in zip(z_cases, rows, strict=True)]
