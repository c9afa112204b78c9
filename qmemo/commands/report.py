"""`qmemo report`: REPORT.md, REPORT.html and PNG plots from a bench_c results folder (and devnet runs)."""

from __future__ import annotations

import argparse


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--results", metavar="DIR", default=None,
                        help="bench_c results folder (default: results/latest)")
    parser.add_argument("--devnet", metavar="RUN_DIR", action="append", default=[],
                        help="a devnet run folder with a summary.json (repeatable)")
    parser.add_argument("--out", metavar="DIR", default=None,
                        help="folder for REPORT.md, REPORT.html and the plots (default: docs/results/<run-id>/)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from qmemo.analysis.report import write_report
    from qmemo.analysis.results import display_path

    report = write_report(args.results, args.devnet, args.out)
    console = Console(highlight=False)
    console.print(f"report: {display_path(report.markdown_path)}")
    console.print(f"  html: {display_path(report.html_path)}")
    for plot in report.plots:
        console.print(f"  plot: {display_path(plot)}")
    return 0
