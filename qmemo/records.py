"""Result-file schemas as dataclasses: one encoder and one decoder for all of them.

A result file (the C baseline's summary.json, the load generator's summary.json and
sweep.json) is described once, as frozen dataclasses; the code that writes it calls
`to_json` and the code that reads it calls `from_json` on the same classes, so the two
cannot drift apart. Adding a field to a file is adding a field to its dataclass.

The decoder is strict: a missing key, an unknown key or a value of the wrong type is a
`DecodeError` naming the path of the offending value (a file of another version should
say so, not half-parse). Field metadata covers the two irregular shapes the files have:

    field(metadata=OMIT_NONE)   the key is left out when the value is None (and read as
                                None when absent), for figures only some runs measure;
    field(metadata=FLATTEN)     a nested dataclass whose keys sit inline in the parent
                                object (None when none of its keys is present).

Values are kept as they were read (an integer in a float field stays an integer), so
`to_json(from_json(cls, data)) == data` for every file the writer produced. A `bytes`
field is lowercase hex in JSON, as the node's API writes every byte string (hashes, ids).

Every result file names its format in a "schema" key ("qmemo-load-summary/3"); `decode`
checks it before decoding, and says plainly when a file is an older version of the same
format (re-run the command that wrote it) rather than listing key mismatches. The only
I/O here is `read_json` / `write_json` / `read_record` / `write_record` at the bottom,
the one place result files are read and written.

This module must import nothing from qmemo but the errors.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any, TypeVar, Union

from qmemo.errors import DecodeError

OMIT_NONE: Mapping[str, bool] = types.MappingProxyType({"omit_none": True})
FLATTEN: Mapping[str, bool] = types.MappingProxyType({"flatten": True})

T = TypeVar("T")


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _optional_inner(tp: Any) -> Any:
    """X for `X | None`, else None."""
    if typing.get_origin(tp) in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(tp)) == 2:
            return args[0]
    return None


def to_json(value: Any) -> Any:
    """A dataclass (or a container of them) as plain JSON values, keys in field order."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        _keys(type(value))   # refuses a layout that cannot be read back, before writing it
        out: dict[str, Any] = {}
        for f in dataclasses.fields(value):
            item = getattr(value, f.name)
            if f.metadata.get("flatten"):
                if item is not None:
                    out.update(to_json(item))
            elif not (item is None and f.metadata.get("omit_none")):
                out[f.name] = to_json(item)
        return out
    if isinstance(value, Mapping):
        return {key: to_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(item) for item in value]
    if isinstance(value, bytes):
        return value.hex()
    return value


def from_json(cls: type[T], data: Any, where: str = "$") -> T:
    """Decode `data` (parsed JSON) as the dataclass `cls`; DecodeError on any mismatch."""
    return _decode(cls, data, where)


@cache
def _keys(cls: type) -> frozenset[str]:
    """Every JSON key a dataclass's object may hold, flattened fields included (computed
    once per class: it is asked for every object decoded)."""
    keys: set[str] = set()
    for f in dataclasses.fields(cls):
        if f.metadata.get("flatten"):
            inner = _optional_inner(_hints(cls)[f.name]) or _hints(cls)[f.name]
            if all(g.metadata.get("omit_none") for g in dataclasses.fields(inner)):
                # Its all-None value would encode to no keys at all and read back as None.
                raise TypeError(f"{cls.__name__}.{f.name}: a FLATTEN field needs a field that is never "
                                f"omitted in {inner.__name__}, or it cannot round-trip")
            keys |= _keys(inner)
        else:
            keys.add(f.name)
    return frozenset(keys)


def _decode_dataclass(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, Mapping):
        raise DecodeError(f"{where}: expected an object for {cls.__name__}, got {type(data).__name__}")
    unknown = set(data) - _keys(cls)
    if unknown:
        raise DecodeError(f"{where}: unknown key(s) {', '.join(sorted(unknown))} for {cls.__name__}")
    hints = _hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if f.metadata.get("flatten"):
            inner = _optional_inner(tp) or tp
            present = {k: v for k, v in data.items() if k in _keys(inner)}
            values[f.name] = _decode(inner, present, where) if present else None
        elif f.name in data:
            values[f.name] = _decode(tp, data[f.name], f"{where}.{f.name}")
        elif f.metadata.get("omit_none"):
            values[f.name] = None
        else:
            raise DecodeError(f"{where}: missing key {f.name!r} for {cls.__name__}")
    return cls(**values)


