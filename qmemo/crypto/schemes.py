"""The signature-scheme registry: one small interface over liboqs and the classical libraries.

Everything that signs or verifies in qMEMO goes through `SignatureScheme`: generate a
keypair, sign, verify, and the sizes and NIST level that the chain's rules and the
reports need. Schemes are looked up by name (`get_scheme("Falcon-512")`) or by the
one-byte id that transactions carry on the wire (`scheme_by_id(1)`).

The contract every implementation keeps, because a node feeds it attacker input:
`verify` never raises and never crashes the process for a bad signature, a wrong or
malformed key, a truncated or oversized signature, or a signature of another scheme;
it returns False. `sign` raises `MalformedKey` for a secret key of the wrong length.

Post-quantum schemes run on liboqs (built by scripts/setup.sh). Sign and verify call
liboqs directly through ctypes with `bytes` arguments: ctypes releases the GIL for
the call, so a pool of threads verifies on all cores, and nothing is copied on the
verify path. ECDSA secp256k1 runs on libsecp256k1 (coincurve), the implementation the
chains that use ECDSA run; Ed25519 on libsodium (PyNaCl).

Every `verify` first applies the scheme's length rule (`qmemo.core.scheme_rules.SchemeRules`,
the one rule the chain core and the native batch verifier apply too). Each registry entry
states what the rule needs that no library reports - whether signatures have one fixed
length - and names the backend that runs the scheme; a second implementation of a
scheme is a new backend in `_BACKENDS` and an entry that names it.
"""

from __future__ import annotations

import ctypes
import hashlib
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from qmemo.core.scheme_rules import SchemeRules
from qmemo.errors import CryptoError, MalformedKey, UnknownScheme

if TYPE_CHECKING:
    from qmemo.crypto.falcon_vt import FalconVtVerifier
    from qmemo.crypto.fast_verify import KeyCacheStats
    from qmemo.crypto.mldsa_vt import MldsaVtVerifier

# The verifiers a caller may choose for Falcon and ML-DSA (module docstring): "fast", qMEMO's
# own (falcon_vt, mldsa_vt), or liboqs's. Every other scheme has liboqs's (or its library's) only.
VERIFIERS = ("fast", "liboqs")
DEFAULT_VERIFIER = "fast"


@dataclass(frozen=True, slots=True)
class SchemeInfo:
    """What the rules, the wire format and the reports need to know about a scheme."""

    name: str
    scheme_id: int                 # the byte transactions and genesis files carry
    family: str                    # "Falcon", "ML-DSA", "SLH-DSA", "MAYO", "classical"
    nist_level: int                # claimed NIST security level (0: classical, pre-quantum)
    public_key_bytes: int
    secret_key_bytes: int
    max_signature_bytes: int
    fixed_signature_length: bool   # as its registry entry states (False: Falcon's compressed signatures)
    implementation: str            # which library and build runs ("liboqs 0.13.0 AVX2": the
                                   # code path liboqs's run-time CPU dispatch picks here)


@dataclass(frozen=True, slots=True)
class KeyPair:
    """A public/secret key pair; the secret never appears in repr() or logs."""

    scheme: str
    public_key: bytes
    secret_key: bytes = field(repr=False)


@dataclass(frozen=True, slots=True)
class RegistryEntry:
    """One registered scheme: what the protocol fixes about it, and which code runs it."""

    scheme_id: int                 # the byte transactions carry: never renumber, only add
    family: str                    # "Falcon", "ML-DSA", "SLH-DSA", "MAYO", "classical"
    fixed_signature_length: bool   # stated per scheme (libraries report only the maximum)
    backend: str                   # the implementation that runs it: a key of `_BACKENDS`
    fast_backend: str | None = None  # the "fast" verifier's backend, where the scheme has one


