"""`qmemo gen`'s exit codes, each one (docs/devnet.md lists them), and its thresholds.

The run itself needs nodes (tests/integration/test_devnet.py runs a real one); here the
command's own decisions are tested: run_load is replaced by a finished run built from
real bookkeeping (Timings -> summarize -> load_summary), so everything after the run -
the judgement, the message and the exit status - is the real code.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import qmemo.load.run
from qmemo.cli import main
from qmemo.load import thresholds as t
from qmemo.load.latency import ACCEPTED, Timings, summarize
from qmemo.load.run import RunResult
from qmemo.load.summary import load_summary

TARGET_TPS = 100.0


def finished_run(out: Path, *, commit_delay_s: float, committed_share: float = 1.0, unsent: int = 0) -> RunResult:
    """A 10 s run at 100 TPS whose first `committed_share` of transactions commit `commit_delay_s`
    after being sent; the last `unsent` were never sent (unaccounted if marked so below)."""
    intended = [i / TARGET_TPS for i in range(1000)]
    timings = Timings(intended)
    committed = int(len(intended) * committed_share)
    for i, at in enumerate(intended[:len(intended) - unsent]):
        timings.mark_sent(i, at)
        timings.mark_answer(i, at + 0.001, ACCEPTED)
        if i % 1000 < committed:
            timings.mark_committed(i, at + commit_delay_s)
    summary = summarize(timings, warmup_s=0.0, window_end_s=10.0)
    if unsent:   # a bookkeeping slip: a planned transaction that no outcome counts
        summary = replace(summary, counts=replace(summary.counts, unsent=0))
    file_summary = load_summary(summary, target_tps=TARGET_TPS, interrupted=False, block_interval_s=2.0)
    return RunResult(summary, TARGET_TPS, out, False, file_summary)


def run_gen(monkeypatch, tmp_path, result: RunResult | BaseException, *flags: str) -> int:
    def fake_run_load(config, quiet=False, genesis=None, on_status=None):
        if isinstance(result, BaseException):
            raise result
        return result
    monkeypatch.setattr(qmemo.load.run, "run_load", fake_run_load)
    return main(["gen", "--devnet", str(tmp_path), "--nodes", "http://127.0.0.1:9", "--out", str(tmp_path / "run"),
                 "--quiet", *flags])


def test_a_sound_run_exits_0(monkeypatch, tmp_path):
    run = finished_run(tmp_path, commit_delay_s=0.5)
    assert run_gen(monkeypatch, tmp_path, run, "--max-p99-ms", "1000", "--min-committed-share", "0.95") == t.EXIT_OK


def test_a_p99_above_the_bound_exits_3_and_says_so(monkeypatch, tmp_path, capsys):
    run = finished_run(tmp_path, commit_delay_s=1.5)
    assert run_gen(monkeypatch, tmp_path, run, "--max-p99-ms", "1000") == t.EXIT_THRESHOLD_MISSED
    assert "threshold missed: p99 intended -> committed latency 1,500" in capsys.readouterr().out


def test_a_committed_share_below_the_bound_exits_3(monkeypatch, tmp_path, capsys):
    run = finished_run(tmp_path, commit_delay_s=0.5, committed_share=0.8)
    assert run_gen(monkeypatch, tmp_path, run, "--min-committed-share", "0.9") == t.EXIT_THRESHOLD_MISSED
    assert "committed share 0.800" in capsys.readouterr().out


def test_no_threshold_means_no_judgement(monkeypatch, tmp_path):
    assert run_gen(monkeypatch, tmp_path, finished_run(tmp_path, commit_delay_s=60, committed_share=0.1)) == t.EXIT_OK


def test_unaccounted_transactions_exit_1_even_past_a_missed_threshold(monkeypatch, tmp_path):
    run = finished_run(tmp_path, commit_delay_s=1.5, unsent=10)
    assert run.summary.counts.accounted != run.summary.counts.planned
    assert run_gen(monkeypatch, tmp_path, run, "--max-p99-ms", "1000") == t.EXIT_FAILED


@pytest.mark.parametrize("flags", [
    ("--max-p99-ms", "0"),
    ("--max-p99-ms", "nan"),
    ("--min-committed-share", "1.5"),
    ("--min-committed-share", "0.9", "--sweep", "100:2:400"),
])
def test_a_bad_threshold_is_one_error_line_and_exit_1(monkeypatch, tmp_path, capsys, flags):
    assert run_gen(monkeypatch, tmp_path, AssertionError("must not run"), *flags) == t.EXIT_FAILED
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err


def test_an_unknown_flag_exits_2(monkeypatch, tmp_path):
    with pytest.raises(SystemExit) as caught:
        run_gen(monkeypatch, tmp_path, AssertionError("must not run"), "--max-p99", "x")
    assert caught.value.code == t.EXIT_USAGE


def test_ctrl_c_outside_the_run_exits_130(monkeypatch, tmp_path):
    assert run_gen(monkeypatch, tmp_path, KeyboardInterrupt()) == t.EXIT_INTERRUPTED


def test_nothing_committed_misses_a_p99_bound():
    summary = finished_run(Path("."), commit_delay_s=0.1, committed_share=0.0).file_summary
    assert t.missed(summary, t.Thresholds(max_p99_ms=10_000)) == \
        ["p99 intended -> committed latency not measured (nothing committed) > --max-p99-ms 10000"]


def test_failed_invariants_exit_4_below_unaccounted_and_above_thresholds():
    from qmemo.load.thresholds import EXIT_FAILED, EXIT_INVARIANTS, EXIT_OK, exit_code
    assert exit_code(True, [], invariants_hold=False) == EXIT_INVARIANTS == 4
    assert exit_code(True, ["p99 too high"], invariants_hold=False) == EXIT_INVARIANTS
    assert exit_code(False, [], invariants_hold=False) == EXIT_FAILED
    assert exit_code(True, [], invariants_hold=True) == EXIT_OK


@pytest.mark.parametrize(("hold", "accounted", "code"), [
    (True, True, t.EXIT_OK), (False, True, t.EXIT_INVARIANTS), (True, False, t.EXIT_FAILED)])
def test_a_sharded_sweep_fails_on_a_broken_invariant_or_a_lost_transaction(monkeypatch, tmp_path, hold, accounted,
                                                                            code):
    # A sweep stops at the first stage past the latency bounds (what it looks for, exit 0);
    # a stage whose invariants broke or whose transactions are unaccounted for fails it.
    import qmemo.load.shard_fleet
    import qmemo.load.shards
    from qmemo.load.shard_summary import Invariants

    assert main(["genesis", "--out", str(tmp_path / "devnet"), "--shards", "2", "--validators", "1",
                 "--accounts", "4", "--scheme", "Ed25519"]) == 0
    invariants = Invariants(hold, True, 100, 100, 0, 0, 0)

    def fake_run_sharded(config, sharded, pct, quiet=False, on_status=None):
        run = finished_run(config.out, commit_delay_s=0.5)
        return qmemo.load.shards.ShardedResult(replace(run.file_summary, invariants=invariants), config.out, False,
                                               accounted)

    def fake_fleet(config, sharded, pct, generators, part_args, on_status=None):
        assert generators == 2 and "--cross-shard" in part_args      # one process per shard by default
        return fake_run_sharded(config, sharded, pct)

    monkeypatch.setattr(qmemo.load.shards, "run_sharded", fake_run_sharded)
    monkeypatch.setattr(qmemo.load.shard_fleet, "run_sharded_fleet", fake_fleet)
    for generators in ([], ["--generators", "1"]):
        assert main(["gen", "--devnet", str(tmp_path / "devnet"), "--nodes", "http://127.0.0.1:9", *generators,
                     "--out", str(tmp_path / "run"), "--quiet", "--sweep", "100:2:400", "--stage", "1"]) == code
