"""Field readers shared by every wire object's JSON form, and the integer limits.

The JSON forms of transactions, headers, blocks and proofs are strict: an object has
exactly the documented keys, integers are JSON integers within their width (never
floats, strings or booleans), and byte strings are lowercase hex of the right length.
Strictness is what makes `from_json(to_json(x)) == x` and `to_json(from_json(j)) == j`
both hold, so two nodes can never disagree about what a JSON object means.

Why hex and not base64: BLAKE3 ids, hashes and addresses are read by people, pasted
into URLs and compared by eye, and hex has one spelling per byte string (we reject
uppercase); Python's base64 decoder also measured 3-4x slower than `bytes.fromhex`
here. The binary encoding is the compact form for bulk transfer.

Every failure raises `DecodeError` with a specific code. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from qmemo.errors import DecodeError

U8_MAX = 0xFF
U16_MAX = 0xFFFF
U32_MAX = 0xFFFF_FFFF
U64_MAX = 0xFFFF_FFFF_FFFF_FFFF


def expect_object(value: Any, keys: frozenset[str], what: str) -> Mapping[str, Any]:
    """`value` as a JSON object with exactly `keys`, or DecodeError."""
    if not isinstance(value, Mapping):
        raise DecodeError(f"{what} must be a JSON object", code="malformed")
    if value.keys() != keys:
        missing = sorted(keys - value.keys())
        extra = sorted(value.keys() - keys)
        raise DecodeError(f"{what}: missing keys {missing}, unknown keys {extra}", code="malformed")
    return value


def int_field(obj: Mapping[str, Any], key: str, maximum: int, what: str) -> int:
    """An integer in 0..maximum (a JSON integer, not a bool or float)."""
    value = obj[key]
    if type(value) is not int:
        raise DecodeError(f"{what}.{key} must be an integer", code="malformed")
    if not 0 <= value <= maximum:
        raise DecodeError(f"{what}.{key} = {value} is outside 0..{maximum}", code="out_of_range")
    return value


def hex_field(obj: Mapping[str, Any], key: str, what: str, *, length: int | None = None,
              max_length: int = U16_MAX) -> bytes:
    """`obj[key]` as bytes: see `parse_hex`."""
    return parse_hex(obj[key], f"{what}.{key}", length=length, max_length=max_length)


def parse_hex(text: Any, what: str, *, length: int | None = None, max_length: int = U16_MAX) -> bytes:
    """Lowercase hex of exactly `length` bytes (or at most `max_length`)."""
    if type(text) is not str:
        raise DecodeError(f"{what} must be a hex string", code="malformed")
    try:
        data = bytes.fromhex(text)
    except ValueError:
        raise DecodeError(f"{what} is not hex", code="malformed") from None
    # fromhex skips whitespace and accepts uppercase: neither has a place in one spelling.
    # (`text.lower() == text` is ~15x faster here than `text.islower()`.)
    if len(text) != 2 * len(data) or text.lower() != text:
        raise DecodeError(f"{what} must be lowercase hex without spaces", code="malformed")
    if length is not None and len(data) != length:
        raise DecodeError(f"{what} must be {length} bytes, got {len(data)}", code="out_of_range")
    if len(data) > max_length:
        raise DecodeError(f"{what} is {len(data)} bytes, more than {max_length}", code="oversized")
    return data
