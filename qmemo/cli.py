"""`qmemo <command>`: the one entry point.

Each command lives in its own module under `qmemo.commands` and contributes a
`register(subparsers)` function that adds its parser and sets `run=` to a function
taking the parsed arguments and returning an exit code. This file only wires them
together and is the boundary where a `QmemoError` becomes one red line and exit 1
(anything else is a bug and keeps its traceback).

Command modules keep their top level light (argparse only) and import what they
need inside their run function, so `qmemo --help` and the commands that do not need
liboqs start fast and work even before the setup has built it.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from qmemo import __version__
from qmemo.errors import QmemoError

# (command, module, one-line help). A module's register() receives the subparser.
COMMANDS: list[tuple[str, str, str]] = [
    ("schemes", "qmemo.commands.schemes", "list every signature scheme with sizes and a self-test"),
    ("bench", "qmemo.commands.bench", "run a benchmark suite (c, core, node)"),
    ("genesis", "qmemo.commands.genesis", "create a devnet: genesis file, validator keys, funded accounts"),
    ("node", "qmemo.commands.node", "run a node: HTTP API, verification pool, block production, sync"),
    ("monitor", "qmemo.commands.monitor", "live dashboard of every node against the C baseline"),
    ("health", "qmemo.commands.health", "check (or wait until) nodes are ready"),
    ("gen", "qmemo.commands.gen", "fire signed transactions at the nodes on a schedule (alias: tx_generator)"),
    ("headroom", "qmemo.commands.headroom", "headroom of a verify rate against one sharded-chain scenario"),
    ("report", "qmemo.commands.report", "write REPORT.md and plots from bench_c results (and devnet runs)"),
    ("soak", "qmemo.commands.soak", "a devnet under steady load for minutes: nodes' RSS and open fds sampled"),
    ("scenario", "qmemo.commands.scenario", "run a scenario: nodes in network namespaces, link profiles, faults, invariants"),
    ("deploy", "qmemo.commands.deploy", "a scenario as a Docker Swarm stack over several hosts, and its results"),
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="qmemo",
        description="qMEMO: post-quantum signatures on a sharded chain, measured two ways.",
    )
    parser.add_argument("--version", action="version", version=f"qmemo {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="<command>", required=True)
    for name, module_name, help_text in COMMANDS:
        command_parser = sub.add_parser(name, help=help_text, description=help_text)
        importlib.import_module(module_name).register(command_parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except QmemoError as exc:
        from rich.console import Console

        Console(stderr=True, soft_wrap=True).print(f"[bold red]error:[/] {exc}", highlight=False)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
