"""`qmemo headroom`: the headroom model for one scenario on the command line.

The verification rate comes either from `--verify-rate` (a number you supply, scaled
linearly to `--cores`, which the table marks as assumed) or from a bench_c results
folder (`--results`, measured: the single-core median and the multicore row).
"""

from __future__ import annotations

import argparse

from qmemo.analysis.memo import CONSERVATIVE_SHARDS, CONSERVATIVE_TPS, CROSS_SHARD_SHARE


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tps", type=float, default=CONSERVATIVE_TPS,
                        help=f"total transactions per second (default {CONSERVATIVE_TPS:,}: MEMO conservative)")
    parser.add_argument("--shards", type=int, default=CONSERVATIVE_SHARDS,
                        help=f"number of shards (default {CONSERVATIVE_SHARDS})")
    parser.add_argument("--cross-shard", type=float, default=CROSS_SHARD_SHARE, metavar="SHARE",
                        help="share of cross-shard transactions, 0..1 or a percentage like 20 "
                             f"(default {CROSS_SHARD_SHARE:g}); each is verified by two shards")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--verify-rate", type=float, metavar="OPS",
                        help="single-core verifications per second (instead of a results folder)")
    source.add_argument("--results", metavar="DIR",
                        help="bench_c results folder to read the rates from (default: results/latest)")
    parser.add_argument("--cores", type=int, default=None,
                        help="cores to count for the all-cores row (default: the machine's, or the "
                             "largest measured thread count)")
    parser.add_argument("--scheme", default="Falcon-512", help="scheme to read from the results (default Falcon-512)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import os

    from rich.console import Console
    from rich.table import Table

    import math

    from qmemo.analysis.headroom import Capacity, Scenario, cores_needed, headroom_table
    from qmemo.analysis.markdown import headroom_x, num, percent
    from qmemo.errors import ConfigError

    share = args.cross_shard / 100 if args.cross_shard > 1 else args.cross_shard
    scenario = Scenario("command line", args.tps, args.shards, share)
    if args.cores is not None and args.cores < 1:
        raise ConfigError("--cores must be at least 1")
    if args.verify_rate is not None:
        if not (math.isfinite(args.verify_rate) and args.verify_rate > 0):
            raise ConfigError("--verify-rate must be a positive number")
        cores = args.cores or os.cpu_count() or 1
        capacities = [Capacity("single core (given)", args.verify_rate, "--verify-rate")]
        if cores > 1:
            capacities.append(Capacity(f"{cores} cores (assumed linear)", args.verify_rate * cores,
                                       "--verify-rate x --cores", cores))
    else:
        from qmemo.analysis.results import capacities_from_results

        capacities = capacities_from_results(args.results, args.scheme, args.cores)

    required = scenario.required_verify_rate
    per_core = capacities[0].verify_rate
    table = Table(
        title=f"Headroom: {num(args.tps)} TPS over {args.shards} shard{'s' if args.shards > 1 else ''}, "
              f"{percent(share, 0)} cross-shard",
        caption=f"needed per shard = {num(args.tps)} / {args.shards} x (1 + {share:g}) = {num(required, 1)} "
                f"verifications/s; at the single-core rate that is {cores_needed(required, per_core)} core(s)\n"
                "source: " + ", ".join(dict.fromkeys(c.source for c in capacities)),
    )
    for column in ("capacity", "verify/s", "headroom", "verify load", "verdict"):
        table.add_column(column, justify="left" if column in ("capacity", "verdict") else "right")
    colour = {"meets": "green", "tight": "yellow", "short": "red"}
    for row in headroom_table([scenario], capacities):
        table.add_row(row.capacity.label, num(row.capacity.verify_rate), headroom_x(row.headroom),
                      percent(row.utilisation), f"[{colour[row.verdict]}]{row.verdict}[/]")
    Console().print(table)
    return 0
