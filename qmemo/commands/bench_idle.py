"""`qmemo bench idle`: what an idle devnet's nodes cost, each node's CPU over a window from /proc.

The flags, the table and the JSON file; the method is in qmemo.bench.idle_bench.
Top level stays light (argparse only).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shards", type=int, default=4, help="shards of 3 validators each (default 4: 12 nodes)")
    parser.add_argument("--seconds", type=float, default=60.0, help="the measured window, seconds (default 60)")
    parser.add_argument("--settle", type=float, default=10.0,
                        help="seconds after every node is ready before the window (default 10)")
    parser.add_argument("--scrapes", type=int, default=50,
                        help="/metrics scrapes of one node after the window, for the CPU per scrape (default 50; 0: none)")
    parser.add_argument("--base-port", type=int, default=8600, help="the first node's port (default 8600)")
    parser.add_argument("--dir", type=Path,
                        help="the devnet folder (default: qmemo-idle-devnet-<shards> under the temp dir, reused)")
    parser.add_argument("--out", type=Path, help="JSON file (default results/idle-bench-<UTC time>.json)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from qmemo.bench.idle_bench import IdleBenchConfig, run_idle_bench
    from qmemo.commands.bench import save_result

    config = IdleBenchConfig(shards=args.shards, seconds=args.seconds, settle_s=args.settle, scrapes=args.scrapes,
                             base_port=args.base_port, devnet_dir=args.dir)
    document = run_idle_bench(config, lambda line: print(line, flush=True))
    _print(document)
    save_result(document, args.out, "idle-bench")
    return 0 if document["meets_total"] and document["meets_node"] else 1


def _print(document: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title=f"qmemo bench idle: {len(document['nodes'])} idle nodes over {document['window_s']:.0f} s")
    for column in ("node", "CPU s", "% of a core", "wake-ups/s"):
        table.add_column(column, justify="right")
    for node in document["nodes"]:
        table.add_row(node["name"], f"{node['cpu_s']:.2f}", f"{node['cpu_percent']:.2f}", f"{node['wakeups_per_s']:.0f}")
    console.print(table)
    targets = document["targets"]
    console.print(f"total {document['total_cpu_percent']:.2f}% of a core (target < {targets['total_cpu_percent_below']:g}%: "
                  f"{'met' if document['meets_total'] else 'missed'}); busiest node {document['max_node_cpu_percent']:.2f}% "
                  f"(target < {targets['node_cpu_percent_below']:g}%: {'met' if document['meets_node'] else 'missed'}); "
                  f"load average {document['loadavg_before'][0]:.2f} -> {document['loadavg_after'][0]:.2f}")
    source = document["by_source"]
    stages = ", ".join(f"{name} {share:.2f}%" for name, share in source["stage_cpu_percent"].items())
    console.print(f"by stage, all nodes, % of a core: {stages}; {source['blocks_applied']} blocks applied, "
                  f"{source['staged_cpu_us_per_block'] or 0:,.0f} µs of staged CPU per block")
    scrape = document.get("metrics_scrape")
    if scrape:
        console.print(f"/metrics: {scrape['cpu_us_per_scrape']:,.0f} µs of node CPU per scrape ({scrape['scrapes']} scrapes)")
