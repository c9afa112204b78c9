"""Third-party test vectors, and every verifier in the scheme registry held to them.

The verdicts a node gives are only as good as the verifier's, so each verifier the
registry offers (`get_scheme(name, verifier)`: "fast" and "liboqs" for Falcon and ML-DSA,
the one implementation of every other scheme) is checked against vectors written outside
this project, never against another implementation:

- Wycheproof (C2SP/wycheproof): ML-DSA-44/65/87 verify, Ed25519, ECDSA secp256k1 SHA-256;
- NIST ACVP (usnistgov/ACVP-Server): ML-DSA sigVer, the external/pure groups;
- the NIST round-3 Falcon-512 KAT (falcon512-KAT.rsp) and liboqs's known-answer tests
  (kats.json: the hash of each scheme's KAT output liboqs checks its builds against; for
  the Falcon-padded variants, which no submission defined, PQClean's code's output as
  liboqs ships it, not a submitter's) for every liboqs scheme.

Vector files live in tests/vectors/<source>/, each checked against the sha256 its folder's
README.md gives (qmemo.crypto.vector_files); qmemo.crypto.vector_sources says which
sources each scheme is held to and reads them into cases; this module runs the cases.

What a case means for a verifier: a context string other than the empty one (the node
signs with the empty context) goes through liboqs's OQS_SIG_verify_with_ctx_str, after the
registry's length rule; a verifier with no context argument (the fast one) counts such
cases as not applicable, never as passed. ECDSA: the registry verifies 64-byte compact
(r || s) signatures of SHA-256 digests under 33-byte compressed keys, low-S only (the
libsecp256k1 rule). No Wycheproof file matches that exactly, so the P1363 file (r || s,
SHA-256) runs through the registry with Wycheproof's verdict plus the low-S rule, and the
Bitcoin file (DER, SHA-256, low-S: libsecp256k1's rules exactly) runs through the call the
registry's verify makes after its encoding step (libsecp256k1's DER verify, via coincurve).

Used by tests/integration/test_third_party_vectors.py and `qmemo schemes --vectors`.
It never changes a verdict it reads and never signs (kat_sig, liboqs's program, signs to
replay a KAT).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Protocol

from qmemo.crypto.schemes import backend_of, canonical_name, get_scheme, scheme_names, verifiers_of
from qmemo.crypto.vector_files import prefetch_kats
from qmemo.crypto.vector_sources import VectorCase, VectorSource, cases_of, origin_of, sources_of
from qmemo.errors import SetupError


# --- results -----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Disagreement:
    case: VectorCase
    path: str                    # which call gave the wrong verdict: "verify", "verify_many", ...
    got: bool


@dataclass(frozen=True, slots=True)
class SourceResult:
    """One source's cases through one verifier of one scheme."""

    scheme: str
    verifier: str                # the registry's verifier name ("fast", "liboqs")
    implementation: str          # its backend: "mldsa-vt", "liboqs", "libsodium", ...
    source: str
    origin: str
    cases: int
    passed: int
    not_applicable: int          # context cases for a verifier without a context argument
    disagreements: tuple[Disagreement, ...]
    error: str | None = None     # the source could not be read (missing file, wrong sha256)

    @property
    def verifier_label(self) -> str:
        """The verifier as a user names it: "fast" / "liboqs" where the scheme has both, else its library."""
        return verifier_label(self.scheme, self.verifier)

    @property
    def applicable(self) -> int:
        """The cases this verifier was given (every case but the not-applicable ones)."""
        return self.cases - self.not_applicable

    @property
    def ok(self) -> bool:
        """Read, no disagreement, and at least one case given: a source that checked nothing
        (an emptied file, a filter that matches no group) proves nothing, so it is no pass."""
        return self.error is None and not self.disagreements and self.applicable > 0

    def failing_cases(self) -> list[str]:
        """One line per case that some call got wrong, naming the case and each wrong call."""
        by_case: dict[VectorCase, list[Disagreement]] = {}
        for disagreement in self.disagreements:
            by_case.setdefault(disagreement.case, []).append(disagreement)
        return [f"{case.describe()}: expected {'valid' if case.valid else 'invalid'}; "
                + ", ".join(f"{d.path} {'accepted' if d.got else 'refused'} it" for d in wrong)
                for case, wrong in by_case.items()]


def verifier_label(name: str, verifier: str) -> str:
    """`verifier` where scheme `name` has two ("fast", "liboqs"), else its one library ("libsodium")."""
    return verifier if len(verifiers_of(name)) > 1 else backend_of(canonical_name(name), verifier)


