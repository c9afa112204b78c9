"""Batch signature verification: many liboqs verifies in one native call.

Why: through ctypes every verify is a foreign call that releases and re-takes the
GIL. A node making thousands a second spends its time handing the GIL between its
verify threads and its event loop instead of overlapping them. `verify_batch` packs a
chunk into one buffer and calls `qmemo_verify_batch` (native/qmemo_batch.c beside this module, built by
scripts/setup.sh against the same liboqs), so the GIL is released once per chunk.

The native function is handed the scheme's length rule as data (`SchemeRules`, the one
rule `SignatureScheme.verify` and the chain core apply) and times each verify with
CLOCK_MONOTONIC, so results and per-signature latencies are the same as a loop of
single verifies would give.
"""

from __future__ import annotations

import ctypes
from array import array
from collections.abc import Sequence
from enum import IntEnum
from functools import cache

from qmemo.core.scheme_rules import SchemeRules
from qmemo.crypto.native_lib import LengthRule, load_library, native_length_rule, pack_items
from qmemo.errors import CryptoError

LIBRARY_FILE = "libqmemo_batch.so"


class Verdict(IntEnum):
    """One item's outcome in the native batch (the enum in qmemo_batch.c)."""

    UNCHECKED = 0       # its lengths ran past the blob (never for a blob built here)
    VALID = 1
    BAD_LENGTH = 2      # refused by the length rule: liboqs was not called
    BAD_SIGNATURE = 3   # the lengths fit; liboqs rejected it


# qmemo_batch.c returns SIZE_MAX instead of a count when the rule does not fit the OQS_SIG.
_RULE_MISMATCH = ctypes.c_size_t(-1).value


@cache
def _library() -> ctypes.CDLL:
    return load_library(LIBRARY_FILE, "the native batch verifier", [
        ("qmemo_verify_batch", ctypes.c_size_t, [ctypes.c_void_p, ctypes.POINTER(LengthRule), ctypes.c_size_t,
                                                 ctypes.c_char_p, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p,
                                                 ctypes.c_void_p]),
    ])


def verify_batch(oqs_sig: int, rules: SchemeRules,
                 items: Sequence[tuple[bytes, bytes, bytes]]) -> tuple[list[bool], list[int]]:
    """Verify (public_key, message, signature) items with the OQS_SIG at `oqs_sig`.

    Returns each item's validity and each verify's duration in nanoseconds.
    """
    verdicts, elapsed = _run(oqs_sig, rules, items)
    # Compared as plain ints: this is the node's hot path, and an IntEnum per item is not free.
    return [verdict == Verdict.VALID.value for verdict in verdicts], elapsed.tolist()


def batch_verdicts(oqs_sig: int, rules: SchemeRules,
                   items: Sequence[tuple[bytes, bytes, bytes]]) -> list[Verdict]:
    """Each item's `Verdict` under `rules`: which ones the length rule refused before liboqs."""
    verdicts, _ = _run(oqs_sig, rules, items)
    return [Verdict(verdict) for verdict in verdicts]


def _run(oqs_sig: int, rules: SchemeRules, items: Sequence[tuple[bytes, bytes, bytes]]) -> tuple[bytearray, array]:
    """The native call: raw verdicts and per-item durations (ns).

    CryptoError if `rules` does not fit the OQS_SIG (liboqs's key length, its longest
    signature): a programming error, never a property of the items.
    """
    count = len(items)
    if not count:
        return bytearray(), array("Q")
    # Only exact bytes: their len() is their size. Anything else is invalid (kept in place
    # as an empty item, which fails the length rule).
    blob, lengths = pack_items(items)
    verdicts = bytearray(count)
    elapsed = array("Q", bytes(8 * count))
    verdicts_pointer = (ctypes.c_char * count).from_buffer(verdicts)
    lengths_address, _ = lengths.buffer_info()
    elapsed_address, _ = elapsed.buffer_info()
    valid = _library().qmemo_verify_batch(oqs_sig, native_length_rule(rules), count, blob, len(blob), lengths_address,
                                          ctypes.addressof(verdicts_pointer), elapsed_address)
    if valid == _RULE_MISMATCH:
        raise CryptoError(f"the length rule of {rules.name} does not fit liboqs's sizes for it", code="rule_mismatch")
    return verdicts, elapsed
