"""The conformance self-test: its case files, its verdicts, and a node that refuses to
start with a verifier that fails it (in-process, and as `qmemo node` prints it).

A verifier made to fail is a test double put where the registry's scheme would be; the
setup's liboqs (its ML-DSA made FIPS 204's at build time, docs/setup.md) must pass every case.
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest

from qmemo.crypto import conformance
from qmemo.crypto.schemes import get_scheme, scheme_names, verifiers_of
from qmemo.errors import NonConformingVerifier
from tests.conftest import REPO_ROOT, run_command
from tests.integration.nodes import running_node

pytestmark = pytest.mark.slow

WYCHEPROOF = REPO_ROOT / "tests" / "vectors" / "wycheproof"


class AcceptsEverything:
    """A verifier that skips every check: what a node must never run."""

    def __init__(self, real):
        self.info, self.name = real.info, real.name

    def verify(self, public_key, message, signature):
        return True

    def verify_many(self, items):
        return [True] * len(items), [0] * len(items)


class WrongInBatches:
    """Right one call at a time, wrong in a batch: the batch door is checked too."""

    def __init__(self, real):
        self.real, self.info, self.name = real, real.info, real.name

    def verify(self, public_key, message, signature):
        return self.real.verify(public_key, message, signature)

    def verify_many(self, items):
        return [not ok for ok in self.real.verify_many(items)[0]], [0] * len(items)


def resolving(scheme_name: str, double):
    """A `resolve` that hands out `double(real)` for one scheme, the registry's otherwise."""
    return lambda name, verifier: double(get_scheme(name, verifier)) if name == scheme_name else \
        get_scheme(name, verifier)


def test_the_required_schemes_are_the_registrys_schemes_with_two_verifiers():
    assert conformance.REQUIRED == {name for name in scheme_names() if verifiers_of(name) == ("fast", "liboqs")}
    assert {name for name in scheme_names() if name.startswith(("Falcon", "ML-DSA"))} == conformance.REQUIRED


def test_every_scheme_with_two_verifiers_has_a_case_file_naming_its_sources():
    for name in sorted(conformance.REQUIRED):
        cases = conformance.cases_for(name)
        assert cases is not None and cases.scheme == name
        assert {c.valid for c in cases.cases} == {True, False}, name
        assert all(c.source in cases.sources for c in cases.cases)
        family = "Wycheproof" if name.startswith("ML-DSA") else "Falcon round-3 specification"
        assert all(family in source for source in cases.sources), (name, cases.sources)


def test_the_ml_dsa_cases_include_z_over_the_bound_and_use_hint_1_0():
    for level in (44, 65, 87):
        names = {c.name.split(": ", 1)[1]: c.valid for c in conformance.cases_for(f"ML-DSA-{level}").cases}
        assert names["signature that calls use_hint(1, 0)"] is True
        assert names["index 0 is exactly gamma1 - tau*eta"] is False
        assert sum(n.startswith("violate index") and not v for n, v in names.items()) >= 2, level


def test_the_ml_dsa_cases_are_wycheproofs_own():
    for level in (44, 65, 87):
        document = json.loads(gzip.decompress((WYCHEPROOF / f"mldsa_{level}_verify_test.json.gz").read_bytes()))
        by_id = {t["tcId"]: (group["publicKey"], t) for group in document["testGroups"] for t in group["tests"]}
        for case in conformance.cases_for(f"ML-DSA-{level}").cases:
            public_key, test = by_id[int(case.name.split(":")[0].removeprefix("tcId "))]
            assert (bytes.fromhex(public_key), bytes.fromhex(test["msg"]), bytes.fromhex(test["sig"])) == \
                (case.public_key, case.message, case.signature)
            assert case.valid == (test["result"] == "valid")


@pytest.mark.parametrize("name", sorted(conformance.REQUIRED))
def test_the_fast_verifiers_pass_every_case(name):
    assert conformance.check(name, "fast") is None


@pytest.mark.parametrize("name", ["Falcon-512", "Falcon-padded-512", "Falcon-1024", "Falcon-padded-1024"])
def test_liboqs_falcon_passes_every_case(name):
    assert conformance.check(name, "liboqs") is None


def test_a_scheme_without_a_case_file_passes_and_a_required_one_must_have_one(monkeypatch, tmp_path):
    assert conformance.cases_for("Ed25519") is None and conformance.check("Ed25519", "fast") is None
    monkeypatch.setattr(conformance.resources, "files", lambda package: tmp_path)   # an install without the data
    conformance.cases_for.cache_clear()
    try:
        with pytest.raises(NonConformingVerifier, match="Falcon-512 has no conformance case file"):
            conformance.cases_for("Falcon-512")
    finally:
        conformance.cases_for.cache_clear()


