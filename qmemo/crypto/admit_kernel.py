"""The native admission kernel's binding: a whole POST /txs batch in one foreign call.

Why: per transaction a node paid for `Transaction.decode` (three BLAKE3-512 digests
through the blake3 package, object construction) in Python before the signature check.
`AdmitKernel.admit(body, max_count)` hands exactly the bytes of a binary POST /txs body
to `qmemo_admit_batch` (native/qmemo_admit.c, built by scripts/setup.sh with BLAKE3's
official C code), which splits the frames, decodes each record with the rules of
`Transaction.decode`, computes the signing digest, id and sender, and verifies through
a per-scheme verifier table - the GIL released once for the whole batch. The table's
verifiers are the registry's: qMEMO's own (Falcon's, which the kernel hands four
signatures at a time, and ML-DSA's: `KernelHooks`, with the registry's own key caches)
or liboqs, each under the scheme's length rule handed down as data (`SchemeRules`, as
qmemo/crypto/batch.py does), so the rule lives in one place. What comes
back is one buffer of fixed-size records (`RECORD`), read with one `struct.iter_unpack`,
or turned into transactions in one call to `_qmemo_rows` (native/qmemo_rows.c, a
CPython extension built by the setup beside the kernel): `AdmitResults.transactions`.

Sameness with the Python core is checked, not assumed: tests/vectors/admit_kernel.json
(written by tests/vectors/make_vectors.py) is one case table for both, plus hypothesis
and libFuzzer runs. Failures say exactly what the Python path says: a broken frame
raises decode_frames's DecodeError/TooLarge, and `AdmitResults.decode_error(i)`
re-decodes a rejected record with `Transaction.decode` to give its exact error (a rare
path, so the messages live in one place).

The node's admission (qmemo.node.admission) calls `admit(body, max, verify=False)` on
its event loop, drops duplicates and rule failures from the compact records, then
`verify(results, select=...)` on a verify thread. This module never touches node state.
"""

from __future__ import annotations

import ctypes
import importlib.util
import struct
import sysconfig
import weakref
from collections.abc import Container, Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum
from functools import cache
from types import ModuleType
from typing import NamedTuple

from qmemo.core.transaction import Transaction
from qmemo.crypto.liboqs import SETUP_COMMAND
from qmemo.crypto.native_lib import LengthRule, load_library, native_length_rule
from qmemo.crypto.schemes import Ed25519, FastScheme, OqsScheme, Secp256k1Ecdsa, get_scheme
from qmemo.errors import DecodeError, SetupError, TooLarge, UnknownScheme
from qmemo.paths import NATIVE_DIR

LIBRARY_FILE = "libqmemo_admit.so"
# The records-to-transactions extension, built for the interpreter running (its ABI suffix).
ROWS_EXTENSION = NATIVE_DIR / f"_qmemo_rows{sysconfig.get_config_var('EXT_SUFFIX')}"

# qmemo_admit_record (native/qmemo_admit.h), field for field.
RECORD = struct.Struct("<IIBBBBIQQQQIHHIHH64s64s32s")
VERIFY_FLAG = 1               # QMEMO_ADMIT_VERIFY
# Byte offsets in a record of the fields read after a later `verify` (no full unpack):
# record_offset, record_length, status, verdict ...; verify_ns after chain_id and three u64s.
_VERDICT_AT = struct.calcsize("<IIB")
_VERIFY_NS_AT = struct.calcsize("<IIBBBBIQQQ")
_U64 = struct.Struct("<Q")
_FRAME_SPAN = struct.Struct("<II")          # record_offset, record_length: the record's place in the body

KEY_MEMORY = 1 << 14        # senders whose public key `AdmitResults.transactions` shares (~15 MB of Falcon-512 keys)

# Per record, `status`: index -> the DecodeError code Transaction.decode raises (0: decoded).
STATUS_CODES: tuple[str | None, ...] = (None, "truncated", "unsupported_version", "oversized", "trailing_bytes")