class SignatureScheme(ABC):
    """One signature scheme. Instances are stateless and safe to share across threads."""

    info: SchemeInfo
    rules: SchemeRules   # `info`'s length rule, applied before any library sees an input

    def _describe(self, info: SchemeInfo) -> None:
        self.info = info
        self.rules = SchemeRules.of(info)

    def _well_formed(self, public_key: bytes, message: bytes, signature: bytes) -> bool:
        """Exact `bytes` of lengths the rule allows: what every verify checks before its library."""
        return _all_bytes(public_key, message, signature) and self.rules.lengths_ok(len(public_key), len(signature))

    @property
    def name(self) -> str:
        return self.info.name

    @abstractmethod
    def keypair(self) -> KeyPair:
        """A fresh keypair from the operating system's randomness."""

    @abstractmethod
    def sign(self, secret_key: bytes, message: bytes) -> bytes:
        """The signature of `message`; raises MalformedKey for a key of the wrong length."""

    @abstractmethod
    def verify(self, public_key: bytes, message: bytes, signature: bytes) -> bool:
        """True only for a valid signature by `public_key`; never raises on bad input."""

    def verify_many(self, items: Sequence[tuple[bytes, bytes, bytes]]) -> tuple[list[bool], list[int]]:
        """`verify` for each (public_key, message, signature), and each call's duration (ns).

        The generic version loops in Python; liboqs schemes verify a whole batch in one
        native call (qmemo/crypto/batch.py), releasing the GIL once per batch.
        """
        results, durations = [], []
        for public_key, message, signature in items:
            started = time.perf_counter_ns()
            results.append(self.verify(public_key, message, signature))
            durations.append(time.perf_counter_ns() - started)
        return results, durations

    def _check_secret_key(self, secret_key: bytes) -> None:
        if not isinstance(secret_key, bytes) or len(secret_key) != self.info.secret_key_bytes:
            got = len(secret_key) if isinstance(secret_key, bytes) else type(secret_key).__name__
            raise MalformedKey(
                f"{self.name} secret keys are {self.info.secret_key_bytes} bytes, got {got}"
            )


# --- liboqs ---------------------------------------------------------------------------

class OqsScheme(SignatureScheme):
    """A liboqs signature scheme, called through ctypes (see module docstring)."""

    def __init__(self, name: str, entry: RegistryEntry) -> None:
        from qmemo.crypto.liboqs import cpu_extensions, liboqs_version, load_oqs, native

        oqs = load_oqs()
        if name not in oqs.get_enabled_sig_mechanisms():
            raise UnknownScheme(f"{name} is not enabled in this liboqs build")
        with oqs.Signature(name) as probe:
            details = probe.details
        self._lib = native()
        # One OQS_SIG per scheme for the life of the process: it holds only constants and
        # function pointers, so concurrent sign/verify calls on it are safe.
        self._sig = self._lib.OQS_SIG_new(name.encode())
        if not self._sig:
            raise UnknownScheme(f"liboqs could not create {name}")
        avx2 = cpu_extensions()["AVX2"]
        cpu_path = "AVX2" if avx2 else "portable"
        self._describe(SchemeInfo(
            name=name,
            scheme_id=entry.scheme_id,
            family=entry.family,
            nist_level=details["claimed_nist_level"],
            public_key_bytes=details["length_public_key"],
            secret_key_bytes=details["length_secret_key"],
            max_signature_bytes=details["length_signature"],
            fixed_signature_length=entry.fixed_signature_length,
            implementation=f"liboqs {liboqs_version()} {cpu_path}",
        ))

    def keypair(self) -> KeyPair:
        from qmemo.crypto.liboqs import load_oqs

        with load_oqs().Signature(self.name) as signer:
            public_key = bytes(signer.generate_keypair())
            secret_key = bytes(signer.export_secret_key())
        return KeyPair(self.name, public_key, secret_key)

    def sign(self, secret_key: bytes, message: bytes) -> bytes:
        self._check_secret_key(secret_key)
        out = ctypes.create_string_buffer(self.info.max_signature_bytes)
        out_len = ctypes.c_size_t(0)
        rc = self._lib.OQS_SIG_sign(self._sig, out, ctypes.byref(out_len), message, len(message), secret_key)
        if rc != 0:
            raise CryptoError(f"{self.name} signing failed (liboqs returned {rc})")
        return out.raw[: out_len.value]

    def verify(self, public_key: bytes, message: bytes, signature: bytes) -> bool:
        if not self._well_formed(public_key, message, signature):
            return False
        return self._lib.OQS_SIG_verify(self._sig, message, len(message), signature, len(signature), public_key) == 0

    def verify_many(self, items: Sequence[tuple[bytes, bytes, bytes]]) -> tuple[list[bool], list[int]]:
        from qmemo.crypto.batch import verify_batch

        return verify_batch(self._sig, self.rules, items)


