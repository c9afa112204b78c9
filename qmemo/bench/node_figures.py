"""`qmemo bench node`, the figures: per-run rates and ratios from what was measured, and the
result document ("qmemo-node-bench/1"). Pure arithmetic on the measurements."""

from __future__ import annotations

from typing import Any

from qmemo.bench.node_setup import PAYLOAD_BYTES

SCHEMA = "qmemo-node-bench/1"


def summarize(parameters: dict[str, Any], runs: list[dict[str, Any]],
               references: dict[str, Any], baseline: dict[str, Any],
               breakdown: dict[str, float]) -> dict[str, Any]:
    c_rate = baseline.get("ops_per_s")
    for run in runs:
        n = run["transactions"]
        run["admitted_per_s"] = n / run["wall_s"]
        run["admitted_per_cpu_s"] = n / run["node_cpu_s"] if run["node_cpu_s"] else None
        run["node_cpu_us_per_tx"] = run["node_cpu_s"] / n * 1e6
        run["verify_call_us_per_tx"] = run["verify_s"] / n * 1e6   # wall time in calls, GIL waits included
        run["cpu_us_per_tx_by_thread"] = {group: seconds / n * 1e6
                                          for group, seconds in run["node_cpu_s_by_thread"].items()}
        run["node_cores_busy"] = run["node_cpu_s"] / run["wall_s"]
        # The node's own accounting (/metrics "stages", qmemo.node.stages) over the timed span:
        # where the CPU above went; "other" is what no stage holds (aiohttp, the loop, thread hand-offs).
        run["stages_us_per_tx"] = {stage: seconds / n * 1e6 for stage, seconds in run["stages_cpu_s"].items()}
        run["other_on_loop_us_per_tx"] = run.get("other_on_loop_cpu_s", 0.0) / n * 1e6
        per_cpu = run["admitted_per_cpu_s"]
        run["ratio_to_c_single_core"] = per_cpu / c_rate if per_cpu and c_rate else None
        run["ratio_to_same_run"] = {label: per_cpu / references[label]["ops_per_s"]
                                    for label in ("kernel_verify", "native_loop_verify", "registry_verify",
                                                  "ctypes_verify")
                                    if label in references and per_cpu}
    speedup = None
    by_threads = {run["threads"]: run for run in runs}
    if 1 in by_threads and 2 in by_threads:
        speedup = by_threads[2]["admitted_per_s"] / by_threads[1]["admitted_per_s"]
    return {
        "schema": SCHEMA,
        "headline": headline(parameters["verifier"], runs, references),
        "parameters": {**parameters, "payload_bytes": PAYLOAD_BYTES},
        "c_baseline": baseline,
        "same_run_references": references,
        "admission_breakdown_us_per_tx": breakdown,
        "runs": runs,
        "speedup_2_vs_1_threads": speedup,
        "targets": {"per_cpu_s_vs_c": 0.9, "speedup_2_vs_1": 1.8},
    }


NATIVE_LOOPS = ("kernel_verify", "native_loop_verify")


def headline(verifier: str, runs: list[dict[str, Any]], references: dict[str, Any]) -> dict[str, Any]:
    """The one-thread node's admitted tx per CPU-second over the same verifier's tightest
    native loop in the same run - the faster of the admission kernel's verify and the
    verifier's own batch call, named in `reference` (issue 11's P2 figure; a 2-thread
    run's CPU includes GIL hand-offs)."""
    run = next((r for r in runs if r["threads"] == 1), runs[0])
    label = max((label for label in NATIVE_LOOPS if label in references), key=lambda k: references[k]["ops_per_s"])
    reference = references[label]["ops_per_s"]
    per_cpu = run["admitted_per_cpu_s"]
    return {"admitted_per_cpu_s": per_cpu, "same_run_verify_per_s": reference,
            "ratio": per_cpu / reference if per_cpu else None, "verifier": verifier, "threads": run["threads"],
            "reference": label}
