"""The node's heap setting: once pinned, a large buffer gets its own mapping even after
glibc's dynamic threshold was raised by freeing a larger one (what a block encoding does)."""

from __future__ import annotations

import ctypes
import platform

import pytest

from qmemo.node.heap import MMAP_THRESHOLD_BYTES, pin_mmap_threshold

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]


def _mapped_blocks() -> int:
    mallinfo2 = ctypes.CDLL(None).mallinfo2
    mallinfo2.restype = _MallInfo2
    return mallinfo2().hblks


def test_a_buffer_above_the_pinned_threshold_is_mapped_even_after_a_larger_one_was_freed():
    freed = bytearray(16 * 2**20)       # mapped; freeing it raises glibc's threshold to 16 MiB
    del freed
    assert pin_mmap_threshold()
    before = _mapped_blocks()
    block = bytearray(4 * 2**20)        # a block encoding's size: below 16 MiB, above the pinned threshold
    assert _mapped_blocks() == before + 1
    del block
    assert _mapped_blocks() == before   # and its mapping is gone with it
    small = bytearray(MMAP_THRESHOLD_BYTES // 4)
    assert _mapped_blocks() == before   # a request body's size stays on the heap
    del small
