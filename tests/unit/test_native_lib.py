"""The one loader of our native libraries and the item layout the batch verifiers read."""

from __future__ import annotations

import ctypes

import pytest

from qmemo.crypto import admit_kernel, batch, falcon_vt
from qmemo.crypto.native_lib import load_library, pack_items
from qmemo.errors import SetupError


def test_a_missing_library_says_what_it_is_and_how_to_build_it():
    with pytest.raises(SetupError, match=r"the test verifier is missing \(.*libqmemo_nothing\.so\); "
                                         r"run `scripts/setup.sh`"):
        load_library("libqmemo_nothing.so", "the test verifier", [])


def test_each_binding_gets_its_functions_typed_from_its_table():
    # The three libraries through the one loader: each declared function has its types.
    assert batch._library().qmemo_verify_batch.restype is ctypes.c_size_t
    assert falcon_vt._library().qfv_cache_stats.argtypes[0] is ctypes.c_void_p
    assert admit_kernel._library().qmemo_admit_blake3_version.restype is ctypes.c_char_p


def test_items_pack_as_one_blob_and_three_lengths_each_refusing_what_is_not_bytes():
    blob, lengths = pack_items([(b"pk", b"message", b"sig"), (bytearray(b"pk"), b"m", b"s"), (b"", b"", b"x")])
    assert blob == b"pkmessagesig" + b"x"
    assert lengths.tolist() == [2, 7, 3, 0, 0, 0, 0, 0, 1]      # the bytearray's item is empty: invalid
