"""The node's heap setting: once pinned, a large buffer gets its own mapping even after
glibc's dynamic threshold was raised by freeing a larger one (what a block encoding does).

In a fresh interpreter, as at a node's start: glibc serves a large request from a free
chunk of the heap when it has one, so in a long-lived process (this suite's) where the
heap is already fragmented the outcome would depend on the tests run before."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")

_PROBE = """
import ctypes, sys
from qmemo.node.heap import MMAP_THRESHOLD_BYTES, pin_mmap_threshold

class MallInfo2(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                               "fsmblks", "uordblks", "fordblks", "keepcost")]
mallinfo2 = ctypes.CDLL(None).mallinfo2
mallinfo2.restype = MallInfo2
freed = bytearray(16 * 2**20)       # mapped; freeing it raises glibc's threshold to 16 MiB
del freed
pinned = pin_mmap_threshold() if sys.argv[1] == "pin" else None
before = mallinfo2().hblks
block = bytearray(4 * 2**20)        # a block encoding's size: below 16 MiB, above the pinned threshold
with_block = mallinfo2().hblks
del block
after_free = mallinfo2().hblks
small = bytearray(MMAP_THRESHOLD_BYTES // 4)    # a request body's size
with_small = mallinfo2().hblks
print(pinned, with_block - before, after_free - before, with_small - before)
"""


def _probe(mode: str) -> list[str]:
    return subprocess.run([sys.executable, "-c", _PROBE, mode], check=True, capture_output=True,
                          text=True).stdout.split()


def test_a_buffer_above_the_pinned_threshold_is_mapped_even_after_a_larger_one_was_freed():
    pinned, with_block, after_free, with_small = _probe("pin")
    assert pinned == "True"
    assert with_block == "1"        # its own mapping...
    assert after_free == "0"        # ...given back with it
    assert with_small == "0"        # a request body's size stays on the heap


def test_without_the_pin_the_same_buffer_comes_from_the_heap():
    # What the pin changes: glibc's own rule, after a large block was freed, keeps it in the heap.
    assert _probe("none")[1] == "0"
