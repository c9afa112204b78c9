"""`qmemo monitor`: the live dashboard of every node against the C baseline."""

from __future__ import annotations

import argparse
from pathlib import Path


def node_urls(args: argparse.Namespace) -> list[str]:
    """--nodes URL,URL... or --count N nodes from --base-port on --host."""
    from qmemo.net.client import base_url

    if args.nodes:
        return [u.strip().rstrip("/") for u in args.nodes.split(",") if u.strip()]
    return [base_url(args.host, args.base_port + i) for i in range(args.count)]


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", help="comma-separated node URLs (default: --count nodes from --base-port)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--base-port", type=int, default=8000)
    parser.add_argument("--count", type=int, default=3, help="number of nodes (default 3)")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between polls (default 2)")
    parser.add_argument("--scheme", default="Falcon-512", help="scheme whose C baseline to show")
    parser.add_argument("--target-tps", type=float, help="the load generator's target, for the chain table")
    parser.add_argument("--generator-status", type=Path, help="the generator's live.json, to show its latencies")
    parser.add_argument("--baseline", type=Path,
                        help="a bench_c summary.json (default: this machine's best run in --results)")
    parser.add_argument("--results", type=Path, default=None, metavar="DIR",
                        help="where to look for this machine's C baseline (default: results/)")
    parser.add_argument("--record", type=Path, help="append every snapshot to this JSON-lines file")
    parser.add_argument("--once", action="store_true",
                        help="print one snapshot after --rounds polls (rates need two) and exit")
    parser.add_argument("--rounds", type=int, default=2,
                        help="with --once: polls before printing (default 2; 6 fill the headline's 10 s window)")
    parser.add_argument("--svg", type=Path, default=None, metavar="FILE",
                        help="with --once: also save the screen as an SVG (scripts/dashboard-picture.sh)")
    parser.add_argument("--width", type=int, default=None,
                        help="with --once: the console's width in columns (default: the terminal's)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import asyncio

    from qmemo.errors import ConfigError
    from qmemo.monitor.poll import MonitorConfig
    from qmemo.paths import RESULTS_DIR

    import math

    if not (math.isfinite(args.interval) and args.interval > 0) or args.count < 1:
        raise ConfigError("--interval must be a positive number and --count at least 1")
    if (args.svg is not None or args.width is not None or args.rounds != 2) and not args.once:
        raise ConfigError("--rounds, --svg and --width go with --once")
    if args.rounds < 2 or (args.width is not None and args.width < 40):
        raise ConfigError("--rounds must be at least 2 (rates need two polls) and --width at least 40")
    if args.svg is not None and not args.svg.parent.is_dir():
        raise ConfigError(f"--svg: the folder {args.svg.parent} does not exist")
    urls = node_urls(args)
    if not urls or not all(u.startswith(("http://", "https://")) for u in urls):
        raise ConfigError(f"node URLs must start with http:// (got {', '.join(urls) or 'none'})")
    if args.record is not None and not args.record.parent.is_dir():
        raise ConfigError(f"--record: the folder {args.record.parent} does not exist")
    if args.baseline is not None and not args.baseline.is_file():
        raise ConfigError(f"--baseline: no file {args.baseline}")
    config = MonitorConfig(
        node_urls=urls, interval_s=args.interval, timeout_s=min(1.5, args.interval * 0.75),
        scheme=args.scheme, target_tps=args.target_tps, generator_status=args.generator_status,
        record=args.record, baseline_path=args.baseline, results_dir=args.results or RESULTS_DIR,
    )
    return asyncio.run(_once(config, args.rounds, args.svg, args.width) if args.once else _live(config))


async def _once(config, rounds: int, svg: Path | None, width: int | None) -> int:
    from rich.console import Console

    from qmemo.monitor.poll import snapshots
    from qmemo.monitor.view import render

    last = None
    async for snapshot in snapshots(config, rounds=rounds):
        last = snapshot
    console = Console(width=width, record=svg is not None)
    console.print(render(last))
    if svg is not None:
        console.save_svg(str(svg), title="qMEMO devnet dashboard")
    return 0 if all(p.metrics is not None for p in last.polls) else 1


async def _live(config) -> int:
    from rich.live import Live

    from qmemo.monitor.poll import snapshots
    from qmemo.monitor.view import render

    import asyncio
    import signal

    async def show() -> None:
        with Live(auto_refresh=False, screen=False) as live:
            async for snapshot in snapshots(config):
                live.update(render(snapshot), refresh=True)

    # SIGTERM (devnet.sh stops the dashboard so) cancels the loop, so Live restores the
    # terminal's cursor on the way out instead of dying with it hidden.
    task = asyncio.ensure_future(show())
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, task.cancel)
    try:
        await task
    except asyncio.CancelledError:
        pass
    return 0
