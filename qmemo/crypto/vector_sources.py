"""Which third-party sources each registered scheme is held to, each read into cases.

One reader per source: Wycheproof's files (ML-DSA, Ed25519, and the two ECDSA secp256k1
files with their keys compressed as the registry takes them; qmemo.crypto.vectors says
why those two), NIST ACVP's ML-DSA sigVer groups, and the known-answer files (NIST's
falcon512-KAT.rsp and liboqs's kat_sig output), whose signed messages are split into the
registry's signature format. The bytes come checked from qmemo.crypto.vector_files.

A reader never changes a verdict it reads: a case's expected verdict is the source's, plus
the low-S rule where the label says so; the "bit flips" cases derived from a KAT are
invalid by construction.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache

from qmemo.crypto.schemes import backend_of, canonical_name, scheme_names
from qmemo.crypto.vector_files import (
    KAT_FIRST_ENTRY_ONLY,
    NIST_FALCON512_HEADER,
    file_origin,
    kat_output,
    nist_falcon512_kat,
    read_vector_file,
)
from qmemo.errors import SetupError

# secp256k1's group order: a signature's s above half of it is "high S", which
# libsecp256k1 (and so the registry) refuses, as Bitcoin's BIP 146 does.
SECP256K1_ORDER = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141


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


# --- known-answer tests (kat_sig's output, read into cases) ---------------------------------

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
        add(name, f"wycheproof mldsa_{bits}_verify", lambda f=file: file_origin("wycheproof", f),
            lambda f=file: _wycheproof_plain(f))
        add(name, "acvp ML-DSA-sigVer-FIPS204", lambda: file_origin("acvp", "ML-DSA-sigVer-FIPS204.json.gz"),
            lambda n=name: _acvp_mldsa(n))
    add("Ed25519", "wycheproof ed25519", lambda: file_origin("wycheproof", "ed25519_test.json.gz"),
        lambda: _wycheproof_plain("ed25519_test.json.gz"))
    add("ECDSA-secp256k1", "wycheproof ecdsa_secp256k1_sha256_p1363 + low-S",
        lambda: file_origin("wycheproof", "ecdsa_secp256k1_sha256_p1363_test.json.gz"),
        lambda: _wycheproof_p1363_low_s("ecdsa_secp256k1_sha256_p1363_test.json.gz"))
    add("ECDSA-secp256k1", "wycheproof ecdsa_secp256k1_sha256_bitcoin (DER layer)",
        lambda: file_origin("wycheproof", "ecdsa_secp256k1_sha256_bitcoin_test.json.gz"),
        lambda: _wycheproof_bitcoin("ecdsa_secp256k1_sha256_bitcoin_test.json.gz"), call="der")
    add_kat("Falcon-512", "nist falcon512-KAT", lambda: file_origin("nist_kat", "falcon512-KAT.rsp"), _nist_falcon512)
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


@cache
def cases_of(source: VectorSource) -> tuple[VectorCase, ...]:
    return source.load()
