"""The node's C heap: glibc's malloc told to serve large buffers from mmap, for good.

Why (issue 12, docs/soak.md): in a 15-minute soak at 3,000 TPS a node's RSS swung
between 343 and 449 MiB after the warm-up and kept rising for the first ten minutes,
while the memory in use stayed level - `mallinfo2()` put the heap's in-use bytes at
192-204 MiB all along and its *free* bytes at 60-160 MiB, growing. glibc raises its mmap threshold each time a large mmapped block is freed (up to
32 MiB): after the first block encoding (~10 MB at 6,000 Falcon-512 transactions) or
request body is freed, every later one comes from the heap, between long-lived
transactions and cache entries, and the holes they leave cannot be given back. Pinning
the threshold (`mallopt(M_MMAP_THRESHOLD, ...)`, which also ends the adjusting) keeps
those buffers in their own mappings, returned to the system when freed. The same soak
with it: heap free bytes 5-22 MiB, RSS 298-346 MiB under load, every transaction final.

Linux with glibc only; elsewhere (musl, macOS) `pin_mmap_threshold` changes nothing and
says so. Process-wide: called once by the node's process entry (qmemo.net.server), not
by library code.
"""

from __future__ import annotations

import ctypes
import platform

MMAP_THRESHOLD_BYTES = 256 * 1024   # above a 50-transaction request body, below a block's encoding
_M_MMAP_THRESHOLD = -3              # glibc's malloc.h


def pin_mmap_threshold(threshold_bytes: int = MMAP_THRESHOLD_BYTES) -> bool:
    """Serve allocations of at least `threshold_bytes` from mmap from now on; False if this
    is not glibc (or it refused)."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt(_M_MMAP_THRESHOLD, threshold_bytes) == 1
