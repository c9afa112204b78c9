"""`qmemo bench <suite>`: one command module per suite (commands/bench_<suite>.py).

Each suite's command module defines `register(parser)` like a command does (see
qmemo/cli.py) and calls its benchmark in `qmemo.bench`, which never imports the CLI.
Benchmarks print their figures and save them as JSON with the machine, versions and
build flags; they compare against a reference measured in the same run.
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path
from typing import Any

# (suite, module, one-line help)
SUITES: list[tuple[str, str, str]] = [
    ("c", "qmemo.commands.bench_c", "build and run the C micro-benchmarks (bench_c/): the baseline"),
    ("node", "qmemo.commands.bench_node", "one node's admission rate per CPU-second against the C verify rate"),
    ("core", "qmemo.commands.bench_core", "per-transaction cost of the chain core next to signature verification"),
    ("door", "qmemo.commands.bench_door", "one node's admission rate with and without slow and idle clients"),
    ("idle", "qmemo.commands.bench_idle", "what an idle devnet's nodes cost: CPU per node over a window, from /proc"),
]


def register(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="suite", metavar="<suite>", required=True)
    for name, module_name, help_text in SUITES:
        suite_parser = sub.add_parser(name, help=help_text, description=help_text)
        importlib.import_module(module_name).register(suite_parser)


def save_result(document: dict[str, Any], out: Path | None, stem: str) -> Path:
    """Write a suite's result document as JSON to `out` (default: results/<stem>-<UTC time>.json)
    and say where."""
    import time

    import orjson

    from qmemo.paths import RESULTS_DIR

    path = out or RESULTS_DIR / f"{stem}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")
    print(f"saved {path}")
    return path
