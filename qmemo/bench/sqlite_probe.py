"""A look inside the store's SQLite, for `python -m qmemo.bench.node_store`: a pragma set when
its connection opens (`--pragma`), and the thread CPU of each statement, by store call
(`--statements`).

Why: the time of `keep_branch` and `append` alone does not say which statement a store's
cost is in, and trying a SQLite setting would otherwise take a wrapper patched over
`sqlite3.connect` (the figures it gave: docs/methodology.md section 12, "the store
measured again"). `ChainStore` takes the class of its connection, so the benchmark hands
it one made here, and the node keeps SQLite's own.
"""

from __future__ import annotations

import argparse
import re
import sqlite3
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence

# Settings of one connection, tried without changing the store, each with the values it
# takes (SQLite reads a word it does not know as 0, or ignores it: both are refused here).
# Not those the store sets itself (page_size, journal_mode, synchronous, mmap_size,
# cache_spill: it would set them again after these), nor those that change the file
# (auto_vacuum, user_version, ...: another store, not a setting), nor the write-ahead log's
# (the store keeps a rollback journal).
_INTEGER = (r"-?[0-9]{1,18}", "an integer")
PRAGMAS = {"cache_size": _INTEGER, "journal_size_limit": _INTEGER,
           "temp_store": (r"DEFAULT|FILE|MEMORY|[0-2]", "DEFAULT, FILE, MEMORY, 0, 1 or 2")}
_PRAGMA = re.compile(r"([A-Za-z_]+)=([A-Za-z0-9_-]+)")


def pragma(text: str) -> str:
    """`--pragma`'s type: NAME=VALUE, NAME one of PRAGMAS (any case) and VALUE one it takes;
    returned as `name=VALUE`. Nothing else reaches SQL."""
    match = _PRAGMA.fullmatch(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE")
    name, value = match[1].lower(), match[2]
    if name not in PRAGMAS:
        raise argparse.ArgumentTypeError(f"{name} is not one of the settings tried here ({', '.join(PRAGMAS)}); the "
                                         "store sets page_size, journal_mode, synchronous, mmap_size and cache_spill itself")
    values, described = PRAGMAS[name]
    if re.fullmatch(values, value, re.IGNORECASE) is None:
        raise argparse.ArgumentTypeError(f"{name} takes {described}, not {value!r}")
    return f"{name}={value}"


class StatementTimes:
    """Thread CPU (s) and calls per (store call, statement's first three words), over all
    blocks and over the last quarter; only while `phase` names the call being timed."""

    def __init__(self) -> None:
        self.seconds: dict[tuple[str, str], float] = defaultdict(float)
        self.seconds_last: dict[tuple[str, str], float] = defaultdict(float)
        self.calls: Counter[tuple[str, str]] = Counter()
        self.calls_last: Counter[tuple[str, str]] = Counter()
        self.phase: str | None = None
        self.in_last = False

    def add(self, sql: str, seconds: float) -> None:
        """One statement's CPU, under the call being timed (by its first three words: the
        table a statement writes, not its parameters, so a block's statements add up)."""
        assert self.phase is not None
        key = (self.phase, " ".join(sql.split()[:3]))
        self.seconds[key] += seconds
        self.calls[key] += 1
        if self.in_last:
            self.seconds_last[key] += seconds
            self.calls_last[key] += 1


def connection_class(pragmas: Sequence[str], times: StatementTimes | None,
                     took: dict[str, object]) -> type[sqlite3.Connection]:
    """The store's connection class: each of `pragmas` (checked by `pragma`) set when it opens,
    and what it reads back after that put in `took` (what SQLite took: MEMORY reads 2); each
    statement timed into `times` (None: none)."""

    class Connection(sqlite3.Connection):
        """SQLite's connection, its settings set first, its statements timed while a store
        call is named (so building the blocks and reading them back stay out)."""

        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)      # type: ignore[arg-type]
            for item in pragmas:
                name = item.partition("=")[0]
                super().execute(f"PRAGMA {item}")
                row = super().execute(f"PRAGMA {name}").fetchone()
                took[name] = row[0] if row else None

        def execute(self, sql: str, parameters: object = (), /) -> sqlite3.Cursor:    # type: ignore[override]
            return self._timed(super().execute, sql, parameters)

        def executemany(self, sql: str, parameters: object, /) -> sqlite3.Cursor:   # type: ignore[override]
            return self._timed(super().executemany, sql, parameters)

        @staticmethod
        def _timed(run: Callable[..., sqlite3.Cursor], sql: str, parameters: object) -> sqlite3.Cursor:
            if times is None or times.phase is None:
                return run(sql, parameters)
            started = time.thread_time()
            try:
                return run(sql, parameters)
            finally:
                times.add(sql, time.thread_time() - started)

    return Connection
