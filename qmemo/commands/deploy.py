"""`qmemo deploy`: a scenario manifest as a Docker Swarm stack of several hosts, and its results.

    qmemo deploy render MANIFEST [--shards S --per-shard N] [--hosts H] [--placement spread|shard|none]
                        [--set KEY=VALUE ...] [--drop-thresholds] [--out DIR]
        the devnet (`qmemo genesis`, once per chain) and DIR/stack.yaml (qmemo.deploy.stack),
        with DIR/README.md: the labels to set, the deploy command, where the results land;
        refused (before any genesis is made) when a flag is out of range (--shards,
        --per-shard, --hosts 0; a --subnet that is not a network), when the manifest has
        parts a stack cannot run, or when DIR holds a stack.yaml or README.md render did
        not write (its header line)
    qmemo deploy collect DIR --stack NAME [--run ID] [--wait S]
        after (or, with --wait, until the end of) a run: every service's log and task
        history from the manager's Swarm API into DIR/runs/ID beside the generator's folder
        (qmemo.deploy.collect), so `qmemo report --devnet DIR/runs/ID` reads one folder;
        exits 1 unless run ID's generator task completed and wrote DIR/runs/ID/gen/summary.json

docs/scenarios.md, "Several hosts", is the procedure on real machines.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from qmemo.deploy.stack import CONFIG_LIMIT_BYTES, DEFAULT_RUN, PLACEMENTS, SUBNET, check_subnet
from qmemo.errors import ConfigError

DEFAULT_PER_SHARD = 3     # validators per shard with --shards and no --per-shard


def register(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="deploy_command", metavar="<render|collect>", required=True)
    render = sub.add_parser("render", help="the devnet and a Swarm stack file from a scenario manifest")
    render.add_argument("manifest", type=Path, help="a scenario TOML file (or a shipped scenario's name)")
    render.add_argument("--out", type=Path, help="folder for stack.yaml, devnet/ and runs/ (default runs/swarm-<name>)")
    render.add_argument("--shards", type=int,
                        help="shards (sets network.shards, and network.nodes to shards x per shard)")
    render.add_argument("--per-shard", type=int,
                        help=f"validators per shard (default {DEFAULT_PER_SHARD} with --shards; alone: the manifest's "
                             "shards x this)")
    render.add_argument("--hosts", type=int, default=3,
                        help="hosts, labelled qmemo.host-0=true .. qmemo.host-<H-1>=true (default 3)")
    render.add_argument("--placement", choices=PLACEMENTS, default="spread",
                        help="spread: a shard's validators on different hosts (default); shard: a shard per "
                             "host; none: wherever Swarm puts them")
    render.add_argument("--verify-threads", type=int, help="each node's verify threads (default: the node's)")
    render.add_argument("--subnet", default=SUBNET, help=f"the overlay network's subnet (default {SUBNET})")
    render.add_argument("--drop-thresholds", action="store_true",
                        help="render without the manifest's throughput bounds (invariants.min_committed_tps, "
                             "max_p99_ms, ...): the stack checks the accounting and the invariants, not those")
    render.add_argument("--config-limit-bytes", type=int, default=CONFIG_LIMIT_BYTES, metavar="BYTES",
                        help=f"the largest config the manager takes (default {CONFIG_LIMIT_BYTES}, Swarm's); a "
                             "genesis over it travels gzipped (a lower value tries that on a small chain)")
    render.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a manifest key (TOML value), e.g. load.tps=100; repeatable")
    render.set_defaults(run=run_render)
    collect = sub.add_parser("collect", help="every service's log and tasks into the run folder on the manager")
    collect.add_argument("folder", type=Path, help="the rendered folder (with stack.yaml and runs/)")
    collect.add_argument("--stack", required=True, help="the stack's name (as given to docker stack deploy)")
    collect.add_argument("--run", dest="run_name", default=DEFAULT_RUN,
                         help=f"the run's name under runs/ (QMEMO_RUN; default {DEFAULT_RUN})")
    collect.add_argument("--wait", type=float, default=0.0, metavar="S",
                         help="first wait up to S seconds for this run's generator task to end")
    collect.set_defaults(run=run_collect)


def check_flags(args: argparse.Namespace) -> None:
    """ConfigError naming the first flag of render's that no stack can have, before anything
    is read or made (a --per-shard 0 is refused, never taken as the default)."""
    for flag, value in (("--shards", args.shards), ("--per-shard", args.per_shard), ("--hosts", args.hosts),
                        ("--verify-threads", args.verify_threads), ("--config-limit-bytes", args.config_limit_bytes)):
        if value is not None and value < 1:
            raise ConfigError(f"{flag} must be 1 or more (got {value})")
    check_subnet(args.subnet)


def run_render(args: argparse.Namespace) -> int:
    from rich.console import Console

    from qmemo.commands.scenario import PROFILES_FILE, _resolve
    from qmemo.deploy.files import carry_genesis, make_devnet, refuse_foreign_files, write_stack
    from qmemo.deploy.stack import StackPlan, placement_warnings, refuse_unrunnable
    from qmemo.scenario.manifest import apply_overrides, load_manifest, read_toml

    check_flags(args)
    overrides = list(args.overrides)
    path = _resolve(args.manifest)
    if args.shards is not None:
        per_shard = DEFAULT_PER_SHARD if args.per_shard is None else args.per_shard
        overrides += [f"network.shards={args.shards}", f"network.nodes={args.shards * per_shard}"]
    elif args.per_shard is not None:
        # The manifest's shards (after --set), each of this many: read before the parse,
        # which would refuse the old node count that does not split into them.
        shards = apply_overrides(read_toml(path), overrides).get("network", {}).get("shards", 1)
        overrides += [f"network.nodes={shards * args.per_shard if isinstance(shards, int) else args.per_shard}"]
    manifest = load_manifest(path, path.parent / PROFILES_FILE, overrides)
    refuse_unrunnable(manifest, drop_thresholds=args.drop_thresholds)
    out = (args.out or Path("runs") / f"swarm-{manifest.name}").resolve()
    refuse_foreign_files(out)          # before the genesis: nothing made for a render that cannot finish
    genesis_hash = make_devnet(manifest, out / "devnet")
    plan = StackPlan(hosts=args.hosts, placement=args.placement, folder=str(out), genesis_hash=genesis_hash,
                     verify_threads=args.verify_threads, subnet=args.subnet,
                     genesis_gzip=carry_genesis(manifest, out / "devnet", args.config_limit_bytes))
    # The command line as given: the stack file and its README say how to render it again.
    stack_file = write_stack(manifest, plan, out, shlex.join(["qmemo", *sys.argv[1:]]))
    for warning in placement_warnings(manifest, plan):
        Console(stderr=True, soft_wrap=True).print(f"[yellow]warning:[/] {warning}", highlight=False)
    print(f"stack: {stack_file} ({manifest.network.shards} shard(s) x {manifest.network.per_shard} validators on "
          f"{args.hosts} host(s), placement {args.placement}); the steps: {out / 'README.md'}")
    return 0


def run_collect(args: argparse.Namespace) -> int:
    from qmemo.deploy.collect import collect

    run_dir, state = collect(args.folder.resolve(), args.stack, args.run_name, args.wait)
    summary = run_dir / "gen" / "summary.json"
    print(f"run folder: {run_dir} (generator: {state or 'no task of this run'}); "
          + (f"its report: qmemo report --devnet {run_dir}" if summary.is_file() else f"no {summary}"))
    # A completed task without its summary is not this run's result (or not a result at all).
    return 0 if state.startswith("Complete") and summary.is_file() else 1
