"""`qmemo gen` (alias `tx_generator`): fire signed transactions at the nodes on a schedule."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from qmemo.load.schedule import BATCH_WINDOW_S, MAX_BATCH

if TYPE_CHECKING:
    from qmemo.load.run import GenConfig
    from qmemo.load.thresholds import Thresholds


def register(parser: argparse.ArgumentParser) -> None:
    where = parser.add_argument_group("devnet")
    where.add_argument("--devnet", type=Path, default=Path("devnet"),
                       help="devnet folder made by `qmemo genesis` (default ./devnet)")
    where.add_argument("--genesis", type=Path, help="genesis file (default DEVNET/genesis.json)")
    where.add_argument("--accounts", type=Path, help="funded accounts key file (default DEVNET/accounts.keys.json)")
    where.add_argument("--nodes", help="comma-separated node URLs (default: --count nodes from --base-port)")
    where.add_argument("--host", default="127.0.0.1")
    where.add_argument("--base-port", type=int, default=8000)
    where.add_argument("--count", type=int, default=3)
    rate = parser.add_argument_group("schedule")
    rate.add_argument("--tps", type=float, default=1000.0, help="constant target rate (default 1000)")
    rate.add_argument("--duration", type=float, default=30.0, help="seconds of sending (default 30)")
    rate.add_argument("--schedule", help='steps "SECONDS:TPS,..." e.g. "0:500,30:1000,60:2000"')
    rate.add_argument("--ramp", action="store_true", help="interpolate linearly between --schedule points")
    rate.add_argument("--poisson", action="store_true", help="Poisson arrivals at --tps instead of even spacing")
    rate.add_argument("--sweep", metavar="START:FACTOR:MAX",
                      help="step constant rates START, START*FACTOR, ... up to MAX, every stage (past saturation too)")
    rate.add_argument("--stage", type=float, default=20.0, help="seconds per sweep stage (default 20)")
    rate.add_argument("--cross-shard", type=float, metavar="PCT",
                      help="a sharded devnet: percent of transfers to accounts of other shards (default 20); "
                           "--tps is the total over all shards")
    send = parser.add_argument_group("sending")
    send.add_argument("--batch", type=int, default=MAX_BATCH,
                      help=f"transactions per request at most (default {MAX_BATCH}); fewer, so that a batch spans "
                           f"at most {BATCH_WINDOW_S * 1000:.0f} ms of schedule at the mean rate")
    send.add_argument("--target", choices=("round-robin", "random", "single"), default="round-robin",
                      help="which node each batch goes to (default round-robin)")
    send.add_argument("--max-in-flight", type=int, default=64, help="outstanding requests at most (default 64)")
    send.add_argument("--connections", type=int, default=32, help="HTTP connection pool size (default 32)")
    send.add_argument("--generators", type=int, metavar="N",
                      help="send from N processes, each with every Nth funded account and 1/N of the "
                           "schedule's transactions (the same shape and duration), started together after all have "
                           "signed; one merged run folder. For when one process falls behind its schedule "
                           "(generator_fell_behind). One chain: default 1, --tps and --schedule runs, not --sweep. "
                           "A sharded devnet: default one per shard, each driving whole shards (shard k in process "
                           "k mod N, N <= shards), its cross-shard transfers' credits included; a --sweep too. "
                           "--max-in-flight and --connections are per process")
    send.add_argument("--part", metavar="K/N", help="internal: run as part K of N of a --generators fleet")
    send.add_argument("--resend-for", type=float, default=0.0, metavar="SECONDS",
                      help="a batch no node answered is tried again, every node in turn, for this long "
                           "when that is longer than the 30 s request timeout (default 0: the timeout)")
    out = parser.add_argument_group("measurement and output")
    out.add_argument("--warmup", type=float, default=2.0, help="seconds left out of latency percentiles (default 2)")
    out.add_argument("--commit-timeout", type=float,
                     help="seconds to wait for commits after the last send (default 5 block intervals)")
    out.add_argument("--out", type=Path, help="run folder (default runs/gen-<time>)")
    out.add_argument("--live", type=Path, help="write live status JSON here every second (for the dashboard)")
    out.add_argument("--no-cache", action="store_true", help="sign the workload again even if cached")
    out.add_argument("--prepare-only", action="store_true",
                     help="sign and cache the workload, then exit (the next run with the same plan starts at once)")
    gate = parser.add_argument_group("thresholds (exit status 3 when missed; docs/devnet.md lists every status)")
    gate.add_argument("--max-p99-ms", type=float, metavar="MS",
                      help="fail the run if its p99 intended -> committed latency is above MS")
    gate.add_argument("--min-committed-share", type=float, metavar="SHARE",
                      help="fail the run if committed TPS / target TPS is below SHARE (0..1)")
    out.add_argument("--seed", type=int, default=1)
    out.add_argument("--quiet", action="store_true",
                     help="no progress bar and no live line (neither is shown when stdout is not a terminal)")
    out.add_argument("--log-format", choices=("text", "json"), default="text",
                     help="text (default), or json: events (start, workload, result) as one JSON object per line, "
                          "no progress bar")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from qmemo.errors import ConfigError
    from qmemo.load.live_status import LiveLine
    from qmemo.load.run import run_load, run_sweep
    from qmemo.records import to_json
    from qmemo.load.summary_view import render_summary, render_sweep
    from qmemo.load.thresholds import exit_code, missed

    if args.batch < 1 or args.max_in_flight < 1 or args.connections < 1:
        raise ConfigError("--batch, --max-in-flight and --connections must be at least 1")
    if args.generators is not None and args.generators < 1:
        raise ConfigError("--generators must be at least 1")
    if args.generators is not None and args.part:
        raise ConfigError("--part is one part of a --generators fleet: not both")
    thresholds = _thresholds(args)
    config = gen_config(args)
    out = config.out
    console = Console()
    if not console.is_terminal:
        console = Console(width=120)  # a log file: wide enough for the latency table
    from qmemo.crypto.verifier import load_any_genesis
    from qmemo.core.shards import ShardedGenesis

    # A genesis naming several shards takes the sharded run (a missing file is the run's to report).
    sharded = load_any_genesis(config.genesis) if Path(config.genesis).is_file() else None
    if isinstance(sharded, ShardedGenesis):
        from qmemo.commands.gen_shards import run_sharded_command
        return run_sharded_command(args, config, sharded, console, thresholds)
    if args.cross_shard is not None:
        raise ConfigError("--cross-shard needs a sharded devnet (qmemo genesis --shards)")
    generators = args.generators or 1
    json_log = args.log_format == "json"
    quiet = args.quiet or json_log  # a progress bar is not a JSON line
    if json_log:
        from qmemo.node.log import json_event

        json_event("gen", "started", nodes=config.nodes, out=str(out), tps=args.tps, duration_s=args.duration,
                   schedule=args.schedule, sweep=args.sweep, prepare_only=args.prepare_only)
    if args.part:
        from qmemo.load.fleet import FleetPart, parse_part
        from qmemo.load.run import run_part

        run_part(config, FleetPart(*parse_part(args.part), config.out), quiet=True)
        return 0
    if args.prepare_only:
        from qmemo.load.run import offsets_for, prepare
        from qmemo.crypto.verifier import load_genesis

        if config.cache_dir is None:
            raise ConfigError("--prepare-only needs the workload cache (drop --no-cache)")
        import asyncio

        from qmemo.load.fleet import FleetPart

        genesis, offsets = load_genesis(config.genesis), offsets_for(config)[0]
        # A fleet's parts each sign their own share (their cache entries are the parts').
        parts = [None] if generators == 1 else [FleetPart(k, generators, out) for k in range(generators)]
        workloads = [asyncio.run(prepare(config, offsets if part is None else part.share(offsets), genesis,
                                         quiet=quiet, part=part)) for part in parts]
        signed = sum(len(workload.ids) for workload in workloads)
        from_cache = all(workload.from_cache for workload in workloads)
        if json_log:
            json_event("gen", "workload ready", transactions=signed, from_cache=from_cache)
            return 0
        console.print(f"workload ready: {signed:,} signed transactions{' (from the cache)' if from_cache else ''}")
        return 0
    if args.sweep:
        with LiveLine(console, enabled=not quiet and console.is_terminal) as line:
            def next_stage(label: str) -> None:
                line.label = label

            from qmemo.load.fleet import run_fleet

            # A fleet runs each stage as one fleet run; one process, as run_sweep's own run_load.
            fleet_stage = None if generators == 1 else (
                lambda stage: run_fleet(stage, generators, part_args(args, stage), quiet=quiet,
                                        on_status=line.update))
            rows = run_sweep(config, sweep_stages(args), args.stage, quiet=quiet,
                             on_stage=next_stage, on_status=line.update, run_stage=fleet_stage)
        row_documents = [to_json(row) for row in rows]
        if json_log:
            json_event("gen", "sweep finished", rows=row_documents, table=str(out / "sweep.csv"))
            return 0
        console.print(render_sweep(rows))
        console.print(f"sweep table: {out / 'sweep.csv'}")
        return 0
    with LiveLine(console, enabled=not quiet and console.is_terminal) as line:
        if generators > 1:
            from qmemo.load.fleet import run_fleet

            result = run_fleet(config, generators, part_args(args, config), quiet=quiet, on_status=line.update)
        else:
            result = run_load(config, quiet=quiet, on_status=line.update)
    document = to_json(result.file_summary)
    failed_thresholds = missed(result.file_summary, thresholds)
    if json_log:
        json_event("gen", "run finished", out=str(result.out), thresholds_missed=failed_thresholds, **document)
    else:
        console.print(render_summary(result.file_summary, str(result.out)))
        for sentence in failed_thresholds:
            console.print(f"[red]threshold missed:[/red] {sentence}", highlight=False)
    return exit_code(result.summary.counts.accounted == result.summary.counts.planned, failed_thresholds)


def gen_config(args: argparse.Namespace) -> GenConfig:
    """The run's configuration from its options."""
    import time

    from qmemo.commands.monitor import node_urls
    from qmemo.devnet.files import ACCOUNTS_FILE, GENESIS_FILE
    from qmemo.load.run import GenConfig
    from qmemo.load.sender import SendConfig

    return GenConfig(
        genesis=args.genesis or args.devnet / GENESIS_FILE,
        accounts=args.accounts or args.devnet / ACCOUNTS_FILE,
        nodes=node_urls(args), out=args.out or Path("runs") / time.strftime("gen-%Y%m%d-%H%M%S"), tps=args.tps,
        duration_s=args.duration, schedule=args.schedule,
        ramp=args.ramp, poisson=args.poisson, batch=args.batch, targeting=args.target,
        send=SendConfig(max_in_flight=args.max_in_flight, connections=args.connections,
                        resend_for_s=max(0.0, args.resend_for)),
        warmup_s=args.warmup, commit_timeout_s=args.commit_timeout, live=args.live,
        cache_dir=None if args.no_cache else args.devnet / "workloads", seed=args.seed,
    )


