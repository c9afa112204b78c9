"""The ML-DSA verifier with cached expanded keys (native/mldsa_vt.c) through ctypes.

Why: liboqs re-derives everything an ML-DSA public key implies on every verify - the
matrix A expanded from rho with SHAKE128, tr = H(pk), t1 * 2^d in NTT form - which is
most of the work. A chain's senders recur, so the native library does it once per key
and keeps the result (A-hat, tr, NTT(t1 * 2^d): 22 KiB for ML-DSA-44, 67 KiB for
ML-DSA-87) in a bounded cache; the rest of the verify is liboqs 0.13's own pq-crystals
code. Its verdict is FIPS 204's, which is liboqs's portable verify's, on every CPU; on
an AVX2 CPU liboqs's own dispatch runs an AVX2 verify that accepts some signatures FIPS
204 rejects (native/mldsa_vt.h says which; tests/native/mldsa_diff.c shows it case by
case), and this verifier does not.

Timing: the verify's time depends on public data only (the key, the message, the
signature), like liboqs's; a cached key makes it faster than an uncached one, so it is
"variable-time" in the sense the reports use (docs/methodology.md).

`MldsaVtVerifier` applies `OqsScheme.verify`'s length rule (one key length, one
signature length), so swapping one for the other changes no verdict FIPS 204 gives.
This module never imports liboqs-python; the native loader (qmemo.crypto.native_lib) loads
liboqs first so that the setup's liboqs is the one in the process.
"""

from __future__ import annotations

import ctypes
from functools import cache

from qmemo.crypto.fast_verify import CachedVerifier, KernelHooks
from qmemo.crypto.native_lib import load_library
from qmemo.errors import CryptoError, UnknownScheme

LIBRARY_FILE = "libqmemo_mldsa.so"

VARIANTS = ("ML-DSA-44", "ML-DSA-65", "ML-DSA-87")

# A cache holds at most this many keys (each allocated only when a key arrives), and at
# most DEFAULT_CACHE_BYTES of them: 4,096 ML-DSA-44 keys (88 MiB), fewer of the larger sets.
DEFAULT_CACHE_KEYS = 4096
DEFAULT_CACHE_BYTES = 96 << 20

# Which code runs in each build: liboqs's everywhere but the two AVX2 changes.
CODE_PATHS = {
    "avx2": "liboqs 0.13 pq-crystals AVX2 ML-DSA with FIPS 204's z bound and use_hint",
    "ref": "liboqs 0.13 pq-crystals portable ML-DSA",
}


@cache
def _library() -> ctypes.CDLL:
    u64_p, size_p = ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t)
    return load_library(LIBRARY_FILE, "the ML-DSA verifier", [
        ("qmv_variant", ctypes.c_int, [ctypes.c_char_p]),
        ("qmv_public_key_bytes", ctypes.c_size_t, [ctypes.c_int]),
        ("qmv_signature_bytes", ctypes.c_size_t, [ctypes.c_int]),
        ("qmv_entry_bytes", ctypes.c_size_t, [ctypes.c_int]),
        ("qmv_implementation", ctypes.c_char_p, []),
        ("qmv_select_implementation", ctypes.c_int, [ctypes.c_char_p]),
        ("qmv_cache_new", ctypes.c_void_p, [ctypes.c_int, ctypes.c_size_t]),
        ("qmv_cache_free", None, [ctypes.c_void_p]),
        ("qmv_cache_stats", None, [ctypes.c_void_p, u64_p, u64_p, size_p, size_p]),
        ("qmv_verify_cached", ctypes.c_int, [ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t,
                                             ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_size_t]),
        ("qmv_verify_batch", ctypes.c_size_t, [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_char_p,
                                               ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]),
    ])


def implementation() -> str:
    """Which code runs: "avx2" or "ref" (liboqs's run-time test; QMEMO_MLDSA_IMPL overrides)."""
    return _library().qmv_implementation().decode()


def select_implementation(name: str) -> None:
    """Switch the whole process to "ref" or "avx2" (for tests and benchmarks comparing both)."""
    if _library().qmv_select_implementation(name.encode()) != 0:
        raise CryptoError(f"ML-DSA implementation {name!r} is unknown or not available on this CPU")


def description(name: str | None = None) -> str:
    """The registry's `implementation` metadata for this verifier (the code chosen at run time)."""
    from qmemo.crypto.liboqs import liboqs_version

    path = implementation()
    suffix = f" ({name})" if name else ""
    return (f"liboqs {liboqs_version()} + qMEMO ML-DSA verifier ({CODE_PATHS.get(path, path)}), "
            f"variable-time (cached expanded key){suffix}")


def default_capacity(name: str) -> int:
    """Keys a cache of `name` holds by default: DEFAULT_CACHE_KEYS within DEFAULT_CACHE_BYTES,
    a whole number of the cache's 8-way sets (it would round a capacity up to one)."""
    lib = _library()
    entry = int(lib.qmv_entry_bytes(lib.qmv_variant(name.encode()))) or 1
    return max(8, min(DEFAULT_CACHE_KEYS, DEFAULT_CACHE_BYTES // entry) // 8 * 8)


class MldsaVtVerifier(CachedVerifier):
    """One ML-DSA parameter set's verifier and its key cache. Thread-safe; verify never raises."""

    def __init__(self, name: str, *, cache_capacity: int | None = None) -> None:
        lib = _library()
        self.name = name
        self._variant = lib.qmv_variant(name.encode())
        if self._variant < 0:
            raise UnknownScheme(f"{name} is not an ML-DSA parameter set this verifier knows ({', '.join(VARIANTS)})")
        self.public_key_bytes = int(lib.qmv_public_key_bytes(self._variant))
        self.max_signature_bytes = int(lib.qmv_signature_bytes(self._variant))
        self.fixed_signature_length = True
        capacity = default_capacity(name) if cache_capacity is None else cache_capacity
        self._lib, self._prefix = lib, "qmv"
        self._cache = lib.qmv_cache_new(self._variant, capacity) if capacity > 0 else None
        if capacity > 0 and not self._cache:
            raise MemoryError(f"could not allocate an ML-DSA key cache of {capacity} entries")

    def verify(self, public_key: bytes, message: bytes, signature: bytes) -> bool:
        if (type(public_key) is not bytes or type(message) is not bytes or type(signature) is not bytes
                or len(public_key) != self.public_key_bytes or len(signature) != self.max_signature_bytes):
            return False
        return self._lib.qmv_verify_cached(self._cache, self._variant, public_key, len(public_key), message,
                                           len(message), signature, len(signature)) == 1

    def _batch(self, count: int, blob: bytes, lengths: int, ok: int, elapsed: int) -> None:
        self._lib.qmv_verify_batch(self._cache, self._variant, count, blob, len(blob), lengths, ok, elapsed)

    def kernel_hooks(self) -> KernelHooks:
        """The admission kernel's slot for this parameter set: qmv_verify_with_cache with this
        verifier's cache as its context (which knows its parameter set). No many-at-once
        entry: nothing of ML-DSA's is shared between signatures. The kernel keeps this
        object, so the cache outlives the slot."""
        if not self._cache:
            raise CryptoError(f"the admission kernel needs a key cache for {self.name} (cache_capacity > 0)")
        address = ctypes.cast(self._lib.qmv_verify_with_cache, ctypes.c_void_p).value
        return KernelHooks(address, None, self._cache, None)