class Verdict(IntEnum):
    """What became of a decoded record's signature (enum qmemo_admit_verdict)."""

    NOT_CHECKED = 0
    VALID = 1
    INVALID = 2
    WRONG_CHAIN_ID = 3   # signed for another chain: never verified
    NO_VERIFIER = 4      # no native verifier set for its scheme: never verified


class KernelRecord(NamedTuple):
    """One result record, as `RECORD` unpacks it (offsets are into the body)."""

    record_offset: int
    record_length: int
    status: int
    verdict: int
    scheme_id: int
    reserved0: int
    chain_id: int
    nonce: int
    amount: int
    fee: int
    verify_ns: int
    public_key_offset: int
    public_key_length: int
    payload_length: int
    signature_offset: int
    signature_length: int
    reserved1: int
    id: bytes
    signing_digest: bytes
    sender: bytes

    @property
    def error_code(self) -> str | None:
        """The DecodeError code of a record that did not decode, else None."""
        return STATUS_CODES[self.status]


# qmemo_admit_batch's return codes (enum qmemo_admit_rc).
_FRAME_TRUNCATED_PREFIX, _FRAME_PAST_BODY, _FRAME_TOO_MANY = 1, 2, 3


@cache
def _library() -> ctypes.CDLL:
    size_p = ctypes.POINTER(ctypes.c_size_t)
    u64_p = ctypes.POINTER(ctypes.c_uint64)
    lib = load_library(LIBRARY_FILE, "the native admission kernel", [
        ("qmemo_admit_table_new", ctypes.c_void_p, []),
        ("qmemo_admit_table_free", None, [ctypes.c_void_p]),
        ("qmemo_admit_table_set", ctypes.c_int,
         [ctypes.c_void_p, ctypes.c_uint8, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]),
        ("qmemo_admit_table_set_with_rule", ctypes.c_int,
         [ctypes.c_void_p, ctypes.c_uint8, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
          ctypes.POINTER(LengthRule)]),
        ("qmemo_admit_table_set_oqs", ctypes.c_int,
         [ctypes.c_void_p, ctypes.c_uint8, ctypes.c_char_p, ctypes.POINTER(LengthRule)]),
        ("qmemo_admit_table_set_many", ctypes.c_int, [ctypes.c_void_p, ctypes.c_uint8, ctypes.c_void_p]),
        ("qmemo_admit_batch", ctypes.c_int,
         [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint32, ctypes.c_size_t, ctypes.c_uint,
          ctypes.c_void_p, ctypes.c_size_t, size_p, u64_p]),
        ("qmemo_admit_count", ctypes.c_int, [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t, size_p, u64_p]),
        ("qmemo_admit_verify", ctypes.c_size_t,
         [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]),
        ("qmemo_admit_table_set_classical", ctypes.c_int,
         [ctypes.c_void_p, ctypes.c_uint8, ctypes.c_char_p, ctypes.POINTER(LengthRule)]),
        ("qmemo_admit_merkle_root", ctypes.c_int, [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p]),
        ("qmemo_admit_record_size", ctypes.c_size_t, []),
        ("qmemo_admit_blake3_version", ctypes.c_char_p, []),
    ])
    if lib.qmemo_admit_record_size() != RECORD.size:
        raise SetupError(f"{NATIVE_DIR / LIBRARY_FILE} has {lib.qmemo_admit_record_size()}-byte records, this "
                         f"binding {RECORD.size}: rebuild it with `{SETUP_COMMAND}`")
    return lib


@cache
def _rows() -> ModuleType:
    """The `_qmemo_rows` extension (SetupError if it was not built for this interpreter)."""
    if not ROWS_EXTENSION.is_file():
        raise SetupError(f"the admission kernel's transaction builder is missing ({ROWS_EXTENSION}); "
                         f"run `{SETUP_COMMAND}`")
    spec = importlib.util.spec_from_file_location("_qmemo_rows", ROWS_EXTENSION)
    module = importlib.util.module_from_spec(spec)      # type: ignore[arg-type]
    spec.loader.exec_module(module)                     # type: ignore[union-attr]
    return module


