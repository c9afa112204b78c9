"""The C benchmarks' own files ("qmemo-c-bench/1"): one typed reader for every consumer.

Every `qmemo-bench <benchmark> --json FILE` writes the same envelope (bench_c/src/main.c,
docs/benchmarks.md) around a benchmark-specific `results` object. The envelope is a
dataclass here, decoded strictly (qmemo.records): a missing or unknown key is an error.
`results` stays a mapping, since each benchmark shapes it its own way; but the list of
per-scheme rows in it has exactly one name per benchmark (`ROW_KEY`), so a reader never
guesses between spellings. qmemo.bench.c_collect (the summary) and qmemo.analysis.results
(the report) both read through this module; the C binary's JSON is not changed by it.

Reading only: the files are written by the C binary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qmemo.errors import DecodeError
from qmemo.records import read_record

BENCH_SCHEMA = "qmemo-c-bench/1"

# The key of each benchmark's row list inside `results` (pool has none: one scheme).
ROW_KEY = {"list": "schemes", "verify": "schemes", "statistical": "schemes", "sizes": "schemes",
           "invalid": "schemes", "inspect": "schemes", "all": "rows", "classical": "rows", "compare": "rows",
           "multicore": "rows"}


@dataclass(frozen=True, slots=True)
class BenchFile:
    """One benchmark's file: how it ran (the envelope) and what it measured (`results`)."""

    schema: str
    benchmark: str                      # the qmemo-bench subcommand ("list" for system.json)
    argv: list[str]
    params: dict[str, Any]
    system: dict[str, Any]              # the system header (docs/benchmarks.md)
    started_utc: str
    ok: bool                            # the benchmark finished and its checks passed
    exit_code: int
    finished_utc: str
    wall_s: float
    loadavg_end: Any
    # A benchmark that failed before it began its results leaves them out.
    results: dict[str, Any] | None = field(default=None)

    @property
    def rows(self) -> list[dict[str, Any]]:
        """The per-scheme (or per-thread-count) rows of `results`, under this benchmark's one key."""
        key = ROW_KEY.get(self.benchmark)
        if key is None:
            raise DecodeError(f"a {self.benchmark} file has no row list")
        return list((self.results or {}).get(key, []))


def read_bench_file(path: Path) -> BenchFile:
    """The benchmark file at `path`; OSError if unreadable, DecodeError if not this format."""
    return read_record(BenchFile, BENCH_SCHEMA, path, f"a {BENCH_SCHEMA} benchmark file")


def completed_bench_file(path: Path) -> BenchFile | None:
    """The file if it exists and its benchmark completed ("ok": true), else None.
    DecodeError (or OSError) if it exists but cannot be read."""
    if not path.exists():
        return None
    bench = read_bench_file(path)
    return bench if bench.ok else None