# --- running them ----------------------------------------------------------------------------

@cache
def _context_verify(name: str) -> Callable[[bytes, bytes, bytes, bytes], bool]:
    """liboqs's verify with a context string for `name`, behind the registry's length rule."""
    import ctypes

    from qmemo.crypto.liboqs import native

    lib = native()
    sig = lib.OQS_SIG_new(name.encode())
    if not sig:
        raise SetupError(f"liboqs could not create {name}", code="vector_file")
    function = lib["OQS_SIG_verify_with_ctx_str"]   # a private function object: argtypes set here only
    function.restype = ctypes.c_int
    function.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t,
                         ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p]
    rules = get_scheme(name, "liboqs").rules

    def verify(public_key: bytes, message: bytes, signature: bytes, context: bytes) -> bool:
        if not rules.lengths_ok(len(public_key), len(signature)):
            return False   # liboqs takes the key without its length: never hand it a short one
        return function(sig, message, len(message), signature, len(signature), context, len(context),
                        public_key) == 0

    return verify


def _der_verify(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """libsecp256k1's verify of a DER signature of SHA-256(message): the call inside the
    registry's ECDSA verify, after its compact-to-DER step."""
    import coincurve

    try:
        return bool(coincurve.PublicKey(public_key).verify(signature, message,
                                                           hasher=lambda data: hashlib.sha256(data).digest()))
    except (ValueError, TypeError):
        return False


class Verifies(Protocol):
    """What a case is run through: a registry scheme, or a fast verifier made on its own."""

    def verify(self, public_key: bytes, message: bytes, signature: bytes) -> bool: ...

    def verify_many(self, items: Sequence[tuple[bytes, bytes, bytes]]) -> tuple[list[bool], list[int]]: ...


def check_source(name: str, verifier: str, source: VectorSource, *, instance: Verifies | None = None) -> SourceResult:
    """Every case of `source` through `verifier`'s implementation of scheme `name`.

    Plain cases go through the registry's `verify` and `verify_many` (the node's batch path)
    both; a context case through liboqs's context call where the verifier is liboqs's, else
    it is not applicable. A case passes when every call agrees with its verdict.
    `instance`: an object with the same verify/verify_many to use instead of the registry's
    shared one (a fresh fast verifier under another code path, with a cache of its own).
    """
    name = canonical_name(name)
    scheme: Verifies = instance or get_scheme(name, verifier)
    backend = backend_of(name, verifier)
    origin = origin_of(source)
    try:
        cases = cases_of(source)
    except SetupError as exc:
        return SourceResult(name, verifier, backend, source.label, origin, 0, 0, 0, (), error=exc.detail)
    wrong: list[Disagreement] = []
    failed: set[int] = set()
    not_applicable = 0

    def judge(index: int, path: str, got: bool) -> None:
        if got != cases[index].valid:
            wrong.append(Disagreement(cases[index], path, got))
            failed.add(index)

    if source.call == "der":
        for index, case in enumerate(cases):
            judge(index, "libsecp256k1 DER verify", _der_verify(case.public_key, case.message, case.signature))
    else:
        plain = [index for index, case in enumerate(cases) if not case.context]
        for index in plain:
            case = cases[index]
            judge(index, "verify", scheme.verify(case.public_key, case.message, case.signature))
        batch, _ = scheme.verify_many([(cases[i].public_key, cases[i].message, cases[i].signature) for i in plain])
        for index, got in zip(plain, batch, strict=True):
            judge(index, "verify_many", got)
        for index, case in enumerate(cases):
            if not case.context:
                continue
            if backend != "liboqs":
                not_applicable += 1
                continue
            judge(index, "OQS_SIG_verify_with_ctx_str",
                  _context_verify(name)(case.public_key, case.message, case.signature, case.context))
    passed = len(cases) - not_applicable - len(failed)
    return SourceResult(name, verifier, backend, source.label, origin, len(cases), passed, not_applicable,
                        tuple(wrong))


def check_scheme(name: str, verifier: str) -> list[SourceResult]:
    return [check_source(name, verifier, source) for source in sources_of(name)]


def check_all(names: Iterable[str] | None = None) -> list[SourceResult]:
    """Every source of every scheme in `names` (default: all) through each of its verifiers."""
    names = [canonical_name(name) for name in (names or scheme_names())]
    prefetch_kats(name for name in names if backend_of(name, "liboqs") == "liboqs")
    return [result for name in names for verifier in verifiers_of(name) for result in check_scheme(name, verifier)]
