"""`qmemo bench node`'s table when a run is too short for /proc's 10 ms CPU ticks: the
per-CPU figures are None in the JSON, and the table prints "-" and says why instead of
crashing (it once did, in the suite's 250-transaction inline run)."""

from __future__ import annotations

import contextlib
import io

from qmemo.bench.node_figures import summarize
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