class FastScheme(OqsScheme):
    """A liboqs scheme (liboqs makes its keys and signs) verified by one of qMEMO's own
    verifiers, named by its entry's fast_backend: falcon_vt (Falcon: variable-time
    hash-to-point, decoded keys cached) or mldsa_vt (ML-DSA: expanded keys cached).

    Its length rule is OqsScheme's (the native verifier checks the same sizes, compared
    here once); its key cache is one per scheme for the life of the process, shared by
    every thread, so a sender's key is prepared once however many threads verify.
    """

    def __init__(self, name: str, entry: RegistryEntry) -> None:
        import importlib

        super().__init__(name, entry)
        module_name, class_name = _FAST_VERIFIERS[entry.fast_backend or ""]
        module = importlib.import_module(module_name)
        self._fast = getattr(module, class_name)(name)
        sizes = (self._fast.public_key_bytes, self._fast.max_signature_bytes, self._fast.fixed_signature_length)
        if sizes != (self.info.public_key_bytes, self.info.max_signature_bytes, self.info.fixed_signature_length):
            raise CryptoError(f"the fast {name} verifier's sizes {sizes} are not liboqs's")
        self._describe(replace(self.info, implementation=module.description()))

    def verify(self, public_key: bytes, message: bytes, signature: bytes) -> bool:
        return self._fast.verify(public_key, message, signature)   # applies the same length rule

    def verify_many(self, items: Sequence[tuple[bytes, bytes, bytes]]) -> tuple[list[bool], list[int]]:
        return self._fast.verify_many(items)

    def cache_stats(self) -> KeyCacheStats:
        return self._fast.cache_stats()

    @property
    def fast(self) -> FalconVtVerifier | MldsaVtVerifier:
        """The verifier itself (its key cache is this scheme's), for native callers."""
        return self._fast


# fast_backend -> (module, verifier class): loaded only when a scheme asks for it.
_FAST_VERIFIERS = {
    "falcon-vt": ("qmemo.crypto.falcon_vt", "FalconVtVerifier"),
    "mldsa-vt": ("qmemo.crypto.mldsa_vt", "MldsaVtVerifier"),
}


# --- classical baselines ----------------------------------------------------------------

class Secp256k1Ecdsa(SignatureScheme):
    """ECDSA over secp256k1 via libsecp256k1 (coincurve): compressed keys, compact signatures.

    The message is hashed with SHA-256 before signing, as libsecp256k1 signs 32-byte
    digests. Signatures are the 64-byte compact form (r || s), as bench_c measures and
    as most chains carry them; they are low-S, and libsecp256k1 rejects high-S ones.
    """

    def __init__(self, name: str, entry: RegistryEntry) -> None:
        import coincurve
        import coincurve.ecdsa

        self._coincurve = coincurve
        self._ecdsa = coincurve.ecdsa
        self._describe(SchemeInfo(
            name=name, scheme_id=entry.scheme_id, family=entry.family, nist_level=0,
            public_key_bytes=33, secret_key_bytes=32, max_signature_bytes=64,
            fixed_signature_length=entry.fixed_signature_length,
            implementation=f"libsecp256k1 (coincurve {coincurve.__version__})",
        ))

    def keypair(self) -> KeyPair:
        key = self._coincurve.PrivateKey()
        return KeyPair(self.name, key.public_key.format(compressed=True), key.secret)

    def sign(self, secret_key: bytes, message: bytes) -> bytes:
        self._check_secret_key(secret_key)
        try:
            key = self._coincurve.PrivateKey(secret_key)
        except ValueError as exc:  # zero or above the group order
            raise MalformedKey(f"not a valid secp256k1 secret key: {exc}") from exc
        return self._ecdsa.serialize_compact(self._ecdsa.der_to_cdata(key.sign(message, hasher=_sha256)))

    def verify(self, public_key: bytes, message: bytes, signature: bytes) -> bool:
        if not self._well_formed(public_key, message, signature):
            return False
        try:
            der = self._ecdsa.cdata_to_der(self._ecdsa.deserialize_compact(signature))
            return bool(self._coincurve.PublicKey(public_key).verify(der, message, hasher=_sha256))
        except (ValueError, TypeError):  # not a curve point, r or s out of range
            return False


