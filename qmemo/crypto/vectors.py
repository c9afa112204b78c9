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

Vector files live in tests/vectors/<source>/, each folder's README.md giving every file's
repository, commit, path and sha256: this module reads that table and refuses a file
whose content has another sha256. Known-answer files are made at run time by liboqs's
kat_sig (it replays the KATs' deterministic randomness) and refused unless their
sha256 is the published one, so what is checked is the published file, byte for byte.

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
replay a KAT): a case's expected verdict is the source's, plus the low-S rule where the
label says so; the "bit flips" cases derived from a KAT are invalid by construction.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import subprocess
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Protocol

from qmemo.crypto.schemes import backend_of, canonical_name, get_scheme, scheme_names, verifiers_of
from qmemo.errors import SetupError
from qmemo.paths import REPO_ROOT

VECTORS_DIR = REPO_ROOT / "tests" / "vectors"

# secp256k1's group order: a signature's s above half of it is "high S", which
# libsecp256k1 (and so the registry) refuses, as Bitcoin's BIP 146 does.
SECP256K1_ORDER = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141

# kat_sig signs every KAT entry before printing it; SPHINCS+-SHA2-128s signs slowly (about
# 0.2 s per signature here), so only its first entry is made, checked against kats.json's
# hash of that entry alone ("single").
KAT_FIRST_ENTRY_ONLY = frozenset({"SPHINCS+-SHA2-128s-simple"})

# The NIST round-3 Falcon-512 KAT file is kat_sig's Falcon-512 output between this header
# line and one final newline (tests/vectors/nist_kat/README.md).
NIST_FALCON512_HEADER = b"# Falcon-512\n\n"


# --- cases ------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class VectorCase:
    """One signature to verify and the verdict its source gives."""

    case_id: str                 # as the source numbers it: "tcId 17", "count 3"
    comment: str
    flags: tuple[str, ...]
    public_key: bytes = field(repr=False)
    message: bytes = field(repr=False)
    signature: bytes = field(repr=False)
    valid: bool
    context: bytes = field(default=b"", repr=False)   # FIPS 204's context string (b"": what the node signs with)

    def describe(self) -> str:
        flags = ", ".join(self.flags) or "no flags"
        context = f", {len(self.context)}-byte context" if self.context else ""
        return f"{self.case_id} ({self.comment or 'no comment'}; {flags}{context})"


@dataclass(frozen=True, slots=True)
class VectorSource:
    """Where a scheme's cases come from, and how to read them."""

    scheme: str
    label: str                   # as tables show it: "wycheproof mldsa_44_verify"
    origin: Callable[[], str] = field(repr=False, compare=False)   # repository, commit, path (may read a manifest)
    load: Callable[[], tuple[VectorCase, ...]] = field(repr=False, compare=False)
    call: str = "verify"         # "verify": the registry's verify; "der": libsecp256k1's DER verify


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


# --- the files and their manifest ---------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ManifestEntry:
    """One row of a vector folder's README.md table."""

    file: str
    repository: str
    commit: str
    path: str
    sha256: str                  # of the content (a .gz file: of its decompressed bytes)


_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|([^|]*)\|([^|]*)\|([^|]*)\|\s*`?([0-9a-f]{64})`?\s*\|", re.M)


@cache
def manifest(folder: str) -> dict[str, ManifestEntry]:
    """The file table of tests/vectors/<folder>/README.md: file -> its entry."""
    readme = VECTORS_DIR / folder / "README.md"
    try:
        text = readme.read_text()
    except OSError as exc:
        raise SetupError(f"no vector manifest at {readme} ({exc.strerror}): the tests/vectors files "
                         "ship with a qMEMO checkout, not with a wheel", code="vector_file") from None
    return {m[1]: ManifestEntry(m[1], m[2].strip(), m[3].strip().strip("`"), m[4].strip().strip("`"), m[5])
            for m in _ROW.finditer(text)}


def read_vector_file(folder: str, name: str) -> bytes:
    """A vector file's content (decompressed if .gz), checked against its README's sha256."""
    entry = manifest(folder).get(name)
    if entry is None:
        raise SetupError(f"tests/vectors/{folder}/README.md lists no {name}", code="vector_file")
    path = VECTORS_DIR / folder / name
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SetupError(f"cannot read {path}: {exc.strerror}", code="vector_file") from None
    data = gzip.decompress(raw) if name.endswith(".gz") else raw
    return checked_sha256(data, entry.sha256, f"tests/vectors/{folder}/{name}")


def checked_sha256(data: bytes, want: str, what: str) -> bytes:
    got = hashlib.sha256(data).hexdigest()
    if got != want:
        raise SetupError(f"{what} has sha256 {got}, not the published {want}", code="vector_file")
    return data


