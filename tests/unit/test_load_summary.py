"""The generator's summary.json and sweep.json: one schema (qmemo.load.summary) for writer and reader.

The verdicts (throughput saturated, latency saturated, generator behind) are the
writer's, made once in `load_summary`; these tests pin their rules (the reader only
reads them: tests/integration/test_report.py).
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from qmemo.errors import DecodeError
from qmemo.load.latency import LatencySummary, RunCounts, RunSummary
from qmemo.load.summary import (
    SUMMARY_SCHEMA, SWEEP_SCHEMA, LoadSummary, Sweep, load_summary, read_summary, read_sweep, sweep_row, write,
)
from qmemo.records import to_json

FIXTURES = Path(__file__).parents[1] / "fixtures"
BLOCK_S = 2.0


def latency(p50_ms: float, p99_ms: float) -> LatencySummary:
    return LatencySummary(10, {"p50": p50_ms, "p90": p99_ms, "p95": p99_ms, "p99": p99_ms, "p99.9": p99_ms},
                          p99_ms, p50_ms)


def run(committed_tps: float, *, p99_ms: float = 2500.0, behind: bool = False) -> RunSummary:
    counts = RunCounts(planned=100, sent=100, accepted=97, duplicate=0, committed=95,
                       rejected={"bad_nonce": 2, "mempool_full": 1}, lost=2, failed=0, unsent=0)
    return RunSummary(counts, latency(1200.0, p99_ms), latency(1100.0, p99_ms), latency(5.0, 40.0),
                      latency(0.1, 1.0), warmup_s=2.0, measured_s=10.0, committed_tps=committed_tps,
                      generator_fell_behind=behind)


def summary(committed_tps: float, target_tps: float = 200.0, **kw) -> LoadSummary:
    return load_summary(run(committed_tps, **kw), target_tps=target_tps, interrupted=False, block_interval_s=BLOCK_S)


def verdicts(s: LoadSummary) -> tuple[bool, bool, bool]:
    return s.throughput_saturated, s.latency_saturated, s.generator_fell_behind


def test_a_run_that_kept_up_is_not_saturated():
    s = summary(180.0)                       # 90% of the target: keeping up
    assert (verdicts(s), s.why, s.limited) == ((False, False, False), "", False)


@pytest.mark.parametrize("kw, expected, why", [
    ({"committed_tps": 5.0, "target_tps": 10.0}, (True, False, False), "committed < 90% of target"),
    ({"committed_tps": 200.0, "p99_ms": 3 * BLOCK_S * 1e3 + 1}, (False, True, False), "p99 > 3 block intervals"),
    ({"committed_tps": 200.0, "p99_ms": math.nan}, (False, True, False), "p99 > 3 block intervals"),  # none committed
    ({"committed_tps": 200.0, "behind": True}, (False, False, True), "generator fell behind"),
])
def test_each_verdict_is_kept_apart_and_named(kw, expected, why):
    s = summary(**kw)
    assert verdicts(s) == expected and s.why == why and s.limited


def test_latency_saturation_is_judged_on_inclusion_not_on_the_wait_for_finality():
    final_8s = run(200.0, p99_ms=8000.0)     # final = included + finality_depth blocks
    quick = replace(final_8s, intended_to_included=latency(1000.0, 2500.0))
    slow = replace(final_8s, intended_to_included=latency(1000.0, 3 * BLOCK_S * 1e3 + 1))
    judged = [load_summary(r, target_tps=200.0, interrupted=False, block_interval_s=BLOCK_S).latency_saturated
              for r in (quick, slow, final_8s)]
    assert judged == [False, True, True]     # no inclusion times (older runs): committed is judged


def test_a_run_that_committed_all_it_was_offered_is_not_throughput_saturated_however_slow():
    s = summary(200.0, p99_ms=20_000.0)
    assert not s.throughput_saturated and s.latency_saturated


def test_a_run_whose_generator_fell_behind_is_never_throughput_saturated():
    # it committed far below the target, but the generator did not offer the target
    s = summary(20.0, behind=True)
    assert verdicts(s) == (False, False, True) and s.why == "generator fell behind"


def test_unmeasured_latencies_are_null_not_nan():
    s = summary(200.0, p99_ms=math.nan)
    assert s.latency_ms.intended_to_committed.percentiles_ms["p99"] is None
    assert s.latency_ms.intended_to_committed.max_ms is None


def test_counts_carry_the_totals():
    counts = summary(180.0).counts
    assert (counts.rejected_total, counts.accounted) == (3, 95 + 3 + 2)


def test_summary_and_sweep_read_back_what_was_written(tmp_path):
    s = summary(150.0)
    write(tmp_path / "summary.json", s)
    assert read_summary(tmp_path / "summary.json") == s
    sweep = Sweep(SWEEP_SCHEMA, (sweep_row(summary(180.0), tmp_path / "a"), sweep_row(s, tmp_path / "b")))
    write(tmp_path / "sweep.json", sweep)
    assert read_sweep(tmp_path / "sweep.json") == sweep
    assert to_json(sweep.rows[1])["throughput_saturated"] is True and sweep.rows[1].run == str(tmp_path / "b")


def test_the_survival_ratio_is_kept_in_the_summary_and_its_sweep_row(tmp_path):
    from qmemo.load.node_stages import Survival

    figures = Survival(nodes=3, cores=2, verifier="fast", span_s=20.0, verifies=60_000, verify_cpu_s=0.6,
                       verify_us=10.0, verifies_per_core_s=1_500.0, ratio=0.015, committed_ratio=0.012)
    s = replace(summary(150.0), survival=figures)
    write(tmp_path / "summary.json", s)
    assert read_summary(tmp_path / "summary.json").survival == figures
    assert sweep_row(s, tmp_path).survival_ratio == 0.015 and sweep_row(summary(150.0), tmp_path).survival_ratio is None
    assert "survival" not in json.loads((write(tmp_path / "old.json", summary(1.0)), tmp_path / "old.json")[1].read_text())


def test_the_generators_cpu_per_offered_transaction_is_in_the_summary_its_sweep_row_and_its_table(tmp_path):
    from rich.console import Console

    from qmemo.load.summary_view import render_summary

    s = replace(summary(150.0), generator_cpu_s=0.25, generator_cpu_us_per_tx=2500.0)
    write(tmp_path / "summary.json", s)
    document = json.loads((tmp_path / "summary.json").read_text())
    assert (document["generator_cpu_s"], document["generator_cpu_us_per_tx"]) == (0.25, 2500.0)
    assert read_summary(tmp_path / "summary.json") == s and sweep_row(s, tmp_path).generator_cpu_us_per_tx == 2500.0
    console = Console(width=160, record=True)
    console.print(render_summary(s))
    text = console.export_text()
    assert "generator_cpu_us_per_tx" in text and "2,500.00" in text
    assert "generator_cpu_us_per_tx" not in to_json(summary(150.0))      # older files: absent, not null


def test_the_recorded_fixtures_are_in_the_current_schema():
    assert read_summary(FIXTURES / "devnet-run" / "summary.json").schema == SUMMARY_SCHEMA
    sweep = read_sweep(FIXTURES / "devnet-sweep" / "sweep.json")
    for row in sweep.rows:
        stage = read_summary(FIXTURES / "devnet-sweep" / Path(row.run).name / "summary.json")
        assert (verdicts(stage), stage.why, stage.committed_tps) == \
            ((row.throughput_saturated, row.latency_saturated, row.generator_fell_behind), row.why, row.committed_tps)


def test_an_older_or_other_file_is_refused(tmp_path):
    (tmp_path / "summary.json").write_text('{"schema": "qmemo-load-summary/1"}')
    with pytest.raises(DecodeError, match=r"'qmemo-load-summary/1'.*it is a qmemo-load-summary/1 file, from an older or newer qMEMO.*re-run"):
        read_summary(tmp_path / "summary.json")
    data = to_json(summary(150.0))
    data["extra"] = 1
    (tmp_path / "summary.json").write_text(json.dumps(data))
    with pytest.raises(DecodeError):
        read_summary(tmp_path / "summary.json")


def test_sweep_csv_writes_nan_for_a_latency_nothing_was_measured_for(tmp_path):
    from qmemo.load.run import write_sweep_csv

    row = sweep_row(summary(200.0, p99_ms=math.nan), tmp_path / "a")
    assert row.p99_ms is None
    write_sweep_csv(tmp_path / "sweep.csv", [row])
    header, line = (tmp_path / "sweep.csv").read_text().splitlines()
    cells = dict(zip(header.split(","), line.split(",")))
    assert (cells["p50_ms"], cells["p99_ms"], cells["latency_saturated"]) == ("1200.0", "nan", "True")