def _all_bytes(*values: object) -> bool:
    """Exactly `bytes` (not a subclass, whose len() could lie to the native code)."""
    return all(type(value) is bytes for value in values)


def _sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


class Ed25519(SignatureScheme):
    """Ed25519 via libsodium (PyNaCl). The secret key stored is the 32-byte seed."""

    def __init__(self, name: str, entry: RegistryEntry) -> None:
        import nacl
        import nacl.exceptions
        import nacl.signing

        self._signing = nacl.signing
        self._bad = (nacl.exceptions.BadSignatureError, nacl.exceptions.ValueError, nacl.exceptions.TypeError)
        self._describe(SchemeInfo(
            name=name, scheme_id=entry.scheme_id, family=entry.family, nist_level=0,
            public_key_bytes=32, secret_key_bytes=32, max_signature_bytes=64,
            fixed_signature_length=entry.fixed_signature_length,
            implementation=f"libsodium (PyNaCl {nacl.__version__})",
        ))

    def keypair(self) -> KeyPair:
        key = self._signing.SigningKey.generate()
        return KeyPair(self.name, bytes(key.verify_key), bytes(key))

    def sign(self, secret_key: bytes, message: bytes) -> bytes:
        self._check_secret_key(secret_key)
        return self._signing.SigningKey(secret_key).sign(message).signature

    def verify(self, public_key: bytes, message: bytes, signature: bytes) -> bool:
        if not self._well_formed(public_key, message, signature):
            return False
        try:
            self._signing.VerifyKey(public_key).verify(message, signature)
        except self._bad:
            return False
        return True


# --- the registry -------------------------------------------------------------------------

# Falcon's compressed signatures vary in length (up to the maximum liboqs reports); the
# padded variants, ML-DSA, SPHINCS+, MAYO and the classical schemes always have one length.
FIXED, VARIABLE = True, False

# The ids are part of the protocol (docs/protocol.md): never renumber one, only add.
_REGISTRY: dict[str, RegistryEntry] = {
    "Falcon-512": RegistryEntry(1, "Falcon", VARIABLE, "liboqs", fast_backend="falcon-vt"),
    "Falcon-padded-512": RegistryEntry(2, "Falcon", FIXED, "liboqs", fast_backend="falcon-vt"),
    "Falcon-1024": RegistryEntry(3, "Falcon", VARIABLE, "liboqs", fast_backend="falcon-vt"),
    "Falcon-padded-1024": RegistryEntry(4, "Falcon", FIXED, "liboqs", fast_backend="falcon-vt"),
    "ML-DSA-44": RegistryEntry(10, "ML-DSA", FIXED, "liboqs", fast_backend="mldsa-vt"),
    "ML-DSA-65": RegistryEntry(11, "ML-DSA", FIXED, "liboqs", fast_backend="mldsa-vt"),
    "ML-DSA-87": RegistryEntry(12, "ML-DSA", FIXED, "liboqs", fast_backend="mldsa-vt"),
    "SPHINCS+-SHA2-128f-simple": RegistryEntry(20, "SLH-DSA", FIXED, "liboqs"),
    "SPHINCS+-SHA2-128s-simple": RegistryEntry(21, "SLH-DSA", FIXED, "liboqs"),
    "MAYO-1": RegistryEntry(30, "MAYO", FIXED, "liboqs"),
    "MAYO-2": RegistryEntry(31, "MAYO", FIXED, "liboqs"),
    "Ed25519": RegistryEntry(100, "classical", FIXED, "libsodium"),
    "ECDSA-secp256k1": RegistryEntry(101, "classical", FIXED, "libsecp256k1"),
}
# backend -> the class that runs an entry: (registered name, entry) -> SignatureScheme.
_BACKENDS: dict[str, Callable[[str, RegistryEntry], SignatureScheme]] = {
    "liboqs": OqsScheme,
    "falcon-vt": FastScheme,
    "mldsa-vt": FastScheme,
    "libsodium": Ed25519,
    "libsecp256k1": Secp256k1Ecdsa,
}
_MADE: dict[tuple[str, str], SignatureScheme] = {}   # (name, backend) -> its one instance
_MAKING = threading.Lock()     # so that two threads never make (and share out) two instances
_BY_LOWER = {name.lower(): name for name in _REGISTRY}
_BY_ID = {entry.scheme_id: name for name, entry in _REGISTRY.items()}


