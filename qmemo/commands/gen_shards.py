"""`qmemo gen` on a sharded devnet: one run or a sweep over every shard (qmemo.load.shards).

Called by qmemo.commands.gen when the genesis names several shards; the flags are gen's
(`--tps` is the total over all shards), with `--cross-shard PCT` (default 20). The load
comes from one generator process per shard (qmemo.load.shard_fleet), or `--generators N`
processes each driving whole shards (N = 1: this process alone). Exit status as gen's,
plus 4 when an invariant failed (docs/devnet.md).
"""

from __future__ import annotations

import argparse
import asyncio
import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from qmemo.core.shards import ShardedGenesis
    from qmemo.load.run import GenConfig
    from qmemo.load.thresholds import Thresholds

DEFAULT_CROSS_SHARD_PCT = 20.0      # the research's "conservative + 20% cross-shard" scenario


def run_sharded_command(args: argparse.Namespace, config: GenConfig, sharded: ShardedGenesis, console: Console,
                        thresholds: Thresholds) -> int:
    from qmemo.errors import ConfigError
    from qmemo.load.run import offsets_for
    from qmemo.load.shard_view import render_shard_sweep, render_sharded
    from qmemo.load.shards import prepare_shards, run_sharded, shard_nodes
    from qmemo.load.summary import SWEEP_SCHEMA, Sweep, sweep_row, write
    from qmemo.load.summary_view import render_summary
    from qmemo.load.thresholds import exit_code, missed

    pct = DEFAULT_CROSS_SHARD_PCT if args.cross_shard is None else args.cross_shard
    if not (math.isfinite(pct) and 0 <= pct <= 100):
        raise ConfigError("--cross-shard must be a percentage from 0 to 100")
    quiet = args.quiet or args.log_format == "json"
    if args.part:
        from qmemo.load.fleet import FleetPart, parse_part
        from qmemo.load.shard_fleet import run_shard_part

        run_shard_part(config, sharded, pct, FleetPart(*parse_part(args.part), config.out))
        return 0
    # One generator process per shard unless told otherwise: one process for every shard
    # falls behind its schedule long before the shards saturate.
    generators = sharded.count if args.generators is None else args.generators
    if generators > 1:
        from qmemo.load.shard_fleet import shard_shares

        shard_shares(sharded.count, generators)      # refused before anything is signed

    def run_one(stage: GenConfig) -> Any:
        if generators == 1:
            return run_sharded(stage, sharded, pct, quiet=quiet)
        from qmemo.commands.gen import part_args
        from qmemo.load.shard_fleet import run_sharded_fleet

        return run_sharded_fleet(stage, sharded, pct, generators,
                                 [*part_args(args, stage), "--cross-shard", repr(pct)])

    if args.prepare_only:
        if config.cache_dir is None:
            raise ConfigError("--prepare-only needs the workload cache (drop --no-cache)")
        offsets, _ = offsets_for(replace(config, tps=config.tps / sharded.count))

        async def prepare() -> int:
            nodes = await shard_nodes(config.nodes, sharded)
            shards = await prepare_shards(config, sharded, nodes, offsets, pct, quiet)
            return sum(len(shard.work.ids) for shard in shards)

        console.print(f"workload ready: {asyncio.run(prepare()):,} signed transactions over {sharded.count} shards")
        return 0
    if args.sweep:
        from qmemo.commands.gen import sweep_stages

        rows = []
        accounted = True
        for number, rate in enumerate(sweep_stages(args), 1):
            if not quiet:
                console.print(f"stage {rate:,.0f} TPS over {sharded.count} shards ({number})")
            stage = replace(config, tps=rate, duration_s=args.stage, out=config.out / f"stage-{rate:g}tps")
            result = run_one(stage)
            rows.append(_row(sweep_row(result.file_summary, result.out), result.file_summary))
            accounted = accounted and result.all_accounted
            if rows[-1].limited or result.interrupted:
                break
        config.out.mkdir(parents=True, exist_ok=True)
        write(config.out / "sweep.json", Sweep(SWEEP_SCHEMA, tuple(rows)))
        console.print(render_shard_sweep(rows))
        console.print(f"sweep table: {config.out / 'sweep.json'}")
        # A stage past the latency bounds ends the sweep (what it looks for); a transaction
        # unaccounted for or a broken invariant at any stage fails it, as in a single run.
        return exit_code(accounted, [], all(row.invariants_hold is not False for row in rows))
    result = run_one(config)
    summary = result.file_summary
    failed = missed(summary, thresholds)
    if args.log_format == "json":
        from qmemo.node.log import json_event
        from qmemo.records import to_json

        json_event("gen", "run finished", out=str(result.out), thresholds_missed=failed, **to_json(summary))
    else:
        console.print(render_summary(summary, str(result.out)))
        console.print(render_sharded(summary))
        for sentence in failed:
            console.print(f"[red]threshold missed:[/red] {sentence}", highlight=False)
    return exit_code(result.all_accounted, failed, summary.invariants is None or summary.invariants.hold)


def _row(row: Any, summary: Any) -> Any:
    """A sweep row with the sharded figures: intra- and cross-shard p99, the invariants."""
    intra = [s.p99_ms_intra for s in summary.shards or () if s.p99_ms_intra is not None]
    return replace(row, intra_p99_ms=max(intra) if intra else None,
                   cross_p99_ms=summary.cross_shard.p99_ms_intended_to_credited if summary.cross_shard else None,
                   invariants_hold=summary.invariants.hold if summary.invariants else None)