def test_a_verifier_that_accepts_everything_fails_on_the_first_invalid_case():
    failure = conformance.check("Falcon-512", "fast", resolve=resolving("Falcon-512", AcceptsEverything))
    assert failure is not None and failure.case.valid is False and failure.got is True and failure.call == "verify"
    line = failure.line()
    assert "\n" not in line and line.startswith("Falcon-512 verifier 'fast' fails its conformance self-test: case ")
    assert f"'{failure.case.name}'" in line and "should reject, verify accepted" in line


def test_a_verifier_wrong_only_in_batches_is_caught_by_the_batch_call():
    failure = conformance.check("ML-DSA-44", "fast", resolve=resolving("ML-DSA-44", WrongInBatches))
    assert failure is not None and failure.call == "verify_many"


def test_require_conformance_raises_one_line_for_the_first_failing_scheme():
    with pytest.raises(NonConformingVerifier) as raised:
        conformance.require_conformance(["Falcon-512", "ML-DSA-44"], "fast",
                                        resolve=resolving("ML-DSA-44", AcceptsEverything))
    assert str(raised.value).startswith("ML-DSA-44 verifier 'fast' fails") and "\n" not in str(raised.value)
    assert raised.value.code == "nonconforming_verifier"


@pytest.fixture(scope="module")
def mixed_devnet(tmp_path_factory):
    """ML-DSA-44 and Falcon-512 transactions, Falcon-512 validators."""
    from tests.integration.test_mixed_verifiers import make_mixed_devnet

    return make_mixed_devnet(tmp_path_factory.mktemp("conformance-devnet"), accounts=1)


async def test_a_node_starts_with_verifiers_that_pass(mixed_devnet, tmp_path):
    async with running_node(mixed_devnet, tmp_path / "data", mixed_devnet.validator_key(0), verifier="fast") as node:
        assert node.chain is not None


async def test_a_node_with_a_verifier_that_fails_refuses_to_start(mixed_devnet, tmp_path, monkeypatch):
    real = conformance.get_scheme
    monkeypatch.setattr(conformance, "get_scheme", lambda name, verifier="fast": AcceptsEverything(real(name, verifier))
                        if name == "Falcon-512" else real(name, verifier))
    with pytest.raises(NonConformingVerifier, match=r"^Falcon-512 verifier 'fast' fails its conformance self-test"):
        async with running_node(mixed_devnet, tmp_path / "data", mixed_devnet.validator_key(0), verifier="fast"):
            pass
    assert not (tmp_path / "data" / "chain.sqlite").exists()     # refused before it opened its store


def test_qmemo_node_with_a_failing_verifier_exits_with_one_line(mixed_devnet, tmp_path):
    # `qmemo node` in its own process, with the test double put in the registry's place first.
    inject = ("import sys; from qmemo.crypto import conformance; real = conformance.get_scheme\n"
              "class Double:\n"
              "    def __init__(self, s): self.info, self.name = s.info, s.name\n"
              "    def verify(self, *a): return True\n"
              "    def verify_many(self, items): return [True] * len(items), [0] * len(items)\n"
              "conformance.get_scheme = lambda n, v='fast': Double(real(n, v)) if n == 'ML-DSA-44' else real(n, v)\n"
              "from qmemo.cli import main; sys.exit(main(sys.argv[1:]))\n")
    done = run_command([sys.executable, "-c", inject, "node", *node_args(mixed_devnet, tmp_path, "fast")], timeout=60)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ML-DSA-44 verifier 'fast' fails its conformance "
                                                   "self-test: case "), done.stderr


@pytest.mark.parametrize("name", ["ML-DSA-44", "ML-DSA-65", "ML-DSA-87"])
def test_the_setup_s_liboqs_ml_dsa_passes_every_case(name):
    """The setup builds liboqs with its ML-DSA made FIPS 204's (docs/setup.md); as shipped it
    accepts z over the bound and refuses use_hint(1, 0), and a node on it would not start."""
    assert conformance.check(name, "liboqs") is None


def node_args(devnet, tmp_path: Path, verifier: str) -> list[str]:
    return ["--genesis", str(devnet.genesis), "--key", str(devnet.validator_key(0)), "--data", str(tmp_path / "d"),
            "--port", "0", "--verify-threads", "1", "--verifier", verifier]
