"""What qMEMO's own verifiers share (falcon_vt.py, mldsa_vt.py): key-cache figures, the
batch layout their native libraries read, and the admission kernel's hooks.

Both native libraries (native/falcon_vt.c, native/mldsa_vt.c) keep each sender's
public key in a derived form in a bounded cache, verify whole batches in one call, and
offer the admission kernel (native/qmemo_admit.c) a verify function - and, where four
signatures share work, a many-at-once one - with a context pointer. This module only
describes those shapes and the plumbing both bindings share (`CachedVerifier`); the
libraries are loaded by their bindings through qmemo.crypto.native_lib, whose `pack_items`
lays a batch out.
"""

from __future__ import annotations

import ctypes
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from qmemo.crypto.native_lib import pack_items


@dataclass(frozen=True, slots=True)
class KeyCacheStats:
    """How a key cache is doing: counters since it was made.

    Each scheme (Falcon variant, ML-DSA parameter set) has a cache of its own; `schemes`
    names the scheme(s) the figures cover, so a capacity summed over several caches
    never passes for one's.
    """

    hits: int
    misses: int
    size: int        # keys held now
    capacity: int
    schemes: tuple[str, ...] = ()

    @property
    def hit_rate(self) -> float | None:
        lookups = self.hits + self.misses
        return self.hits / lookups if lookups else None


class KernelHooks(NamedTuple):
    """What the admission kernel's slot for one scheme needs (qmemo_admit.h): addresses of
    a `qmemo_admit_verify_fn`, optionally of a `qmemo_admit_verify_many_fn`, their context,
    and the function that frees the context when the slot goes (None: the caller keeps it
    alive, as it keeps the verifier)."""

    verify: int
    verify_many: int | None
    context: int | None
    free_context: int | None


class CachedVerifier:
    """What both bindings share: a native verifier whose key cache this object owns.

    A subclass sets `name`, `_lib` (the loaded library), `_cache` (its cache pointer, or
    None for no cache), `_prefix` ("qfv" or "qmv": the library's function names) and
    `_batch` (one native call over `pack_items`'s layout). Thread-safe as the library is.
    """

    name: str
    _lib: ctypes.CDLL
    _cache: int | None
    _prefix: str

    def close(self) -> None:
        """Free the key cache (only when no other thread is verifying with this verifier)."""
        cache_pointer, self._cache = self._cache, None
        if cache_pointer:
            getattr(self._lib, f"{self._prefix}_cache_free")(cache_pointer)

    def __del__(self) -> None:
        if getattr(self, "_cache", None):
            self.close()

    def verify_many(self, items: Sequence[tuple[bytes, bytes, bytes]]) -> tuple[list[bool], list[int]]:
        """Each item's validity and each verify's duration (ns), in one native call."""
        count = len(items)
        if not count:
            return [], []
        blob, lengths = pack_items(items)
        ok = bytearray(count)
        elapsed = array("Q", bytes(8 * count))
        ok_pointer = (ctypes.c_char * count).from_buffer(ok)
        self._batch(count, blob, lengths.buffer_info()[0], ctypes.addressof(ok_pointer), elapsed.buffer_info()[0])
        return [bool(b) for b in ok], elapsed.tolist()

    def _batch(self, count: int, blob: bytes, lengths: int, ok: int, elapsed: int) -> None:
        raise NotImplementedError

    def cache_stats(self) -> KeyCacheStats:
        hits, misses = ctypes.c_uint64(), ctypes.c_uint64()
        size, capacity = ctypes.c_size_t(), ctypes.c_size_t()
        getattr(self._lib, f"{self._prefix}_cache_stats")(self._cache, ctypes.byref(hits), ctypes.byref(misses),
                                                           ctypes.byref(size), ctypes.byref(capacity))
        return KeyCacheStats(hits.value, misses.value, size.value, capacity.value, (self.name,))
