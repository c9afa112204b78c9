"""`qmemo bench core`: what the chain core costs per transaction, next to the signature check.

The flags, the table and the JSON file; the method and the measuring are in
qmemo.bench.core_bench. Top level stays light (argparse only).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--schemes", default="Falcon-512,ML-DSA-44", help="comma-separated (default: %(default)s)")
    parser.add_argument("--transactions", type=int, default=4000, help="transactions in the block (default 4000)")
    parser.add_argument("--accounts", type=int, default=100,
                        help="senders the transactions are spread over (default 100)")
    parser.add_argument("--repeat", type=int, default=5, help="timed passes per step (default 5)")
    parser.add_argument("--out", type=Path, help="JSON file to write (default: results/core-bench-<UTC time>.json)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from qmemo.bench.core_bench import run_core_bench
    from qmemo.commands.bench import save_result

    schemes = [name.strip() for name in args.schemes.split(",") if name.strip()]
    document = run_core_bench(schemes, args.transactions, args.accounts, args.repeat)
    print_table(document["schemes"], args)
    load = document["load_average_1m"]
    print(f"load average (1 min): {load['before']:.2f} before, {load['after']:.2f} after")
    save_result(document, args.out, "core-bench")
    return 0


def print_table(results: dict[str, dict[str, Any]], args: argparse.Namespace) -> None:
    from rich.console import Console
    from rich.table import Table

    from qmemo.bench.core_bench import PAYLOAD_BYTES, STEPS

    table = Table(title=f"qmemo bench core: {args.transactions} transactions, {PAYLOAD_BYTES}-byte payloads, "
                        f"best of {args.repeat}, microseconds per transaction")
    table.add_column("step")
    for name in results:
        table.add_column(name, justify="right")
    for key, label in STEPS:
        table.add_row(label, *(f"{r['per_transaction_us'][key]['best_us']:.2f}" for r in results.values()))
    table.add_row("core overhead in a cold validation (median)",
                  *(f"{r['core_overhead_cold_us']:.2f}" for r in results.values()))
    table.add_row("[bold]share of cold validation in signature verification (median)[/]",
                  *(f"[bold]{r['verify_share_of_cold_validation']:.1%}[/]" for r in results.values()))
    table.add_row("transaction size (bytes)", *(str(r["transaction_bytes"]) for r in results.values()))
    Console().print(table)
