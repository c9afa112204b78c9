"""The conformance self-test a node runs at start: does this verifier give the standards'
verdicts on a few known answers?

One case file per scheme, `<scheme>.json` beside this module, written by
scripts/make_conformance.py (never by hand): a few valid and invalid signatures, each
with its verdict and the source it comes from - third-party vectors (Wycheproof's ML-DSA
verify tests) or the Falcon edge cases built from the round-3 specification
(qmemo.crypto.conformance.falcon_edges). `check(name, verifier)` runs a scheme's cases
through the registry's verifier, one call per case and the whole file as one batch (the
two doors the node verifies through), in a few milliseconds; `require_conformance`
raises `NonConformingVerifier` with one line naming the scheme, the verifier and the
first case it gets wrong. A scheme without a case file passes: nothing is known of it.

The self-test is a known-answer check, not a substitute for the suites (tests/): a
verifier that passes it may still be wrong elsewhere, but one that fails it is wrong.
Never reads tests/, never imports numpy, never signs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache
from importlib import resources

from qmemo.crypto.schemes import SignatureScheme, canonical_name, get_scheme, scheme_names, verifiers_of
from qmemo.errors import NonConformingVerifier, UnknownScheme

CASE_SCHEMA = "qmemo-conformance/1"   # the case files' format (scripts/make_conformance.py writes it)
# The schemes the registry gives more than one verifier (qMEMO's own beside liboqs's): two
# verifiers that disagree split the chain, so a node must never run them unchecked, and a
# missing case file (an install without the package data) is a failure. A scheme that gains
# a second verifier in the registry is required here, and needs a case file, at once.
REQUIRED = frozenset(name for name in scheme_names() if len(verifiers_of(name)) > 1)


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    public_key: bytes
    message: bytes
    signature: bytes
    valid: bool
    source: str          # where the case and its verdict come from


@dataclass(frozen=True, slots=True)
class CaseFile:
    scheme: str
    cases: tuple[Case, ...]
    sources: tuple[str, ...]   # each source the file draws on, once


@dataclass(frozen=True, slots=True)
class Failure:
    """The first case a verifier got wrong, and through which door."""

    scheme: str
    verifier: str
    case: Case
    got: bool
    call: str            # "verify" or "verify_many"

    def line(self) -> str:
        expected, got = ("accept" if self.case.valid else "reject"), ("accepted" if self.got else "rejected")
        return (f"{self.scheme} verifier {self.verifier!r} fails its conformance self-test: case "
                f"{self.case.name!r} ({self.case.source}) should {expected}, {self.call} {got}")


def case_file_name(scheme: str) -> str:
    return f"{canonical_name(scheme)}.json"


@cache
def cases_for(scheme: str) -> CaseFile | None:
    """`scheme`'s cases (registered name, any case), or None if it has no case file."""
    try:
        name = canonical_name(scheme)
    except UnknownScheme:
        return None     # not a scheme of the registry: whoever makes its verifier refuses it
    resource = resources.files(__package__) / case_file_name(name)
    if not resource.is_file():
        if name in REQUIRED:
            raise NonConformingVerifier(f"{name} has no conformance case file ({case_file_name(name)} is not in "
                                        f"{__package__}): this install lacks qMEMO's package data")
        return None
    document = json.loads(resource.read_text(encoding="utf-8"))
    if document.get("schema") != CASE_SCHEMA or document.get("scheme") != name:
        raise NonConformingVerifier(f"{resource}: not a {CASE_SCHEMA} case file for {name}")
    keys = {key_id: bytes.fromhex(hex_key) for key_id, hex_key in document["public_keys"].items()}
    cases = tuple(Case(c["name"], keys[c["public_key"]], bytes.fromhex(c["message"]), bytes.fromhex(c["signature"]),
                       bool(c["valid"]), document["sources"][c["source"]]) for c in document["cases"])
    return CaseFile(name, cases, tuple(document["sources"].values()))


def check(scheme: str, verifier: str, *,
          resolve: Callable[[str, str], SignatureScheme] | None = None) -> Failure | None:
    """The first case `resolve(scheme, verifier)` (default: the registry's `get_scheme`)
    gets wrong, or None: each case through `verify`, then all of them through `verify_many`."""
    cases = cases_for(scheme)
    if cases is None:
        return None
    implementation = (resolve or get_scheme)(cases.scheme, verifier)
    for case in cases.cases:
        got = implementation.verify(case.public_key, case.message, case.signature)
        if bool(got) != case.valid:
            return Failure(cases.scheme, verifier, case, got, "verify")
    verdicts, _ = implementation.verify_many([(c.public_key, c.message, c.signature) for c in cases.cases])
    for case, got in zip(cases.cases, verdicts, strict=True):
        if bool(got) != case.valid:
            return Failure(cases.scheme, verifier, case, bool(got), "verify_many")
    return None


def require_conformance(schemes: Iterable[str], verifier: str, *,
                        resolve: Callable[[str, str], SignatureScheme] | None = None) -> None:
    """NonConformingVerifier, with the first failure's one line, unless every scheme passes."""
    for scheme in dict.fromkeys(schemes):
        failure = check(scheme, verifier, resolve=resolve)
        if failure is not None:
            raise NonConformingVerifier(failure.line())