def part_args(args: argparse.Namespace, config: GenConfig) -> list[str]:
    """The options a fleet's part runs with: the parent's plan, sending and measurement
    (the part's --part, --out and --live are the fleet's to add)."""
    argv = ["--devnet", str(args.devnet), "--genesis", str(config.genesis), "--accounts", str(config.accounts),
            "--nodes", ",".join(config.nodes), "--tps", repr(config.tps), "--duration", repr(config.duration_s),
            "--batch", str(config.batch), "--target", config.targeting,
            "--max-in-flight", str(config.send.max_in_flight), "--connections", str(config.send.connections),
            "--resend-for", repr(config.send.resend_for_s), "--warmup", repr(config.warmup_s),
            "--seed", str(config.seed)]
    if config.schedule:
        argv += ["--schedule", config.schedule]
    argv += ["--ramp"] * config.ramp + ["--poisson"] * config.poisson + ["--no-cache"] * (config.cache_dir is None)
    if config.commit_timeout_s is not None:
        argv += ["--commit-timeout", repr(config.commit_timeout_s)]
    return argv


def sweep_stages(args: argparse.Namespace) -> list[float]:
    """The rates of `--sweep START:FACTOR:MAX` (with a positive `--stage`); ConfigError otherwise."""
    import math

    from qmemo.errors import ConfigError
    from qmemo.load.schedule import sweep_rates

    if not (math.isfinite(args.stage) and args.stage > 0):
        raise ConfigError("--stage must be a positive number of seconds")
    try:
        start, factor, maximum = (float(x) for x in args.sweep.split(":"))
    except ValueError:
        raise ConfigError("--sweep takes START:FACTOR:MAX, e.g. 500:2:8000") from None
    return sweep_rates(start, factor, maximum)


def _thresholds(args: argparse.Namespace) -> Thresholds:
    import math

    from qmemo.errors import ConfigError
    from qmemo.load.thresholds import Thresholds

    thresholds = Thresholds(args.max_p99_ms, args.min_committed_share)
    if thresholds.max_p99_ms is not None and not (math.isfinite(thresholds.max_p99_ms) and thresholds.max_p99_ms > 0):
        raise ConfigError("--max-p99-ms must be a positive number of milliseconds")
    if thresholds.min_committed_share is not None and not 0 <= thresholds.min_committed_share <= 1:
        raise ConfigError("--min-committed-share must be between 0 and 1")
    if thresholds.any and (args.sweep or args.prepare_only):
        # A sweep runs past saturation: missing a bound is its purpose, not a failure.
        raise ConfigError("--max-p99-ms and --min-committed-share judge one run, not --sweep or --prepare-only")
    return thresholds


def alias_main() -> int:
    """Entry point of the `tx_generator` script: `qmemo gen` under its historical name."""
    import sys

    from qmemo.cli import main

    return main(["gen", *sys.argv[1:]])