def _origin(folder: str, name: str) -> str:
    entry = manifest(folder)[name]
    return f"{entry.repository} {entry.commit[:12]} {entry.path}"


# --- Wycheproof ------------------------------------------------------------------------------

def _wycheproof_tests(name: str) -> Iterable[tuple[dict, dict]]:
    document = json.loads(read_vector_file("wycheproof", name))
    for group in document["testGroups"]:
        for test in group["tests"]:
            if test["result"] not in ("valid", "invalid"):
                raise SetupError(f"{name} tcId {test['tcId']}: result {test['result']!r} is neither valid nor "
                                 "invalid; the reader needs a rule for it", code="vector_file")
            yield group, test


def _wycheproof_case(test: dict, public_key: bytes, signature: bytes | None = None, *,
                     valid: bool | None = None, extra_flags: tuple[str, ...] = ()) -> VectorCase:
    return VectorCase(
        case_id=f"tcId {test['tcId']}", comment=test.get("comment", ""),
        flags=tuple(test.get("flags", ())) + extra_flags,
        public_key=public_key, message=bytes.fromhex(test["msg"]),
        signature=bytes.fromhex(test["sig"]) if signature is None else signature,
        valid=test["result"] == "valid" if valid is None else valid,
        context=bytes.fromhex(test.get("ctx", "")),
    )


def _wycheproof_plain(name: str) -> tuple[VectorCase, ...]:
    """ML-DSA and Ed25519: the group's raw public key, the test's message and signature."""
    cases = []
    for group, test in _wycheproof_tests(name):
        key = group["publicKey"]
        public_key = key["pk"] if isinstance(key, dict) else key
        cases.append(_wycheproof_case(test, bytes.fromhex(public_key)))
    return tuple(cases)


def compress_point(uncompressed: bytes) -> bytes:
    """SEC 1's compressed form (0x02/0x03 by y's parity, then x) of an uncompressed point."""
    if len(uncompressed) != 65 or uncompressed[0] != 4:
        raise ValueError("not an uncompressed secp256k1 point")
    return bytes([2 + (uncompressed[64] & 1)]) + uncompressed[1:33]


def _wycheproof_p1363_low_s(name: str) -> tuple[VectorCase, ...]:
    """r || s signatures; a valid one with a high s is refused under the low-S rule."""
    cases = []
    for group, test in _wycheproof_tests(name):
        public_key = compress_point(bytes.fromhex(group["publicKey"]["uncompressed"]))
        signature = bytes.fromhex(test["sig"])
        high_s = len(signature) == 64 and int.from_bytes(signature[32:], "big") > SECP256K1_ORDER // 2
        if test["result"] == "valid" and high_s:
            cases.append(_wycheproof_case(test, public_key, valid=False, extra_flags=("HighS: low-S rule",)))
        else:
            cases.append(_wycheproof_case(test, public_key))
    return tuple(cases)


def _wycheproof_bitcoin(name: str) -> tuple[VectorCase, ...]:
    """DER signatures under Bitcoin's rules (low S); the key compressed as the registry takes it."""
    return tuple(_wycheproof_case(test, compress_point(bytes.fromhex(group["publicKey"]["uncompressed"])))
                 for group, test in _wycheproof_tests(name))


# --- ACVP ------------------------------------------------------------------------------------

def _acvp_mldsa(parameter_set: str) -> tuple[VectorCase, ...]:
    document = json.loads(read_vector_file("acvp", "ML-DSA-sigVer-FIPS204.json.gz"))
    cases = []
    for group in document["testGroups"]:
        if group["parameterSet"] != parameter_set:
            continue
        for test in group["tests"]:
            cases.append(VectorCase(
                case_id=f"tcId {test['tcId']}", comment=test.get("reason", ""), flags=(f"tgId {group['tgId']}",),
                public_key=bytes.fromhex(test["pk"]), message=bytes.fromhex(test["message"]),
                signature=bytes.fromhex(test["signature"]), valid=bool(test["testPassed"]),
                context=bytes.fromhex(test.get("context", "")),
            ))
    return tuple(cases)


# --- known-answer tests (liboqs's kat_sig) --------------------------------------------------

def kat_sig_path() -> Path:
    from qmemo.crypto.liboqs import liboqs_library_path

    return liboqs_library_path().parent.parent / "bin" / "kat_sig"


