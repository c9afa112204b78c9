"""Batch signature verification: many liboqs verifies in one native call.

Why: through ctypes every verify is a foreign call that releases and re-takes the
GIL. A node making thousands a second spends its time handing the GIL between its
verify threads and its event loop instead of overlapping them. `verify_batch` packs a
chunk into one buffer and calls `qmemo_verify_batch` (native/qmemo_batch.c beside this module, built by
scripts/setup.sh against the same liboqs), so the GIL is released once per chunk.

The native function applies the same length rules as `OqsScheme.verify` and times each
verify with CLOCK_MONOTONIC, so results and per-signature latencies are the same as
a loop of single verifies would give.
"""

from __future__ import annotations

import ctypes
from array import array
from collections.abc import Sequence
from functools import cache

from qmemo.crypto.liboqs import REPO_ROOT, SETUP_COMMAND, native
from qmemo.errors import SetupError

LIBRARY = REPO_ROOT / ".deps" / "native" / "libqmemo_batch.so"


@cache
def _library() -> ctypes.CDLL:
    native()  # liboqs first, from the setup's folder (the batch library links against it)
    if not LIBRARY.is_file():
        raise SetupError(f"the native batch verifier is missing ({LIBRARY}); run `{SETUP_COMMAND}`")
    lib = ctypes.CDLL(str(LIBRARY))
    lib.qmemo_verify_batch.restype = ctypes.c_size_t
    lib.qmemo_verify_batch.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_uint64,
                                       ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    return lib


def verify_batch(oqs_sig: int, fixed_signature_length: bool,
                 items: Sequence[tuple[bytes, bytes, bytes]]) -> tuple[list[bool], list[int]]:
    """Verify (public_key, message, signature) items with the OQS_SIG at `oqs_sig`.

    Returns each item's validity and each verify's duration in nanoseconds.
    """
    count = len(items)
    if not count:
        return [], []
    parts: list[bytes] = []
    lengths = array("Q")
    for public_key, message, signature in items:
        if type(public_key) is not bytes or type(message) is not bytes or type(signature) is not bytes:
            # Only exact bytes: their len() is their size. Anything else is invalid (kept
            # in place as an empty item, which fails the length checks).
            public_key = message = signature = b""
        parts += (public_key, message, signature)
        lengths.extend((len(public_key), len(message), len(signature)))
    blob = b"".join(parts)
    ok = bytearray(count)
    elapsed = array("Q", bytes(8 * count))
    ok_pointer = (ctypes.c_char * count).from_buffer(ok)
    lengths_address, _ = lengths.buffer_info()
    elapsed_address, _ = elapsed.buffer_info()
    _library().qmemo_verify_batch(oqs_sig, count, blob, len(blob), lengths_address, int(fixed_signature_length),
                                  ctypes.addressof(ok_pointer), elapsed_address)
    return [bool(b) for b in ok], elapsed.tolist()
