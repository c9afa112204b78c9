"""Reading a TOML table's fields: each helper checks one value and names its key in the error.

Shared by the manifest parser (qmemo.scenario.manifest) and the chaos plan
(qmemo.scenario.chaos): a typo in a manifest costs one `ConfigError` line naming the
key (`load.tps: must be a number, got 'x'`). Pure: no I/O.
"""

from __future__ import annotations

import math
from typing import Any

from qmemo.errors import ConfigError

# Zone and scenario names become part of tc class comments and log lines: keep them plain.
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_")


def table(raw: dict[str, Any], key: str) -> dict[str, Any]:
    value = raw.get(key, {})
    if not isinstance(value, dict):
        raise ConfigError(f"{key} must be a table")
    return value


def unknown(table: dict[str, Any], where: str, allowed: set[str]) -> None:
    extra = sorted(set(table) - allowed)
    if extra:
        raise ConfigError(f"{where}{extra[0]}: unknown key")


def number(table: dict[str, Any], key: str, where: str, default: float | None = None, *,
           minimum: float = 0.0, strict: bool = False) -> float:
    value = table.get(key, default)
    if value is None:
        raise ConfigError(f"{where}{key}: required")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{where}{key}: must be a number, got {value!r}")
    if value < minimum or (strict and value == minimum):
        raise ConfigError(f"{where}{key}: must be {'>' if strict else '>='} {minimum}, got {value}")
    return float(value)


def optional(table: dict[str, Any], key: str, where: str, **kwargs: Any) -> float | None:
    return None if table.get(key) is None else number(table, key, where, **kwargs)


def integer(table: dict[str, Any], key: str, where: str, default: int | None = None, *, minimum: int = 0) -> int:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where}{key}: must be a whole number, got {value!r}")
    if value < minimum:
        raise ConfigError(f"{where}{key}: must be >= {minimum}, got {value}")
    return value


def string(table: dict[str, Any], key: str, where: str, default: str | None = None,
           choices: tuple[str, ...] | None = None) -> str:
    value = table.get(key, default)
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}{key}: must be a non-empty string, got {value!r}")
    if choices is not None and value not in choices:
        raise ConfigError(f"{where}{key}: must be one of {', '.join(choices)}, got {value!r}")
    return value


def boolean(table: dict[str, Any], key: str, where: str, default: bool = False) -> bool:
    value = table.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"{where}{key}: must be true or false, got {value!r}")
    return value


def node_list(value: Any, key: str, where: str, nodes: int) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{where}{key}: must be a non-empty list of node indexes")
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int) or not 0 <= item < nodes:
            raise ConfigError(f"{where}{key}: {item!r} is not a node index 0..{nodes - 1}")
    if len(set(value)) != len(value):
        raise ConfigError(f"{where}{key}: a node is listed twice")
    return tuple(value)


def plain_name(value: str, key: str, where: str) -> str:
    if not set(value) <= _NAME_CHARS:
        raise ConfigError(f"{where}{key}: {value!r} may only hold a-z, 0-9, '-' and '_'")
    return value
