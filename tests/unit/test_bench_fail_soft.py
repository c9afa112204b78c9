"""Bench behaviour the review found changed: flags that must stay valid and a run that
must fail soft (qmemo.bench.node_bench, qmemo.bench.c_runner)."""

from __future__ import annotations

import argparse

import pytest

from qmemo.bench import c_runner
from qmemo.bench.node_bench import NodeBenchConfig
from qmemo.commands import bench_c
from qmemo.errors import ConfigError
from qmemo.records import read_json


def test_zero_verify_threads_is_a_valid_node_bench_run():
    # 0: the node verifies inline, on its event loop (qmemo node --verify-threads 0)
    assert NodeBenchConfig(threads=(0, 1)).threads == (0, 1)


@pytest.mark.parametrize("kw", [{"threads": (-1,)}, {"threads": ()}, {"batch": 0}, {"txs": 10, "batch": 20},
                                {"concurrency": 0}, {"warmup": -1}, {"rounds": 0}])
def test_impossible_node_bench_parameters_are_refused(kw):
    with pytest.raises(ConfigError):
        NodeBenchConfig(**kw)


@pytest.fixture
def no_binary(monkeypatch):
    """bench_c steps that do nothing: the validation's own failure is what is tested."""
    monkeypatch.setattr(c_runner, "_build", lambda log, log_path: None)
    monkeypatch.setattr(c_runner, "_run_binary", lambda argv, log: (0, 0.0))


@pytest.mark.parametrize("error", [IndexError("list index out of range"), TypeError("'NoneType' is not subscriptable")])
def test_a_validation_that_crashes_fails_soft(tmp_path, monkeypatch, no_binary, capsys, error):
    def crash(binary, *, rounds, log):
        raise error

    monkeypatch.setattr(c_runner, "validate", crash)
    parser = argparse.ArgumentParser()
    bench_c.register(parser)
    args = parser.parse_args(["--smoke", "--out", str(tmp_path / "run"), "--only", "validate"])
    assert bench_c.run(args) == 1
    out = capsys.readouterr().out
    assert "validate" in out and "FAILED" in out and "Traceback" not in out
    summary = read_json(tmp_path / "run" / "summary.json")
    step = summary["steps"]["validate"]
    assert (step["ok"], step["exit_code"]) == (False, 1)
    assert step["error"] == f"{type(error).__name__}: {error}"