@cache
def kat_output(name: str) -> bytes:
    """kat_sig's output for `name`, checked against liboqs's kats.json (\\r\\n read as \\n, as liboqs does)."""
    first_only = name in KAT_FIRST_ENTRY_ONLY
    tool = kat_sig_path()
    if not tool.is_file():
        raise SetupError(f"no kat_sig at {tool}: scripts/setup.sh builds it with liboqs", code="vector_file")
    args = [str(tool), name] + ([] if first_only else ["--all"])
    try:
        done = subprocess.run(args, capture_output=True, check=False, timeout=120)
    except subprocess.TimeoutExpired:
        raise SetupError(f"kat_sig {name} did not finish in 120 s", code="vector_file") from None
    if done.returncode != 0:
        raise SetupError(f"kat_sig {name} failed ({done.returncode}): {done.stderr.decode(errors='replace')[:200]}",
                         code="vector_file")
    output = done.stdout.replace(b"\r\n", b"\n")
    kats = json.loads((tool.parent.parent / "share" / "liboqs" / "kats.json").read_text())
    return checked_sha256(output, kats[name]["single" if first_only else "all"], f"kat_sig {name}")


def prefetch_kats(names: Iterable[str]) -> None:
    """Make the KAT outputs of `names` two at a time (kat_sig is single-threaded)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(lambda name: _quietly(kat_output, name), names))


def _quietly(function: Callable[[str], object], name: str) -> None:
    try:
        function(name)
    except SetupError:
        pass   # reported by the source that needs it


def _kat_entries(output: bytes) -> list[tuple[int, bytes, bytes, bytes]]:
    """(count, pk, msg, sm) of each entry of a KAT file."""
    entries = []
    for block in output.decode().split("\n\n"):
        fields = dict(re.findall(r"^(\w+) = (\S*)$", block, re.M))
        if "sm" in fields:
            entries.append((int(fields["count"]), bytes.fromhex(fields["pk"]), bytes.fromhex(fields["msg"]),
                            bytes.fromhex(fields["sm"])))
    return entries


def kat_signature(name: str, message: bytes, signed_message: bytes) -> bytes:
    """The registry's signature inside a KAT signed message (kat_sig.c's layouts).

    Falcon-512/1024 use the NIST submission's layout, sig_len (2 bytes) || nonce (40) ||
    message || 0x20+logn || compressed s2, where liboqs's signature is 0x30+logn || nonce ||
    compressed s2; every other scheme's (the padded Falcons' too) is signature || message.
    """
    if name not in ("Falcon-512", "Falcon-1024"):
        if signed_message[len(signed_message) - len(message):] != message:
            raise SetupError(f"{name} KAT: the signed message does not end with the message", code="vector_file")
        return signed_message[: len(signed_message) - len(message)]
    logn = 9 if name == "Falcon-512" else 10
    body_length = int.from_bytes(signed_message[:2], "big") - 1
    nonce, header_at = signed_message[2:42], 42 + len(message)
    if signed_message[42:header_at] != message or signed_message[header_at] != 0x20 + logn:
        raise SetupError(f"{name} KAT: not the NIST signed-message layout", code="vector_file")
    return bytes([0x30 + logn]) + nonce + signed_message[header_at + 1: header_at + 1 + body_length]


def _kat_cases(name: str, output: bytes) -> tuple[VectorCase, ...]:
    return tuple(VectorCase(case_id=f"count {count}", comment="known answer", flags=(), public_key=public_key,
                            message=message, signature=kat_signature(name, message, signed), valid=True)
                 for count, public_key, message, signed in _kat_entries(output))


def _liboqs_kat(name: str) -> tuple[VectorCase, ...]:
    return _kat_cases(name, kat_output(name))


def nist_falcon512_kat() -> bytes:
    """NIST's falcon512-KAT.rsp, made from kat_sig's output and checked against its published sha256."""
    entry = manifest("nist_kat")["falcon512-KAT.rsp"]
    made = NIST_FALCON512_HEADER + kat_output("Falcon-512") + b"\n"
    return checked_sha256(made, entry.sha256, "falcon512-KAT.rsp as kat_sig makes it")


def _nist_falcon512() -> tuple[VectorCase, ...]:
    body = nist_falcon512_kat()[len(NIST_FALCON512_HEADER):]
    return _kat_cases("Falcon-512", body)


def flipped(cases: Sequence[VectorCase]) -> tuple[VectorCase, ...]:
    """Three invalid cases per valid one: one bit of its signature, message or key inverted.

    A KAT holds only valid signatures, which a verifier that accepts everything passes;
    these make the same source refuse something. Which bit: the middle byte's low bit of
    the signature (its body, past any header and nonce) and of the key (past its header),
    the first byte's of the message.
    """
    out = []
    for case in cases:
        if not case.valid:
            continue
        for what, key, message, signature in (
                ("signature", case.public_key, case.message, _flip(case.signature, len(case.signature) // 2)),
                ("message", case.public_key, _flip(case.message, 0), case.signature),
                ("public key", _flip(case.public_key, len(case.public_key) // 2), case.message, case.signature)):
            out.append(VectorCase(case_id=case.case_id, comment=f"known answer, one {what} bit flipped",
                                  flags=(f"Flipped{what.title().replace(' ', '')}Bit",), public_key=key,
                                  message=message, signature=signature, valid=False, context=case.context))
    return tuple(out)


def _flip(data: bytes, at: int) -> bytes:
    if not data:
        return b"\x01"   # an empty message becomes a one-byte one: still a different message
    return data[:at] + bytes([data[at] ^ 1]) + data[at + 1:]


# --- the table: which sources each scheme is held to -----------------------------------------

def _sources() -> dict[str, tuple[VectorSource, ...]]:
    table: dict[str, list[VectorSource]] = {name: [] for name in scheme_names()}

    def add(scheme: str, label: str, origin: Callable[[], str], load: Callable[[], tuple[VectorCase, ...]],
            call: str = "verify") -> None:
        table[scheme].append(VectorSource(scheme, label, origin, load, call))

    def add_kat(scheme: str, label: str, origin: Callable[[], str], load: Callable[[], tuple[VectorCase, ...]]) -> None:
        add(scheme, label, origin, load)
        add(scheme, f"{label} bit flips", lambda: f"each case of {label} with one bit flipped", lambda: flipped(load()))

    for bits in (44, 65, 87):
        name, file = f"ML-DSA-{bits}", f"mldsa_{bits}_verify_test.json.gz"
        add(name, f"wycheproof mldsa_{bits}_verify", lambda f=file: _origin("wycheproof", f),
            lambda f=file: _wycheproof_plain(f))
        add(name, "acvp ML-DSA-sigVer-FIPS204", lambda: _origin("acvp", "ML-DSA-sigVer-FIPS204.json.gz"),
            lambda n=name: _acvp_mldsa(n))
    add("Ed25519", "wycheproof ed25519", lambda: _origin("wycheproof", "ed25519_test.json.gz"),
        lambda: _wycheproof_plain("ed25519_test.json.gz"))
    add("ECDSA-secp256k1", "wycheproof ecdsa_secp256k1_sha256_p1363 + low-S",
        lambda: _origin("wycheproof", "ecdsa_secp256k1_sha256_p1363_test.json.gz"),
        lambda: _wycheproof_p1363_low_s("ecdsa_secp256k1_sha256_p1363_test.json.gz"))
    add("ECDSA-secp256k1", "wycheproof ecdsa_secp256k1_sha256_bitcoin (DER layer)",
        lambda: _origin("wycheproof", "ecdsa_secp256k1_sha256_bitcoin_test.json.gz"),
        lambda: _wycheproof_bitcoin("ecdsa_secp256k1_sha256_bitcoin_test.json.gz"), call="der")
    add_kat("Falcon-512", "nist falcon512-KAT", lambda: _origin("nist_kat", "falcon512-KAT.rsp"), _nist_falcon512)
    for name in scheme_names():
        if backend_of(name, "liboqs") == "liboqs" and name != "Falcon-512":   # Falcon-512's liboqs KAT is NIST's file
            first = " (first entry)" if name in KAT_FIRST_ENTRY_ONLY else ""
            add_kat(name, f"liboqs KAT {name}{first}",
                    lambda n=name: f"liboqs {_liboqs_version()} kat_sig {n}, checked against its kats.json",
                    lambda n=name: _liboqs_kat(n))
    return {name: tuple(sources) for name, sources in table.items()}


def _liboqs_version() -> str:
    from qmemo.crypto.liboqs import liboqs_version

    return liboqs_version()


@cache
def sources_of(name: str) -> tuple[VectorSource, ...]:
    """The sources a registered scheme is held to, in a stable order."""
    return _all_sources()[canonical_name(name)]


@cache
def _all_sources() -> dict[str, tuple[VectorSource, ...]]:
    return _sources()


def origin_of(source: VectorSource) -> str:
    """A source's origin text (repository, commit, path), or why it cannot be given."""
    try:
        return source.origin()
    except SetupError as exc:
        return exc.detail


def verifier_label(name: str, verifier: str) -> str:
    """`verifier` where scheme `name` has two ("fast", "liboqs"), else its one library ("libsodium")."""
    return verifier if len(verifiers_of(name)) > 1 else backend_of(canonical_name(name), verifier)


@cache
def cases_of(source: VectorSource) -> tuple[VectorCase, ...]:
    return source.load()


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
