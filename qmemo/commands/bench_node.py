"""`qmemo bench node`: one node's admission rate per CPU-second against the C verify rate.

The flags, the table and the JSON file; the method and the measuring are in
qmemo.bench.node_bench. Top level stays light (argparse only).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--txs", type=int, default=30_000, help="measured transactions per run (default 30000)")
    parser.add_argument("--warmup", type=int, default=3_000, help="transactions before timing starts (default 3000)")
    parser.add_argument("--batch", type=int, default=500, help="transactions per request (default 500)")
    parser.add_argument("--concurrency", type=int, default=4, help="requests in flight (default 4)")
    parser.add_argument("--threads", default="1,2", help="verify-thread counts to run (default 1,2)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="node runs per thread count, alternating; the figures are each count's median run "
                             "(default 3)")
    parser.add_argument("--scheme", default="Falcon-512", help="signature scheme (default Falcon-512)")
    parser.add_argument("--verifier", choices=("fast", "liboqs"), default="fast",
                        help="the node's Falcon and ML-DSA verifier, also used by the same-run references "
                             "(default fast)")
    parser.add_argument("--gil-switch-interval-s", type=float,
                        help="the node's sys.setswitchinterval (default: the node's, see docs/api.md)")
    parser.add_argument("--out", type=Path, help="JSON file (default results/node-bench-<UTC time>.json)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from qmemo.bench.node_bench import NodeBenchConfig, run_node_bench
    from qmemo.commands.bench import save_result
    from qmemo.errors import ConfigError

    try:
        threads = tuple(int(t) for t in args.threads.split(",") if t.strip())
    except ValueError as exc:
        raise ConfigError(f"--threads: {exc}") from exc
    config = NodeBenchConfig(txs=args.txs, warmup=args.warmup, batch=args.batch, concurrency=args.concurrency,
                             threads=threads, rounds=args.rounds, scheme=args.scheme, verifier=args.verifier,
                             gil_switch_interval_s=args.gil_switch_interval_s)
    document = run_node_bench(config, lambda line: print(line, flush=True))
    _print(document)
    save_result(document, args.out, "node-bench")
    return 0


REFERENCES = ("kernel_verify", "native_loop_verify", "registry_verify", "ctypes_verify")


def _print(document: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(Console().width, 140))     # the table's eleven columns, unabridged
    baseline = document["c_baseline"]
    table = Table(title=f"qmemo bench node: {document['parameters']['scheme']} admission over loopback, "
                        f"{document['parameters']['verifier']} verifier "
                        f"(batches of {document['parameters']['batch']}, "
                        f"{document['parameters']['concurrency']} in flight)")
    for column in ("verify threads", "round", "admitted tx/s", "node CPU cores", "tx per node CPU-s", "vs C 1-core",
                   "vs ctypes loop", "CPU µs/tx", "loop µs/tx", "verify threads µs/tx", "client CPU-s"):
        table.add_column(column, justify="right")
    for run in document["runs"]:
        ratio = run["ratio_to_c_single_core"]
        table.add_row(str(run["threads"]), f"{run.get('round', 0) + 1}{' (median)' if run.get('median') else ''}",
                      f"{run['admitted_per_s']:,.0f}", f"{run['node_cores_busy']:.2f}",
                      _fmt(run["admitted_per_cpu_s"], ",.0f"), _fmt(ratio, ".0%"),
                      f"{run['ratio_to_same_run'].get('ctypes_verify', 0):.0%}",
                      f"{run['node_cpu_us_per_tx']:.1f}", f"{run['cpu_us_per_tx_by_thread']['loop']:.1f}",
                      f"{run['cpu_us_per_tx_by_thread']['verify']:.1f}", f"{run['client_cpu_s']:.2f}")
    console.print(table)
    refs = document["same_run_references"]
    source = baseline.get("source", baseline.get("missing", baseline.get("error")))
    c_rate = f"{baseline['ops_per_s']:,.0f}/s" if "ops_per_s" in baseline else "none"
    console.print(f"C single-core verify: {c_rate} ({source}); same run, one Python thread: "
                  + ", ".join(f"{k} {refs[k]['ops_per_s']:,.0f}/s" for k in REFERENCES if k in refs))
    console.print(f"two threads in the kernel's verify at once: {refs['two_threads_verify']['speedup']:.2f}x one "
                  "(the cores this machine really gave us; ~2x when idle)")
    head = document["headline"]
    console.print(f"headline ({head['verifier']} verifier, {head['threads']} verify thread): "
                  f"{_fmt(head['admitted_per_cpu_s'], ',.0f')} tx per node CPU-s / {head['same_run_verify_per_s']:,.0f} "
                  f"verify/s native loop ({head.get('reference', 'native_loop_verify')}), "
                  f"same run = {_fmt(head['ratio'], '.2f')}")
    if (top := head.get("ceiling")) is not None:
        console.print(f"its ceiling in this run: {top['ratio']:.2f} = verify {top['verify_us_per_tx']:.1f} µs / (verify "
                      f"+ the kernel's decoding and hashing {top['decode_hash_us_per_tx']:.1f} µs), a node on this "
                      "kernel that did nothing else")
    if head.get("floor_ratio") is not None:
        console.print(f"floor ratio: {head['floor_ratio']:.2f} = the protocol's own work {head['floor_us_per_tx']:.1f} "
                      f"µs (decode and hash + verify, this run) / the node's {head['node_cpu_us_per_tx']:.1f} µs of "
                      "CPU per admitted transaction, its median run (target 0.80)")
    if head["admitted_per_cpu_s"] is None:
        console.print("the node's CPU time read 0 s: the run was too short to give a per-CPU figure; "
                      "use more --txs")
    if document["speedup_2_vs_1_threads"]:
        share = document.get("thread_gain_share")
        console.print(f"2 vs 1 verify threads: {document['speedup_2_vs_1_threads']:.2f}x"
                      + (f", {share:.0%} of what a second thread gave a bare verify loop in this run (target 80%)"
                         if share is not None else ""))
    rounds = document.get("rounds")
    if rounds and document["parameters"].get("rounds", 1) > 1:
        for threads, figures in rounds["by_threads"].items():
            console.print(f"{threads} verify thread(s), node CPU µs/tx by round: "
                          + ", ".join(f"{v:.1f}" for v in figures["node_cpu_us_per_tx"])
                          + f" (spread {_fmt(figures['spread'], '.0%')})")
        if rounds["disturbed"]:
            console.print(f"[yellow]the runs of {', '.join(map(str, rounds['disturbed']))} verify thread(s) spread "
                          f"more than {rounds['disturbed_above']:.0%}: the machine looks disturbed; run again on a "
                          "quiet machine[/yellow]")
    for run in sorted((r for r in document["runs"] if r.get("median", True)), key=lambda r: r["threads"]):
        console.print(f"node's own stages, {run['threads']} verify thread(s) (µs/tx, /metrics over the timed span): "
                      + ", ".join(f"{k} {v:.1f}" for k, v in run["stages_us_per_tx"].items() if v >= 0.05)
                      + f" (of other, {run['other_on_loop_us_per_tx']:.1f} on the event loop)")
    console.print("admission steps in-process (µs/tx): "
                  + ", ".join(f"{k} {v:.1f}" for k, v in document["admission_breakdown_us_per_tx"].items()))


def _fmt(value: float | None, spec: str) -> str:
    """`value` in `spec`, or "-" for a figure the run could not give (None)."""
    return "-" if value is None else format(value, spec)