def blake3_c_version() -> str:
    """The version of BLAKE3's C code inside the kernel."""
    return _library().qmemo_admit_blake3_version().decode()


@dataclass(frozen=True, slots=True)
class AdmitResults:
    """A batch's results: `count` records in `buffer`, with offsets into `body`."""

    body: bytes
    buffer: bytearray
    count: int

    def rows(self) -> Iterator[tuple]:
        """The raw record tuples (KernelRecord's field order): the cheap way to read them all."""
        return RECORD.iter_unpack(memoryview(self.buffer)[: self.count * RECORD.size])

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> KernelRecord:
        if not 0 <= index < self.count:
            raise IndexError(index)
        return KernelRecord._make(RECORD.unpack_from(self.buffer, index * RECORD.size))

    def records(self) -> list[KernelRecord]:
        return [KernelRecord._make(row) for row in self.rows()]

    def valid(self, positions: Sequence[int]) -> list[bool]:
        """Whether each record at `positions` was found VALID (read straight from the buffer)."""
        buffer, size = self.buffer, RECORD.size
        return [buffer[p * size + _VERDICT_AT] == Verdict.VALID for p in positions]

    def verify_ns(self, positions: Sequence[int]) -> list[int]:
        """The verify call's duration (ns) of each record at `positions` (0 if none ran)."""
        unpack, buffer, size = _U64.unpack_from, self.buffer, RECORD.size
        return [unpack(buffer, p * size + _VERIFY_NS_AT)[0] for p in positions]

    def frames(self, positions: Sequence[int]) -> bytes:
        """The records at `positions` as a framed batch (`[u32 length][record]` each), cut
        from the body: the body itself when every record is asked for, in order."""
        if len(positions) == self.count and (not positions or positions[-1] == self.count - 1):
            return self.body
        unpack, buffer, size, body = _FRAME_SPAN.unpack_from, self.buffer, RECORD.size, self.body
        parts = []
        for p in positions:
            offset, length = unpack(buffer, p * size)
            parts.append(body[offset - 4:offset + length])      # the frame: its length prefix, then the record
        return b"".join(parts)

    def transactions(self, keys: dict[bytes, bytes],
                     seen: tuple[Container[bytes], ...] = ()) -> list[Transaction | bytes | int]:
        """Per record, in one native call (`_qmemo_rows`): its status (an int) if it did not
        decode; its id (bytes) if that id is in one of `seen` (a duplicate: no object is
        made); else its `Transaction`, every field and digest as the kernel gave it -
        nothing parsed or hashed again. The public key is the one object `keys` (sender ->
        key, filled here, emptied at `KEY_MEMORY` senders) holds for its sender: a sender
        signs many transactions, and equal senders mean equal keys (the sender is a digest
        of scheme and key, computed by the kernel from this very record)."""
        return _rows().transactions(Transaction, self.body, self.buffer, self.count, keys, KEY_MEMORY, seen)

    def encoding(self, index: int) -> bytes:
        """Record `index`'s bytes: the transaction's canonical encoding if it decoded."""
        record = self[index]
        return self.body[record.record_offset:record.record_offset + record.record_length]

    def decode_error(self, index: int) -> DecodeError | None:
        """The DecodeError `Transaction.decode` gives record `index` (None if it decoded).

        Re-decoding keeps every message in one place (qmemo.core.transaction); a code
        that differs from the kernel's is a bug in one of them, raised as such.
        """
        code = self[index].error_code
        if code is None:
            return None
        try:
            Transaction.decode(self.encoding(index))
        except DecodeError as exc:
            if exc.code != code:
                raise AssertionError(f"kernel says {code}, Transaction.decode says {exc.code}") from exc
            return exc
        raise AssertionError(f"kernel says {code}, Transaction.decode accepts record {index}")


