"""The C baseline's summary.json: one schema (qmemo.bench.c_summary) for writer and reader.

The fixture folder tests/fixtures/c-baseline-quick is a recorded `qmemo bench c --quick`
run (re-record it with `.venv/bin/qmemo bench c --quick --out <new folder>` and copy the
JSON files). Rebuilding its summary from the per-benchmark files with today's code must
give back the stored summary.json: the fixture stays one the current code can produce.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from qmemo.bench.c_collect import build_summary
from qmemo.bench.c_runner import STEP_NAMES
from qmemo.bench.c_summary import (
    CSummary, Fingerprint, SchemeRow, StepRecord, read_summary, summary_from_json, summary_to_json, write_summary,
)
from qmemo.errors import DecodeError
from qmemo.records import from_json, to_json

FIXTURE = Path(__file__).parents[1] / "fixtures" / "c-baseline-quick"


@pytest.fixture(scope="module")
def stored() -> dict:
    return json.loads((FIXTURE / "summary.json").read_text())


def test_the_fixture_summary_is_rebuilt_from_its_benchmark_files(stored):
    # run_id, created, profile, wall_s and steps are the runner's bookkeeping of that
    # run (ids, clock readings, the argv it used): not in the benchmark files, so
    # they are passed in from the stored summary, as is the fingerprint of the machine
    # (qmemo.bench.fingerprint). Every figure is rebuilt.
    steps = {name: from_json(StepRecord, record) for name, record in stored["steps"].items()}
    rebuilt = build_summary(FIXTURE, run_id=stored["run_id"], created=stored["created"], profile=stored["profile"],
                            steps=steps, wall_s=stored["wall_s"], only=STEP_NAMES, all_steps=STEP_NAMES,
                            fingerprint=from_json(Fingerprint, stored["fingerprint"]))
    assert summary_to_json(rebuilt) == stored


def test_decoding_and_encoding_the_stored_summary_changes_nothing(stored):
    assert summary_to_json(summary_from_json(stored)) == stored


def test_written_summary_reads_back_equal(stored, tmp_path):
    summary = summary_from_json(stored)
    write_summary(tmp_path / "summary.json", summary)
    assert read_summary(tmp_path / "summary.json") == summary


def test_optional_scheme_fields_are_left_out_when_absent(stored):
    row = summary_from_json(stored).schemes["Falcon-512"]
    bare = replace(row, verify_preparsed_per_s=None, rates_from=None, signature_bytes_mean_sizes=None)
    encoded = to_json(bare)
    assert not {"verify_preparsed_per_s", "rates_from", "signature_bytes_mean_sizes"} & set(encoded)
    assert from_json(SchemeRow, encoded) == bare


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.update(schema="qmemo-c-baseline/0"), "not a C baseline"),
    (lambda d: d.pop("run_id"), "missing key 'run_id'"),
    (lambda d: d.update(surprise=1), "unknown key(s) surprise"),
    (lambda d: d["schemes"]["Falcon-512"].update(public_key_bytes="897"), "$.schemes.Falcon-512.public_key_bytes"),
    (lambda d: d["pool"].update(blocks=True), "$.pool.blocks"),
])
def test_a_summary_that_is_not_the_schema_is_refused_with_where(stored, mutate, message):
    data = json.loads(json.dumps(stored))
    mutate(data)
    with pytest.raises(DecodeError) as raised:
        summary_from_json(data, "$")
    assert message in str(raised.value)


def test_the_summary_dataclass_has_every_top_level_key(stored):
    assert [f for f in CSummary.__dataclass_fields__] == list(stored)


def test_the_fixture_validation_file_is_the_validators_schema():
    from qmemo.bench.c_validate import read_validation

    validation = read_validation(FIXTURE / "validate.json")
    assert to_json(validation) == json.loads((FIXTURE / "validate.json").read_text())
    falcon = validation.ratios["Falcon-512"]
    assert falcon.ring_effect == pytest.approx(falcon.ours_ring_median_us_per_op / falcon.ours_median_us_per_op)
