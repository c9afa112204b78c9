"""`qmemo bench door`: one node's admission rate with and without slow and idle clients.

The flags, the table and the JSON file; the method is in qmemo.bench.door_bench.
Top level stays light (argparse only).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--txs", type=int, default=300_000, help="measured transactions per run (default 300000)")
    parser.add_argument("--warmup", type=int, default=3_000, help="transactions before timing starts (default 3000)")
    parser.add_argument("--batch", type=int, default=500, help="transactions per request (default 500)")
    parser.add_argument("--concurrency", type=int, default=4, help="requests in flight (default 4)")
    parser.add_argument("--threads", type=int, default=1, help="the node's verify threads (default 1)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of one quiet and one hostile run, alternating (default 3)")
    parser.add_argument("--verifier", choices=("fast", "liboqs"), default="fast", help="the node's verifier")
    parser.add_argument("--slow-bodies", type=int, default=100, help="clients sending a body a byte at a time")
    parser.add_argument("--trickled-headers", type=int, default=100,
                        help="clients sending headers a byte at a time, never finishing them")
    parser.add_argument("--idle", type=int, default=500, help="connections that send nothing")
    parser.add_argument("--slow-readers", type=int, default=20,
                        help="clients sending requests and never reading the answers")
    parser.add_argument("--interval-s", type=float, default=1.0, help="seconds between a slow client's bytes")
    parser.add_argument("--node-timeout-s", type=float,
                        help="the node's body_timeout_s and idle_timeout_s in both modes (default: the node's, 30 s); "
                             "shorter than a run, slow clients are closed and reconnect during it")
    parser.add_argument("--out", type=Path, help="JSON file (default results/door-bench-<UTC time>.json)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from qmemo.bench.door_bench import DoorBenchConfig, run_door_bench
    from qmemo.bench.hostile import HostileMix
    from qmemo.commands.bench import save_result

    mix = HostileMix(slow_bodies=args.slow_bodies, trickled_headers=args.trickled_headers, idle=args.idle,
                     slow_readers=args.slow_readers, interval_s=args.interval_s)
    config = DoorBenchConfig(txs=args.txs, warmup=args.warmup, batch=args.batch, concurrency=args.concurrency,
                             threads=args.threads, rounds=args.rounds, verifier=args.verifier, mix=mix,
                             node_timeout_s=args.node_timeout_s)
    document = run_door_bench(config, lambda line: print(line, flush=True))
    _print(document)
    save_result(document, args.out, "door-bench")
    return 0


# How each Falcon verifier's verify time depends on its input (docs/methodology.md section 11).
TIMING = {"fast": "variable-time hash-to-point", "liboqs": "liboqs's constant-time hash-to-point"}


def _print(document: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    mix = document["parameters"]["hostile"]
    table = Table(title=f"qmemo bench door: admission with and without {mix['slow_bodies']} slow bodies, "
                        f"{mix['trickled_headers']} unfinished headers, {mix['idle']} idle connections, "
                        f"{mix['slow_readers']} clients that never read")
    for column in ("round", "mode", "admitted tx/s", "node CPU µs/tx", "node fds", "hostile connections",
                   "closed by node", "408s"):
        table.add_column(column, justify="right")
    for run in document["runs"]:
        hostile = run["disturbance"]
        table.add_row(str(run["round"] + 1), run["mode"], f"{run['admitted_per_s']:,.0f}",
                      f"{run['node_cpu_us_per_tx']:.1f}", str(run.get("open_fds") or "-"),
                      str(hostile.get("connections", "-")), str(hostile.get("closed_by_node", "-")),
                      str(hostile.get("answered_408", "-")))
    console.print(table)
    quiet, hostile = document["by_mode"]["quiet"], document["by_mode"]["hostile"]
    verdict = "meets" if document["meets_target"] else "misses"
    console.print(f"median admitted tx/s: quiet {quiet['admitted_per_s']:,.0f}, hostile {hostile['admitted_per_s']:,.0f}: "
                  f"ratio {document['rate_ratio']:.3f} ({verdict} the target {document['target_ratio']:.2f}); "
                  f"CPU per transaction ratio {document['cpu_per_tx_ratio']:.3f} "
                  f"({document['parameters']['verifier']} verifier: "
                  f"{TIMING.get(document['parameters']['verifier'], 'timing not stated')})")
    if document["disturbed"]:
        console.print(f"[yellow]the {' and '.join(document['disturbed'])} runs spread more than "
                      f"{document['disturbed_above']:.0%}: the machine looks disturbed; run again on a quiet "
                      "machine[/yellow]")
