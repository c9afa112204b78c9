"""Length-prefixed frames: `[u32 little-endian length][record]`, concatenated, nothing else.

The one binary container of qMEMO: transaction and block batches on the wire
(qmemo.net.wire names them and their limits) and the blocks and transactions a cleanly
stopped node keeps on disk (qmemo.node.persistence). It lives here, beside errors.py,
rather than in net/ or node/ because both use it and neither may import the other's
room upwards (node must never import net). Pure: no I/O, imports only qmemo.errors.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from qmemo.errors import DecodeError, TooLarge

_LENGTH = struct.Struct("<I")
_LENGTH_BYTES = _LENGTH.size


def encode_frames(records: Sequence[bytes]) -> bytes:
    """`[u32 LE length][record]` for each record, concatenated."""
    pack = _LENGTH.pack
    parts: list[bytes] = []
    append = parts.append
    for record in records:
        append(pack(len(record)))
        append(record)
    return b"".join(parts)


def decode_frames(body: bytes, max_count: int, what: str = "record") -> list[bytes]:
    """Split a framed body into its records; DecodeError if it is not exactly that,
    TooLarge (a DecodeError answered with 413) past `max_count` records."""
    records: list[bytes] = []
    append = records.append
    unpack = _LENGTH.unpack_from
    offset, size = 0, len(body)
    while offset < size:
        if len(records) >= max_count:
            raise TooLarge(f"more than {max_count} {what}s in one batch", code="batch_too_large")
        if size - offset < _LENGTH_BYTES:
            raise DecodeError(f"{what} {len(records)}: truncated length prefix", code="truncated")
        start = offset + _LENGTH_BYTES
        end = start + unpack(body, offset)[0]
        if end > size:
            raise DecodeError(f"{what} {len(records)}: length runs {end - size} bytes past the body",
                              code="truncated")
        append(body[start:end])
        offset = end
    return records
