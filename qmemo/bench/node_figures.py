"""`qmemo bench node`, the figures: per-run rates and ratios from what was measured, and the
result document ("qmemo-node-bench/1"). Pure arithmetic on the measurements."""

from __future__ import annotations

from typing import Any

from qmemo.bench.node_setup import PAYLOAD_BYTES

SCHEMA = "qmemo-node-bench/1"
# The in-process breakdown's first step (qmemo.bench.node_breakdown): the admission kernel's
# framing, decoding and hashing, which `ceiling` sets against the verify.
KERNEL_STEP = "kernel: frame, decode, ids, digests"


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
    speedup = gain_share = None
    by_threads = median_runs(runs)
    if 1 in by_threads and 2 in by_threads:
        speedup = by_threads[2]["admitted_per_s"] / by_threads[1]["admitted_per_s"]     # the rows shown as median
        # What the second thread bought, over what a second thread bought a bare verify loop
        # in this run (the cores the machine really gave: ~2x idle, less when shared).
        machine = references.get("two_threads_verify", {}).get("speedup")
        gain_share = (speedup - 1) / (machine - 1) if machine and machine > 1 else None
    return {
        "schema": SCHEMA,
        "headline": headline(parameters["verifier"], list(by_threads.values()), references, breakdown),
        "parameters": {**parameters, "payload_bytes": PAYLOAD_BYTES},
        "c_baseline": baseline,
        "same_run_references": references,
        "admission_breakdown_us_per_tx": breakdown,
        "runs": runs,
        "rounds": spread(runs, DISTURBED_SPREAD),
        "speedup_2_vs_1_threads": speedup,
        "thread_gain_share": gain_share,
        # The node's own work per admitted transaction against the protocol's floor (`floor_ratio`),
        # and what a second verify thread buys against what the machine gave (`two_threads_verify`).
        "targets": {"floor_ratio": 0.8, "thread_gain_share": 0.8},
    }


NATIVE_LOOPS = ("kernel_verify", "native_loop_verify")
DISTURBED_SPREAD = 0.15     # node CPU per transaction between a count's runs: more, and the runs look disturbed


def by_thread_count(runs: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """The runs of each thread count, in the order they ran."""
    counts: dict[int, list[dict[str, Any]]] = {}
    for run in runs:
        counts.setdefault(run["threads"], []).append(run)
    return counts


def median_runs(runs: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """For each thread count, its run with the median node CPU per transaction (the lower
    of the two middle ones for an even count), marked `"median": true`; the figures that
    describe a thread count are that run's."""
    chosen: dict[int, dict[str, Any]] = {}
    for threads, mine in by_thread_count(runs).items():
        mine = sorted(mine, key=lambda run: run["node_cpu_us_per_tx"])
        chosen[threads] = mine[(len(mine) - 1) // 2]
    for run in runs:
        run["median"] = any(run is pick for pick in chosen.values())
    return chosen


def spread(runs: list[dict[str, Any]], disturbed: float) -> dict[str, Any]:
    """Each thread count's runs side by side (node CPU µs per transaction, admitted tx/s),
    their spread (slowest over fastest CPU per transaction, less 1), and the counts whose
    spread passes `disturbed`: the machine moved under the runs, so read the medians with
    care and run again."""
    counts: dict[str, Any] = {}
    for threads, mine in by_thread_count(runs).items():
        cpu = [run["node_cpu_us_per_tx"] for run in mine]
        counts[str(threads)] = {"node_cpu_us_per_tx": cpu, "admitted_per_s": [run["admitted_per_s"] for run in mine],
                                "spread": max(cpu) / min(cpu) - 1 if min(cpu) > 0 else None}
    return {"by_threads": counts, "disturbed_above": disturbed,
            "disturbed": [int(t) for t, c in counts.items() if c["spread"] is not None and c["spread"] > disturbed]}


def headline(verifier: str, runs: list[dict[str, Any]], references: dict[str, Any],
             breakdown: dict[str, float]) -> dict[str, Any]:
    """The one-thread node's admitted tx per CPU-second over the same verifier's tightest
    native loop in the same run - the faster of the admission kernel's verify and the
    verifier's own batch call, named in `reference` (the figure the same-run ratio's target
    is set in; a 2-thread run's CPU includes GIL hand-offs) - and the `ceiling` that ratio
    has in this run."""
    run = next((r for r in runs if r["threads"] == 1), runs[0])
    label = max((label for label in NATIVE_LOOPS if label in references), key=lambda k: references[k]["ops_per_s"])
    reference = references[label]["ops_per_s"]
    per_cpu = run["admitted_per_cpu_s"]
    floor_us = 1e6 / reference + breakdown[KERNEL_STEP] if KERNEL_STEP in breakdown else None
    node_us = run["node_cpu_us_per_tx"]
    return {"admitted_per_cpu_s": per_cpu, "same_run_verify_per_s": reference,
            "ratio": per_cpu / reference if per_cpu else None, "verifier": verifier, "threads": run["threads"],
            "reference": label, "ceiling": ceiling(1e6 / reference, breakdown.get(KERNEL_STEP)),
            # The protocol's own work per transaction - the kernel's decode and hash, and the
            # verify, this run - over the node's CPU per admitted transaction: 1.0 is a node that
            # does nothing else (HTTP, checks, pool, journal, answer all free).
            "floor_us_per_tx": floor_us, "node_cpu_us_per_tx": node_us,
            "floor_ratio": floor_us / node_us if floor_us and node_us else None}


def ceiling(verify_us: float, decode_hash_us: float | None) -> dict[str, float] | None:
    """The highest `ratio` a node built on this admission kernel could reach in this run:
    one that spent nothing on HTTP, checks, the mempool, the journal or its answer, only
    the kernel's native framing, decoding and hashing (the signing digest and the id,
    BLAKE3-512 over the transaction: a node cannot admit without them) and the verify,
    verify / (verify + decode and hash), both in CPU time of one thread, this run. Why it
    is stated: with the variable-time fast verifier the decoding and hashing cost more than
    half the verify, so the ratio stays far below 1 however little else is left (the
    same-run ratio's target is 0.90). None without `decode_hash_us`."""
    if decode_hash_us is None or decode_hash_us <= 0:
        return None
    return {"ratio": verify_us / (verify_us + decode_hash_us), "verify_us_per_tx": verify_us,
            "decode_hash_us_per_tx": decode_hash_us}
