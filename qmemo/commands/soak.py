"""`qmemo soak`: a devnet under steady load for minutes, each node's RSS and open fds sampled.

Not for CI (ten minutes by default): the run behind docs/soak.md's figures. The rate is
given (`--rate`) or 80% of the saturation rate a sweep measured (`--sweep sweep.json`,
from `qmemo gen --sweep`). A fresh devnet is made in OUT/devnet unless `--devnet` names
one. The work is qmemo.devnet.soak; this module is flags and the console.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from qmemo.core.defaults import CHAIN


def register(parser: argparse.ArgumentParser) -> None:
    rate = parser.add_mutually_exclusive_group(required=True)
    rate.add_argument("--rate", type=float, help="transactions per second, constant for the whole run")
    rate.add_argument("--sweep", type=Path, metavar="SWEEP_JSON",
                      help="run at 80%% of this sweep's saturation: what its highest unlimited stage committed per second")
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of load (default 600)")
    parser.add_argument("--interval", type=float, default=5.0, help="seconds between samples (default 5)")
    parser.add_argument("--cost-window", type=float, default=60.0,
                        help="seconds between readings of each node's stage costs (default 60)")
    parser.add_argument("--out", type=Path, default=None, help="run folder (default runs/soak-<time>)")
    parser.add_argument("--devnet", type=Path, default=None, help="an existing devnet (default: a new one in OUT)")
    parser.add_argument("--validators", type=int, default=CHAIN.validators,
                        help=f"nodes, one per validator (default {CHAIN.validators})")
    parser.add_argument("--accounts", type=int, default=CHAIN.accounts,
                        help=f"funded accounts of a new devnet (default {CHAIN.accounts})")
    parser.add_argument("--block-interval-ms", type=int, default=CHAIN.block_interval_ms,
                        help="a new devnet's block interval")
    parser.add_argument("--block-txs", type=int, default=CHAIN.max_block_transactions,
                        help="a new devnet's most transactions per block")
    parser.add_argument("--base-port", type=int, default=None, help="node i listens on P+i (default: free ports)")
    parser.add_argument("--batch", type=int, default=None, help="the generator's transactions per request")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import time

    from qmemo.devnet.files import DevnetSpec, create_devnet
    from qmemo.devnet.soak import SATURATION_SHARE, SoakConfig, run_soak, saturation_tps
    from qmemo.errors import ConfigError
    from qmemo.load.agreement import Agreement
    from qmemo.load.summary import read_sweep
    from qmemo.load.summary_view import agreement_row
    from qmemo.records import from_json

    out = args.out or Path("runs") / time.strftime("soak-%Y%m%d-%H%M%S")
    if args.sweep is not None:
        if not args.sweep.exists():
            raise ConfigError(f"no sweep file {args.sweep}")
        saturation = saturation_tps(read_sweep(args.sweep))
        rate = SATURATION_SHARE * saturation
        print(f"saturation {saturation:,.0f} TPS (committed by the highest stage of {args.sweep} that nothing "
              f"limited); soaking at {rate:,.0f} TPS")
    else:
        rate = args.rate
    if rate <= 0 or args.duration <= 0 or args.interval <= 0 or args.cost_window <= 0:
        raise ConfigError("--rate, --duration, --interval and --cost-window must be above 0")
    devnet = args.devnet
    if devnet is None:
        devnet = out / "devnet"
        print(f"making a devnet in {devnet} ({args.validators} validators, {args.accounts} accounts)")
        create_devnet(DevnetSpec(out=devnet, validators=args.validators, accounts=args.accounts,
                                 block_interval_ms=args.block_interval_ms, max_block_transactions=args.block_txs,
                                 max_clock_drift_ms=CHAIN.clock_drift_ms(args.block_interval_ms)))
    config = SoakConfig(devnet=devnet, validators=args.validators, out=out, rate_tps=rate,
                        duration_s=args.duration, interval_s=args.interval, base_port=args.base_port,
                        cost_window_s=args.cost_window,
                        gen_args=("--batch", str(args.batch)) if args.batch else ())
    document = run_soak(config, progress=lambda line: print(line, flush=True))
    for name, figures in document["summary"].items():
        if "rss_slope_bytes_per_hour" in figures:
            print(f"{name}: anonymous RSS {figures['rss_first_bytes'] / 2**20:.0f} -> {figures['rss_last_bytes'] / 2**20:.0f} "
                  f"MiB (slope {figures['rss_slope_bytes_per_hour'] / 2**20:+.1f} MiB/h, "
                  f"{figures['rss_slope_share_per_hour']:+.1%}/h), fds {figures['fds_first']} -> "
                  f"{figures['fds_last']} (slope {figures['fds_slope_per_hour']:+.1f}/h): {figures['verdict']}")
        else:
            print(f"{name}: {figures['verdict']}")
    accounting = document["accounting"]
    if accounting is not None:
        counts = accounting["counts"]
        print(f"generator: {counts['planned']:,} planned, {counts['committed']:,} committed, "
              f"{counts['rejected_total']:,} rejected, {counts['lost']:,} lost, {counts['failed']:,} failed, "
              f"{counts['unsent']:,} unsent; identity {'holds' if accounting['holds'] else 'BROKEN'}")
    load = document["load"]
    if load is not None:
        print(f"load: {'held' if load['held'] else 'NOT HELD'}, {load['committed_share']:.2%} committed ({load['rule']})")
    costs = document["stage_costs"]
    for name, figures in costs["summary"].items():
        if "change" in figures:
            print(f"{name}: {figures['stage']} {figures['first_us_per_tx']:.2f} -> {figures['last_us_per_tx']:.2f} µs "
                  f"per admitted transaction over {figures['windows']} windows of {costs['window_s']:g} s "
                  f"({figures['change']:+.1%}): {figures['verdict']}")
        else:
            print(f"{name}: {figures['stage']} cost: {figures['verdict']} ({figures['windows']} full windows under load)")
    agreement = document["agreement"]
    if agreement is not None:
        label, verdict = agreement_row(from_json(Agreement, agreement, "soak.json agreement"))
        print(f"{label}: {verdict.plain}")
    print(f"verdict: {document['verdict']} ({document['rule']})")
    print(f"store cost: {costs['verdict']} ({costs['rule']})")
    print(f"soak.json: {out / 'soak.json'}")
    return 0 if (document["verdict"] == "flat" and costs["verdict"] != "not flat" and accounting is not None
                 and accounting["holds"] and load is not None and load["held"]
                 and agreement is not None and agreement["agree"]) else 1