def _decode(tp: Any, data: Any, where: str) -> Any:
    if tp is Any:
        return data
    inner = _optional_inner(tp)
    if inner is not None:
        return None if data is None else _decode(inner, data, where)
    if dataclasses.is_dataclass(tp):
        return _decode_dataclass(tp, data, where)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (dict, Mapping):
        if not isinstance(data, Mapping):
            raise DecodeError(f"{where}: expected an object, got {type(data).__name__}")
        return {key: _decode(args[1], item, f"{where}.{key}") for key, item in data.items()}
    if origin in (list, tuple):
        if not isinstance(data, list):
            raise DecodeError(f"{where}: expected a list, got {type(data).__name__}")
        items = [_decode(args[0], item, f"{where}[{i}]") for i, item in enumerate(data)]
        return tuple(items) if origin is tuple else items
    return _scalar(tp, data, where)


def _scalar(tp: Any, data: Any, where: str) -> Any:
    if tp is bytes:
        return _hex(data, where)
    # bool is an int in Python, and an integer is a fine float in JSON; nothing else mixes.
    ok = {bool: isinstance(data, bool),
          int: isinstance(data, int) and not isinstance(data, bool),
          float: isinstance(data, (int, float)) and not isinstance(data, bool),
          str: isinstance(data, str)}.get(tp)
    if ok is None:
        raise TypeError(f"{where}: records cannot decode the type {tp!r}")
    if not ok:
        raise DecodeError(f"{where}: expected {tp.__name__}, got {type(data).__name__} {data!r}")
    return data


def _hex(data: Any, where: str) -> bytes:
    if not isinstance(data, str):
        raise DecodeError(f"{where}: expected a hex string, got {type(data).__name__} {data!r}")
    try:
        return bytes.fromhex(data)
    except ValueError:
        raise DecodeError(f"{where}: {data[:40]!r} is not hex") from None


# --- files ------------------------------------------------------------------------------------

def _version(schema: str) -> tuple[str, str]:
    name, _, version = schema.rpartition("/")
    return name, version


def decode(cls: type[T], schema: str, data: Any, where: str, what: str | None = None) -> T:
    """`data` as `cls` if its "schema" is `schema`; DecodeError (one line) otherwise.
    `what` names the file for people ("a C baseline"; default: "a <schema> file")."""
    found = data.get("schema") if isinstance(data, Mapping) else None
    if found != schema:
        message = f"{where} is not {what or f'a {schema} file'} (schema {found!r}, expected {schema!r})"
        if isinstance(found, str) and _version(found)[0] == _version(schema)[0]:
            message += (f": it is a {found} file, from an older or newer qMEMO, which this one does not read; "
                        "re-run the command that wrote it")
        raise DecodeError(message)
    return from_json(cls, data, where)


def read_json(path: Path) -> Any:
    """A JSON file's content; DecodeError if it is not JSON (OSError if unreadable)."""
    try:
        return json.loads(path.read_bytes())
    except ValueError as exc:
        raise DecodeError(f"{path} is not JSON: {exc}") from exc


def write_json(path: Path, data: Any) -> None:
    """Write atomically (a reader never sees half a file), indented, a newline at the end.
    NaN is not JSON: ValueError (a value nothing was measured for is None, null)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, allow_nan=False) + "\n")
    tmp.replace(path)


def read_record(cls: type[T], schema: str, path: Path, what: str | None = None) -> T:
    """The result file at `path` as `cls`, its schema checked."""
    return decode(cls, schema, read_json(path), str(path), what)


def write_record(path: Path, record: Any) -> None:
    write_json(path, to_json(record))
