"""Our native libraries (qmemo/crypto/native/, built by scripts/setup.sh into .deps/native):
one loader, and the data every native verifier is handed the same way.

- `load_library(file, what, functions)`: liboqs first, from the setup's folder (each of our
  libraries links against it, and it must be the one liboqs-python uses, never a system
  copy), a SetupError naming the setup command when the file is missing, then every
  function's result and argument types declared from one table: a binding is its table.
- `LengthRule`, `native_length_rule`: a scheme's length rule (`SchemeRules`, the one rule
  the core and every `SignatureScheme.verify` apply) as the C struct the libraries take.
- `pack_items`: a batch of (public key, message, signature) as one blob and its lengths,
  the layout the batch verifiers read.

A new native verifier is a table and a call here. Loading is the caller's to cache
(`functools.cache` on a module's `_library()`): a library is opened once per process.
"""

from __future__ import annotations

import ctypes
from array import array
from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

from qmemo.core.scheme_rules import SchemeRules
from qmemo.crypto.liboqs import SETUP_COMMAND, native
from qmemo.errors import SetupError
from qmemo.paths import NATIVE_DIR

# (function name, restype, argtypes): how the library's functions are called.
Signature = tuple[str, Any, Sequence[Any]]


def load_library(file: str, what: str, functions: Iterable[Signature]) -> ctypes.CDLL:
    """The library `file` in the setup's native folder, its `functions` typed; SetupError
    saying `what` is missing (and how to build it) when the file is not there."""
    native()
    path = NATIVE_DIR / file
    if not path.is_file():
        raise SetupError(f"{what} is missing ({path}); run `{SETUP_COMMAND}`")
    lib = ctypes.CDLL(str(path))
    for name, restype, argtypes in functions:
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = list(argtypes)
    return lib


class LengthRule(ctypes.Structure):
    """The length rule as data: qmemo_length_rule in qmemo_batch.c, and the admission
    kernel's qmemo_admit_length_rule (qmemo_admit.h), field for field."""

    _fields_ = [("public_key_bytes", ctypes.c_uint64), ("min_signature_bytes", ctypes.c_uint64),
                ("max_signature_bytes", ctypes.c_uint64)]


@cache
def native_length_rule(rules: SchemeRules) -> LengthRule:
    """`rules` as the native libraries take them (one instance per rule, kept alive here)."""
    return LengthRule(rules.public_key_bytes, rules.min_signature_bytes, rules.max_signature_bytes)


def pack_items(items: Sequence[tuple[bytes, bytes, bytes]]) -> tuple[bytes, array]:
    """One blob and its (public key, message, signature) lengths, three u64 per item: the
    layout the native batch verifiers read. Only exact `bytes` (their len() is their size):
    anything else becomes an empty item in its place, which fails every length rule."""
    parts: list[bytes] = []
    lengths = array("Q")
    for public_key, message, signature in items:
        if type(public_key) is not bytes or type(message) is not bytes or type(signature) is not bytes:
            public_key = message = signature = b""
        parts += (public_key, message, signature)
        lengths.extend((len(public_key), len(message), len(signature)))
    return b"".join(parts), lengths
