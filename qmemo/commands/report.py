"""`qmemo report`: REPORT.md, REPORT.html and PNG plots from a bench_c results folder (and devnet runs)."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--results", metavar="DIR", default=None,
                        help="bench_c results folder (default: results/latest)")
    parser.add_argument("--devnet", metavar="RUN_DIR", action="append", default=[],
                        help="a devnet.sh run folder (runs/<id>), a `qmemo gen` folder or a sweep folder (repeatable)")
    parser.add_argument("--scenario", metavar="RUN_DIR", action="append", default=[],
                        help="a `qmemo scenario run` folder, or a `qmemo scenario propagation` folder (repeatable)")
    parser.add_argument("--core-bench", metavar="FILE", default=None,
                        help="a `qmemo bench core` result (default: the newest results/core-bench-*.json)")
    parser.add_argument("--node-bench", metavar="FILE", default=None,
                        help="a `qmemo bench node` result (default: the newest results/node-bench-*.json)")
    parser.add_argument("--out", metavar="DIR", default=None,
                        help="folder for REPORT.md, REPORT.html and the plots (default: docs/results/<run id>/, "
                             "the devnet run's, else the C baseline's)")
    parser.add_argument("--readme", metavar="FILE", type=Path, default=None,
                        help="also write the results block of FILE (README.md, between its results markers) from "
                             "these result folders, and the headline plot into docs/img/ beside it (one --devnet)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from qmemo.analysis.py_bench import load_py_benches
    from qmemo.analysis.report import write_report
    from qmemo.analysis.results import display_path

    from qmemo.errors import ConfigError

    if args.readme is not None and len(args.devnet) != 1:
        raise ConfigError("--readme takes its figures from one devnet run: give exactly one --devnet")
    report = write_report(args.results, args.devnet, args.out, load_py_benches(args.core_bench, args.node_bench),
                          args.scenario)
    console = Console(highlight=False)
    console.print(f"report: {display_path(report.markdown_path)}")
    console.print(f"  html: {display_path(report.html_path)}")
    for plot in report.plots:
        console.print(f"  plot: {display_path(plot)}")
    if args.readme is not None:
        from qmemo.analysis.readme_results import write_readme_block

        regenerate = " ".join([".venv/bin/qmemo report", *(["--results", display_path(Path(args.results))]
                                                           if args.results else []),
                               "--devnet", display_path(Path(args.devnet[0])), "--readme", display_path(args.readme)])
        write_readme_block(args.readme, args.results, args.devnet[0], report.out_dir, regenerate)
        console.print(f"readme: {display_path(args.readme)} (its results block and docs/img/headline.png)")
    return 0
