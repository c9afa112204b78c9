"""`qmemo bench node`'s figures and printout from given measurements: a run too short for
/proc's 10 ms CPU ticks (the per-CPU figures are None in the JSON, and the table prints "-"
and says why instead of crashing, as it once did in the suite's 250-transaction inline
run), and the headline's ceiling."""

from __future__ import annotations

import contextlib
import io

from qmemo.bench.node_figures import KERNEL_STEP, summarize
from qmemo.commands.bench_node import _print


def test_a_run_whose_cpu_read_zero_prints_dashes_and_the_reason():
    run = {"threads": 0, "transactions": 250, "wall_s": 0.02, "node_cpu_s": 0.0, "verify_s": 0.0,
           "node_cpu_s_by_thread": {"loop": 0.0, "verify": 0.0}, "client_cpu_s": 0.01,
           "stages_cpu_s": {"verify": 0.0, "other": 0.0}}
    references = {"native_loop_verify": {"ops_per_s": 100_000.0},
                  "two_threads_verify": {"speedup": 1.9}}
    parameters = {"scheme": "Falcon-512", "verifier": "fast", "batch": 250, "concurrency": 1}
    document = summarize(parameters, [run], references, {"missing": "no baseline"}, {})
    assert document["headline"]["admitted_per_cpu_s"] is None and document["headline"]["ratio"] is None
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        _print(document)
    assert "same run = -" in printed.getvalue() and "too short" in printed.getvalue()


def test_the_headline_states_its_ceiling_from_the_same_runs_verify_and_kernel_step():
    run = {"threads": 1, "transactions": 1000, "wall_s": 0.1, "node_cpu_s": 0.02, "verify_s": 0.005,
           "node_cpu_s_by_thread": {"loop": 0.015, "verify": 0.005}, "client_cpu_s": 0.01,
           "stages_cpu_s": {"verify": 0.005, "other": 0.0}}
    references = {"kernel_verify": {"ops_per_s": 250_000.0}, "native_loop_verify": {"ops_per_s": 200_000.0},
                  "two_threads_verify": {"speedup": 1.9}}
    parameters = {"scheme": "Falcon-512", "verifier": "fast", "batch": 500, "concurrency": 4}
    document = summarize(parameters, [run], references, {"missing": "no baseline"},
                         {KERNEL_STEP: 1.0})
    head = document["headline"]
    assert head["ratio"] == 50_000 / 250_000
    assert head["ceiling"] == {"ratio": 4.0 / 5.0, "verify_us_per_tx": 4.0, "decode_hash_us_per_tx": 1.0}
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        _print(document)
    assert "its ceiling in this run: 0.80 = verify 4.0 µs" in printed.getvalue()
