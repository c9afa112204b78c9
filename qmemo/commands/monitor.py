"""`qmemo monitor`: the live dashboard of every node against the C baseline."""

from __future__ import annotations

import argparse
from pathlib import Path


def node_urls(args: argparse.Namespace) -> list[str]:
    """--nodes URL,URL... or --count N nodes from --base-port on --host."""
    if args.nodes:
        return [u.strip().rstrip("/") for u in args.nodes.split(",") if u.strip()]
    return [f"http://{args.host}:{args.base_port + i}" for i in range(args.count)]


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", help="comma-separated node URLs (default: --count nodes from --base-port)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--base-port", type=int, default=8000)
    parser.add_argument("--count", type=int, default=3, help="number of nodes (default 3)")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between polls (default 2)")
    parser.add_argument("--scheme", default="Falcon-512", help="scheme whose C baseline to show")
    parser.add_argument("--target-tps", type=float, help="the load generator's target, for the chain table")
    parser.add_argument("--generator-status", type=Path, help="the generator's live.json, to show its latencies")
    parser.add_argument("--baseline", type=Path, help="a bench_c summary.json (default: results/latest)")
    parser.add_argument("--record", type=Path, help="append every snapshot to this JSON-lines file")
    parser.add_argument("--once", action="store_true", help="print one snapshot (two polls, for rates) and exit")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import asyncio

    from qmemo.errors import ConfigError
    from qmemo.monitor.poll import MonitorConfig

    if args.interval <= 0 or args.count < 1:
        raise ConfigError("--interval must be positive and --count at least 1")
    config = MonitorConfig(
        node_urls=node_urls(args), interval_s=args.interval, timeout_s=min(1.5, args.interval * 0.75),
        scheme=args.scheme, target_tps=args.target_tps, generator_status=args.generator_status,
        record=args.record, baseline_path=args.baseline,
    )
    return asyncio.run(_once(config) if args.once else _live(config))


async def _once(config) -> int:
    from rich.console import Console

    from qmemo.monitor.poll import snapshots
    from qmemo.monitor.view import render

    last = None
    async for snapshot in snapshots(config, rounds=2):
        last = snapshot
    Console().print(render(last))
    return 0 if all(p.metrics is not None for p in last.polls) else 1


async def _live(config) -> int:
    from rich.live import Live

    from qmemo.monitor.poll import snapshots
    from qmemo.monitor.view import render

    with Live(auto_refresh=False, screen=False) as live:
        async for snapshot in snapshots(config):
            live.update(render(snapshot), refresh=True)
    return 0