class AdmitKernel:
    """The admission kernel for one chain, with native verifiers for the schemes named.

    Set verifiers up before sharing the kernel between threads; after that `admit` and
    `verify` may run concurrently (each releases the GIL; the only state they change is
    the native sender-address cache, which a mutex guards).
    """

    def __init__(self, chain_id: int, schemes: Iterable[str] = ("Falcon-512",), *, verifier: str = "liboqs") -> None:
        self.chain_id = chain_id
        self._lib = lib = _library()
        _rows()     # its records become transactions there: without it, no kernel
        self._table = lib.qmemo_admit_table_new()
        if not self._table:
            raise MemoryError("qmemo_admit_table_new")
        self._finalizer = weakref.finalize(self, lib.qmemo_admit_table_free, self._table)
        self.verifiers: dict[int, str] = {}
        self._keep: list[object] = []     # what the table's slots point into (key caches)
        for name in schemes:
            self.set_verifier(name, verifier)

    @property
    def table(self) -> int:
        """The native verifier table's address, for the node's ledger (qmemo.node.ledger),
        which verifies through it; valid while this kernel lives."""
        return self._handle

    @property
    def _handle(self) -> int:
        """The native table; ValueError once closed (never a freed pointer to C)."""
        if not self._finalizer.alive:
            raise ValueError("this AdmitKernel is closed")
        return self._table

    def set_verifier(self, name: str, verifier: str) -> None:
        """Verify scheme `name` natively with the registry's `verifier` ("fast": qMEMO's own
        verifier and its key cache where the scheme has one - Falcon, ML-DSA - else liboqs),
        under the registry's length rule. UnknownScheme for a scheme with no native verifier."""
        scheme = get_scheme(name, verifier)
        if isinstance(scheme, (Ed25519, Secp256k1Ecdsa)):
            # The classical baselines on the libraries the registry calls (libsodium,
            # libsecp256k1), in C: the scheme comparison then measures signatures, not Python.
            which = b"ed" if isinstance(scheme, Ed25519) else b"k1"
            if self._lib.qmemo_admit_table_set_classical(self._handle, scheme.info.scheme_id, which,
                                                         native_length_rule(scheme.rules)) != 0:
                raise UnknownScheme(f"the admission kernel refused the native verifier for {scheme.name}")
            self.verifiers[scheme.info.scheme_id] = f"{scheme.info.implementation.split(' ')[0]} {scheme.name}"
            return
        if not isinstance(scheme, FastScheme):
            self.set_liboqs_verifier(name)
            return
        hooks, scheme_id, lib = scheme.fast.kernel_hooks(), scheme.info.scheme_id, self._lib
        if lib.qmemo_admit_table_set_with_rule(self._handle, scheme_id, hooks.verify, hooks.context, hooks.free_context,
                                               native_length_rule(scheme.rules)) != 0:
            if hooks.free_context and hooks.context:      # the table did not take it
                ctypes.CFUNCTYPE(None, ctypes.c_void_p)(hooks.free_context)(hooks.context)
            raise UnknownScheme(f"the admission kernel refused the fast verifier for {scheme.name}")
        if hooks.verify_many and lib.qmemo_admit_table_set_many(self._handle, scheme_id, hooks.verify_many) != 0:
            raise UnknownScheme(f"the admission kernel refused the batch entry of the fast verifier for {scheme.name}")
        self._keep.append(scheme.fast)     # its key cache is the slot's (and the registry's)
        self.verifiers[scheme_id] = f"fast {scheme.name}"

    def set_liboqs_verifier(self, name: str) -> None:
        """Verify scheme `name` natively with liboqs, under the registry's length rule."""
        scheme = get_scheme(name, "liboqs")
        if not isinstance(scheme, OqsScheme):
            raise UnknownScheme(f"the admission kernel has no native verifier for {scheme.name}")
        info = scheme.info
        rc = self._lib.qmemo_admit_table_set_oqs(self._handle, info.scheme_id, info.name.encode(),
                                                 native_length_rule(scheme.rules))
        if rc != 0:
            raise UnknownScheme(f"liboqs could not create {info.name}" if rc == -1 else
                                f"the length rule of {info.name} does not fit liboqs's sizes for it")
        self.verifiers[info.scheme_id] = f"liboqs {info.name}"

    def set_native_verifier(self, scheme_id: int, verify_function: int, context: int | None, label: str) -> None:
        """Plug in another native verifier (a test's callback, say): the address
        of a `qmemo_admit_verify_fn` and its context, which the caller keeps alive."""
        if self._lib.qmemo_admit_table_set(self._handle, scheme_id, verify_function, context, None) != 0:
            raise ValueError("qmemo_admit_table_set refused a NULL verify function")
        self.verifiers[scheme_id] = label

    def admit(self, body: bytes, max_count: int, *, verify: bool = True) -> AdmitResults:
        """Frame, decode, hash and (by default) verify a binary POST /txs body.

        Raises what decode_frames raises for a broken framing (DecodeError "truncated",
        TooLarge "batch_too_large"); a record that does not decode is its own result.
        """
        if type(body) is not bytes:
            body = bytes(body)
        limit = max(max_count, 0)     # as decode_frames: no room means any record is too many
        lib, count, detail = self._lib, ctypes.c_size_t(0), ctypes.c_uint64(0)
        # Framing first, to allocate exactly: zeroing room for max_count records costs more
        # than decoding them when max_count is large.
        rc = lib.qmemo_admit_count(body, len(body), limit, ctypes.byref(count), ctypes.byref(detail))
        if rc == 0:
            capacity = count.value
            buffer = bytearray(RECORD.size * capacity)
            out = (ctypes.c_char * len(buffer)).from_buffer(buffer) if capacity else None
            rc = lib.qmemo_admit_batch(self._handle, body, len(body), self.chain_id, limit,
                                       VERIFY_FLAG if verify else 0, out, capacity, ctypes.byref(count),
                                       ctypes.byref(detail))
        if rc == _FRAME_TOO_MANY:
            raise TooLarge(f"more than {max_count} transactions in one batch", code="batch_too_large")
        if rc == _FRAME_TRUNCATED_PREFIX:
            raise DecodeError(f"transaction {count.value}: truncated length prefix", code="truncated")
        if rc == _FRAME_PAST_BODY:
            raise DecodeError(f"transaction {count.value}: length runs {detail.value} bytes past the body",
                              code="truncated")
        if rc != 0:
            raise ValueError(f"qmemo_admit_batch refused its arguments (rc {rc})")
        return AdmitResults(body, buffer, count.value)

    def verify(self, results: AdmitResults, select: Sequence[bool] | bytes | bytearray | None = None) -> int:
        """Verify the NOT_CHECKED records of `results` (those `select` marks), in place.

        For a caller that drops duplicates and cheap rule failures first (admit with
        verify=False, then this). `select` may be a bytes/bytearray mask (non-zero:
        verify), taken as it is. Several threads may verify disjoint selections of one
        `results` at once. Returns how many were found valid.
        """
        if not results.count:
            return 0
        if select is not None and len(select) != results.count:
            raise ValueError(f"select has {len(select)} entries for {results.count} records")
        if select is None or isinstance(select, bytes):
            mask = select
        elif isinstance(select, bytearray):
            mask = bytes(select)
        else:
            mask = bytes(bool(flag) for flag in select)
        records = (ctypes.c_char * len(results.buffer)).from_buffer(results.buffer)
        return self._lib.qmemo_admit_verify(self._handle, results.body, len(results.body), records,
                                            results.count, mask)

    def close(self) -> None:
        """Free the native table now (also done when the kernel is garbage-collected)."""
        self._finalizer()
