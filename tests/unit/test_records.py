"""qmemo.records: the one encoder/decoder and file helpers of the result files."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from qmemo.errors import DecodeError
from qmemo.records import FLATTEN, OMIT_NONE, decode, from_json, read_record, to_json, write_record


@dataclass(frozen=True, slots=True)
class Maybe:
    note: str | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True, slots=True)
class Holder:
    name: str
    maybe: Maybe | None = field(default=None, metadata=FLATTEN)


@dataclass(frozen=True, slots=True)
class Inner:
    count: int
    note: str | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True, slots=True)
class Outer:
    schema: str
    inner: Inner | None = field(default=None, metadata=FLATTEN)


def test_a_flattened_record_whose_fields_may_all_be_omitted_is_refused():
    # Maybe(None) would be written as no keys at all and read back as None, not Maybe(None)
    with pytest.raises(TypeError, match="cannot round-trip"):
        to_json(Holder("x", Maybe()))
    with pytest.raises(TypeError, match="cannot round-trip"):
        from_json(Holder, {"name": "x"})


def test_a_flattened_record_round_trips():
    for value in (Outer("t/1", Inner(3)), Outer("t/1", Inner(3, "n")), Outer("t/1")):
        assert from_json(Outer, to_json(value)) == value


def test_a_record_file_reads_back_what_was_written(tmp_path):
    write_record(tmp_path / "r.json", Outer("t/1", Inner(3)))
    assert read_record(Outer, "t/1", tmp_path / "r.json") == Outer("t/1", Inner(3))
    assert (tmp_path / "r.json").read_text().endswith("}\n")


def test_another_version_of_the_format_is_named_with_what_to_do():
    with pytest.raises(DecodeError, match=r"'t/0'.*it is a t/0 file.*re-run the command that wrote it"):
        decode(Outer, "t/1", {"schema": "t/0", "count": 1}, "r.json")
    with pytest.raises(DecodeError, match=r"^r.json is not a thing \(schema 'other/1'"):
        decode(Outer, "t/1", {"schema": "other/1"}, "r.json", "a thing")


def test_nan_is_not_written(tmp_path):
    with pytest.raises(ValueError):
        write_record(tmp_path / "r.json", {"x": float("nan")})


@dataclass(frozen=True, slots=True)
class Hashed:
    digest: bytes
    parent: bytes | None


def test_bytes_are_lowercase_hex_and_read_back_refusing_what_is_not_hex():
    assert to_json(Hashed(b"\xab\x01", None)) == {"digest": "ab01", "parent": None}
    assert from_json(Hashed, {"digest": "ab01", "parent": "00"}) == Hashed(b"\xab\x01", b"\x00")
    with pytest.raises(DecodeError, match=r"\$\.digest: 'xy' is not hex"):
        from_json(Hashed, {"digest": "xy", "parent": None})
    with pytest.raises(DecodeError, match=r"\$\.digest: expected a hex string, got int"):
        from_json(Hashed, {"digest": 7, "parent": None})
