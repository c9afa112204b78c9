"""The node's heap: glibc's malloc told to serve megabyte buffers from mmap, for good; and
the cycle collector's young threshold (`GC_YOUNG_THRESHOLD`, below), which the node sets at
start and `qmemo bench node`'s in-process breakdown times its steps under.

Why: glibc raises its mmap threshold each time a large mapped block is freed (up to
32 MiB), so after the first block encoding (~10 MB at 6,000 Falcon-512 transactions) or
relay body is freed, every later one would come from the heap, between long-lived
transactions and cache entries, and the holes they leave cannot be given back: RSS
climbs while the memory in use stays level. Pinning the threshold
(`mallopt(M_MMAP_THRESHOLD, ...)`, which also ends the adjusting) keeps those buffers in
their own mappings, returned to the system when freed (a request the heap can serve from
a free chunk still comes from there: glibc maps only when it would otherwise grow the heap).

The two numbers: 1 MiB maps the block encodings and large relay bodies but not a
500-transaction request body (mapping every request costs node CPU per transaction);
and since a pinned mmap threshold also fixes glibc's trim threshold at 128 KiB, which
would give the heap's top back and take it again request after request, the trim
threshold is set to 32 MiB. The soaks and the node benchmarks behind both, with their
dates and commands, are in docs/soak.md ("Fifteen minutes at 3,000 TPS: fill, not leak;
then the heap pinned").

Linux with glibc only; elsewhere (musl, macOS) `pin_mmap_threshold` changes nothing and
says so. Process-wide: called once by the node's process entry (qmemo.net.server), not
by library code.
"""

from __future__ import annotations

import ctypes
import platform

# The cycle collector's young threshold the node runs with (qmemo.net.server, which also
# freezes what exists at start), and the admission breakdown of `qmemo bench node` times
# its steps under: Python's default is 700 allocations between young collections.
GC_YOUNG_THRESHOLD = 20_000
MMAP_THRESHOLD_BYTES = 1 << 20     # above a request body of 500 transactions, below a block's encoding
TRIM_THRESHOLD_BYTES = 32 << 20    # free heap top kept before it is given back (glibc's own rule: 2x the mmap threshold)
_M_TRIM_THRESHOLD = -1             # glibc's malloc.h
_M_MMAP_THRESHOLD = -3


def pin_mmap_threshold(threshold_bytes: int = MMAP_THRESHOLD_BYTES,
                       trim_bytes: int = TRIM_THRESHOLD_BYTES) -> bool:
    """Serve allocations of at least `threshold_bytes` that the heap cannot serve from free
    space from mmap from now on, and keep up to `trim_bytes` of free heap top; False if this
    is not glibc (or it refused)."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt(_M_MMAP_THRESHOLD, threshold_bytes) == 1 and mallopt(_M_TRIM_THRESHOLD, trim_bytes) == 1
