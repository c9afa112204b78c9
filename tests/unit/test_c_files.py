"""qmemo.bench.c_files: the one reader of bench_c's per-benchmark files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qmemo.bench.c_files import ROW_KEY, completed_bench_file, read_bench_file
from qmemo.errors import DecodeError

FIXTURE = Path(__file__).parents[1] / "fixtures" / "c-baseline-quick"
# Files the C binary wrote (summary, validate and verify_implementations are written by Python).
FILES = sorted(p for p in FIXTURE.glob("*.json") if p.stem not in ("summary", "validate", "verify_implementations"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_recorded_benchmark_file_reads_with_its_one_row_key(path):
    bench = read_bench_file(path)
    raw = json.loads(path.read_text())
    assert (bench.benchmark, bench.ok, bench.results) == (raw["benchmark"], raw["ok"], raw["results"])
    if bench.benchmark in ROW_KEY:
        assert bench.rows == raw["results"][ROW_KEY[bench.benchmark]]


def test_a_second_spelling_of_the_row_list_is_not_read(tmp_path):
    raw = json.loads((FIXTURE / "verify.json").read_text())
    raw["results"]["rows"] = raw["results"].pop("schemes")     # not what a verify file calls them
    (tmp_path / "verify.json").write_text(json.dumps(raw))
    assert read_bench_file(tmp_path / "verify.json").rows == []


@pytest.mark.parametrize("mutate", [lambda d: d.pop("ok"), lambda d: d.update(extra=1),
                                    lambda d: d.update(schema="qmemo-c-bench/0")])
def test_an_envelope_that_is_not_the_c_binarys_is_refused(tmp_path, mutate):
    raw = json.loads((FIXTURE / "verify.json").read_text())
    mutate(raw)
    (tmp_path / "verify.json").write_text(json.dumps(raw))
    with pytest.raises(DecodeError):
        read_bench_file(tmp_path / "verify.json")


def test_a_failed_or_absent_benchmark_is_none(tmp_path):
    raw = json.loads((FIXTURE / "verify.json").read_text())
    raw["ok"] = False
    (tmp_path / "verify.json").write_text(json.dumps(raw))
    assert completed_bench_file(tmp_path / "verify.json") is None
    assert completed_bench_file(tmp_path / "absent.json") is None