def scheme_names() -> list[str]:
    """Every registered scheme, post-quantum first, in a stable order."""
    return list(_REGISTRY)


def canonical_name(name: str) -> str:
    """The registered spelling of `name` (case-insensitive), or UnknownScheme."""
    try:
        return _BY_LOWER[name.lower()]
    except (KeyError, AttributeError):
        raise UnknownScheme(f"unknown signature scheme {name!r}; known: {', '.join(_REGISTRY)}") from None


def get_scheme(name: str, verifier: str = DEFAULT_VERIFIER) -> SignatureScheme:
    """The shared instance of the scheme called `name` (case-insensitive), verifying with
    `verifier` (one of VERIFIERS; it matters only for a scheme with a fast verifier)."""
    name = canonical_name(name)
    return _instance(name, backend_of(name, verifier))


def backend_of(name: str, verifier: str = DEFAULT_VERIFIER) -> str:
    """The backend that verifies the registered scheme `name` when `verifier` is asked for."""
    if verifier not in VERIFIERS:
        raise UnknownScheme(f"unknown verifier {verifier!r}; known: {', '.join(VERIFIERS)}")
    entry = _REGISTRY[name]
    return entry.fast_backend if verifier == "fast" and entry.fast_backend else entry.backend


def verifiers_of(name: str) -> tuple[str, ...]:
    """The verifier names that give `name` distinct implementations ("fast", "liboqs" for
    Falcon and ML-DSA; one name - the default - for every other scheme)."""
    name = canonical_name(name)
    seen: dict[str, str] = {}
    for verifier in VERIFIERS:
        seen.setdefault(backend_of(name, verifier), verifier)
    return tuple(seen.values())


def _instance(name: str, backend: str) -> SignatureScheme:
    """One instance per (scheme, backend) for the life of the process."""
    scheme = _MADE.get((name, backend))
    if scheme is None:
        with _MAKING:
            scheme = _MADE.get((name, backend)) or _BACKENDS[backend](name, _REGISTRY[name])
            _MADE[(name, backend)] = scheme
    return scheme


def scheme_by_id(scheme_id: int, verifier: str = DEFAULT_VERIFIER) -> SignatureScheme:
    """The scheme a transaction's scheme byte names, or UnknownScheme."""
    try:
        name = _BY_ID[scheme_id]
    except KeyError:
        raise UnknownScheme(f"unknown signature scheme id {scheme_id}") from None
    return get_scheme(name, verifier)


def key_cache_stats_by_scheme(family: str | None = None) -> dict[str, KeyCacheStats]:
    """Each fast verifier's key cache made so far (of `family`'s schemes, "Falcon" or
    "ML-DSA", or all), by scheme name: one cache each."""
    return {scheme.info.name: scheme.cache_stats() for scheme in list(_MADE.values())
            if isinstance(scheme, FastScheme) and family in (None, scheme.info.family)}


def key_cache_stats(scheme: str | None = None, family: str = "Falcon") -> KeyCacheStats | None:
    """One scheme's key cache (`scheme`), or, without one, the `family`'s cache(s) in use.

    "In use" means looked up at least once; a node verifies one Falcon variant, so that
    is its cache, with its own capacity. Only when several variants were used are their
    figures summed, and then `schemes` names all of them (a capacity summed over caches
    is labelled as such, never as one cache's). None if no fast verifier was made
    (or not the one named).
    """
    from qmemo.crypto.fast_verify import KeyCacheStats

    by_scheme = key_cache_stats_by_scheme(None if scheme is not None else family)
    if scheme is not None:
        return by_scheme.get(canonical_name(scheme))
    in_use = [stats for stats in by_scheme.values() if stats.hits + stats.misses] or list(by_scheme.values())
    if len(in_use) <= 1:
        return in_use[0] if in_use else None
    return KeyCacheStats(sum(s.hits for s in in_use), sum(s.misses for s in in_use), sum(s.size for s in in_use),
                         sum(s.capacity for s in in_use), tuple(name for s in in_use for name in s.schemes))


def scheme_id_of(name: str) -> int:
    """The wire id of a scheme, without loading any native library."""
    return _REGISTRY[canonical_name(name)].scheme_id
