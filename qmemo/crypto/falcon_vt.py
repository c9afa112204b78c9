"""The fast Falcon verifier (native/falcon_vt.c) through ctypes.

Why: liboqs verifies Falcon in constant time for a secret message and re-decodes the
public key on every call; a chain's messages are public and its senders recur. The
native library verifies with liboqs 0.13's own PQClean code, variable-time
hash-to-point and a cache of decoded keys, and gives liboqs's verdict for every input
(tests/native/falcon_diff.c, tests/native/falcon_fuzz.c prove it case by case).

`FalconVtVerifier` applies exactly `OqsScheme.verify`'s length rules (a padded
signature must be exactly its fixed length), so swapping one for the other changes no
verdict. `verify_many` verifies a whole chunk in one native call (the GIL is released
once per chunk, as qmemo/crypto/batch.py does for liboqs), hashing the points of four
signatures at a time on liboqs's four-lane SHAKE256.

This module never imports liboqs-python itself; the native loader
(qmemo.crypto.native_lib) loads liboqs first so that the setup's liboqs is the one in
the process.
"""

from __future__ import annotations

import ctypes
from functools import cache

from qmemo.crypto.fast_verify import CachedVerifier, KernelHooks
from qmemo.crypto.native_lib import load_library
from qmemo.errors import CryptoError, UnknownScheme

LIBRARY_FILE = "libqmemo_falcon.so"

# About 4 KiB per cached key (the key's bytes and its NTT form): 16 MiB at the default.
DEFAULT_CACHE_CAPACITY = 4096

VARIANTS = ("Falcon-512", "Falcon-1024", "Falcon-padded-512", "Falcon-padded-1024")


@cache
def _library() -> ctypes.CDLL:
    u64_p, size_p = ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t)
    return load_library(LIBRARY_FILE, "the fast Falcon verifier", [
        ("qfv_variant", ctypes.c_int, [ctypes.c_char_p]),
        ("qfv_public_key_bytes", ctypes.c_size_t, [ctypes.c_int]),
        ("qfv_max_signature_bytes", ctypes.c_size_t, [ctypes.c_int]),
        ("qfv_implementation", ctypes.c_char_p, []),
        ("qfv_decoder", ctypes.c_char_p, []),
        ("qfv_select_implementation", ctypes.c_int, [ctypes.c_char_p]),
        ("qfv_cache_new", ctypes.c_void_p, [ctypes.c_size_t]),
        ("qfv_cache_free", None, [ctypes.c_void_p]),
        ("qfv_cache_stats", None, [ctypes.c_void_p, u64_p, u64_p, size_p, size_p]),
        ("qfv_verify_cached", ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t,
                                             ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]),
        ("qfv_admit_context_new", ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_int]),
        ("qfv_verify_batch", ctypes.c_size_t, [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_char_p,
                                               ctypes.c_uint64, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                               ctypes.c_void_p]),
    ])


def implementation() -> str:
    """Which PQClean code runs: "avx2" or "clean" (run-time choice, QMEMO_FALCON_IMPL overrides)."""
    return _library().qfv_implementation().decode()


def decoder() -> str:
    """Which s2 decoder the current implementation dispatches to: "bmi2" (AVX2 on a CPU with
    BMI2 + LZCNT) or "portable"; tests compare against what actually runs."""
    return _library().qfv_decoder().decode()


def select_implementation(name: str) -> None:
    """Switch the whole process to "clean" or "avx2" (for tests and benchmarks comparing both)."""
    if _library().qfv_select_implementation(name.encode()) != 0:
        raise CryptoError(f"Falcon implementation {name!r} is unknown or not available on this CPU")


# Which code does what in each build: PQClean's where we kept it, ours where we replaced it.
CODE_PATHS = {
    "avx2": "liboqs 0.13 PQClean key decoding and SHAKE256 (four lanes in batches), qMEMO AVX2 NTT, s2 decoder "
            "and sampler",
    "clean": "liboqs 0.13 PQClean portable verify_raw and key decoding, qMEMO s2 decoder and sampler",
}


def description(name: str | None = None) -> str:
    """What the scheme registry's `implementation` metadata says for this verifier (the
    code path chosen at run time), e.g. for the node's /metrics and `qmemo schemes`.
    It starts with the liboqs version, like every liboqs-backed scheme's."""
    from qmemo.crypto.liboqs import liboqs_version

    path = implementation()
    suffix = f" ({name})" if name else ""
    return (f"liboqs {liboqs_version()} + qMEMO fast verifier ({CODE_PATHS.get(path, path)}), "
            f"variable-time hash-to-point, cached key{suffix}")


class FalconVtVerifier(CachedVerifier):
    """One Falcon variant's fast verifier and its key cache. Thread-safe; verify never raises.

    `verify_many` hashes four signatures' points at a time (qfv_verify_batch): the node's
    batches go through it, and through the admission kernel's many-at-once hook."""

    def __init__(self, name: str, *, cache_capacity: int = DEFAULT_CACHE_CAPACITY) -> None:
        lib = _library()
        self.name = name
        self._variant = lib.qfv_variant(name.encode())
        if self._variant < 0:
            raise UnknownScheme(f"{name} is not a Falcon variant the fast verifier knows ({', '.join(VARIANTS)})")
        self.public_key_bytes = int(lib.qfv_public_key_bytes(self._variant))
        self.max_signature_bytes = int(lib.qfv_max_signature_bytes(self._variant))
        # qMEMO's rule for padded Falcon (as OqsScheme): one valid length, one encoding.
        self.fixed_signature_length = "padded" in name
        self._lib, self._prefix = lib, "qfv"
        self._cache = lib.qfv_cache_new(cache_capacity) if cache_capacity > 0 else None
        if cache_capacity > 0 and not self._cache:
            raise MemoryError(f"could not allocate a Falcon key cache of {cache_capacity} entries")

    def verify(self, public_key: bytes, message: bytes, signature: bytes) -> bool:
        if (
            type(public_key) is not bytes or type(message) is not bytes or type(signature) is not bytes
            or len(public_key) != self.public_key_bytes
            or not 0 < len(signature) <= self.max_signature_bytes
            or (self.fixed_signature_length and len(signature) != self.max_signature_bytes)
        ):
            return False
        return self._lib.qfv_verify_cached(self._cache, self._variant, public_key, len(public_key), message,
                                           len(message), signature, len(signature)) == 1

    def _batch(self, count: int, blob: bytes, lengths: int, ok: int, elapsed: int) -> None:
        self._lib.qfv_verify_batch(self._cache, self._variant, count, blob, len(blob), lengths,
                                   int(self.fixed_signature_length), ok, elapsed)

    def kernel_hooks(self) -> KernelHooks:
        """The admission kernel's slot for this variant: qfv_admit_verify (one signature) and
        qfv_admit_verify_many (four hashed together), with a context bound to this verifier's
        key cache. The kernel's table owns the context (it frees it with qfv_admit_context_free);
        the cache lives as long as this object, which the kernel keeps."""
        context = self._lib.qfv_admit_context_new(self._cache, self._variant)
        if not context:
            raise MemoryError("qfv_admit_context_new")
        address = lambda function: ctypes.cast(function, ctypes.c_void_p).value  # noqa: E731
        return KernelHooks(address(self._lib.qfv_admit_verify), address(self._lib.qfv_admit_verify_many), context,
                           address(self._lib.qfv_admit_context_free))
