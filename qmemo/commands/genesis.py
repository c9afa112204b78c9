"""`qmemo genesis`: create a devnet - its genesis file and every key it needs.

Writes into --out:
- genesis.json             the chain's parameters, validators (producer order) and balances;
- validator-<i>.keys.json  one key file per validator (what `qmemo node --key` takes);
- accounts.keys.json       the funded accounts' keys, for the load generator. Many
                           accounts, because each account's nonces are consecutive: one
                           account's transactions cannot be admitted out of order, so a
                           load spread over many accounts never waits on itself.

The work is qmemo.devnet.files.create_devnet (the node benchmark makes its devnet the
same way); this module is the flags, a live progress line while the keys are made
(many Falcon-512 keys take seconds to a minute: docs/setup.md; only on a terminal) and the
one line printed at the end.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from qmemo.core.defaults import CHAIN


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, required=True, help="directory to write the devnet into")
    parser.add_argument("--validators", type=int, default=CHAIN.validators,
                        help=f"number of validators (per shard; default {CHAIN.validators})")
    parser.add_argument("--shards", type=int, default=1,
                        help="shards (default 1: one chain); more writes a sharded genesis, shard k's chain id "
                             "--chain-id + k, its validators' keys in shard-<k>-validator-<i>.keys.json")
    parser.add_argument("--accounts", type=int, default=CHAIN.accounts,
                        help=f"number of funded accounts (default {CHAIN.accounts})")
    parser.add_argument("--scheme", default=CHAIN.scheme,
                        help=f"signature scheme of the accounts and validators (default {CHAIN.scheme})")
    parser.add_argument("--validator-scheme", help="scheme of the validators' keys (default: --scheme)")
    parser.add_argument("--tx-schemes", help="comma-separated schemes transactions may use (default: --scheme)")
    parser.add_argument("--chain-id", type=int, default=CHAIN.chain_id, help=f"u32 chain id (default {CHAIN.chain_id})")
    parser.add_argument("--balance", type=int, default=CHAIN.balance,
                        help=f"each account's balance (default {CHAIN.balance:,})")
    parser.add_argument("--block-interval-ms", type=int, default=CHAIN.block_interval_ms,
                        help=f"block interval (default {CHAIN.block_interval_ms})")
    parser.add_argument("--producer-timeout-ms", type=int,
                        help="how long each fallback producer has (default: the block interval)")
    parser.add_argument("--max-clock-drift-ms", type=int, default=CHAIN.max_clock_drift_ms,
                        help="how far ahead of a node's clock a block may be stamped "
                             f"(default {CHAIN.max_clock_drift_ms})")
    parser.add_argument("--max-block-transactions", type=int, default=CHAIN.max_block_transactions,
                        help=f"block size limit (default {CHAIN.max_block_transactions})")
    parser.add_argument("--min-fee", type=int, default=CHAIN.min_fee,
                        help=f"the least fee a transaction pays (default {CHAIN.min_fee}: nothing is sent for free)")
    parser.add_argument("--genesis-time-ms", type=int, help="genesis timestamp (default: now)")
    parser.add_argument("--force", action="store_true", help="overwrite an existing devnet in --out")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import time

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, \
        TimeRemainingColumn

    from qmemo.devnet.files import DevnetSpec, create_devnet

    started = time.perf_counter()
    tx_schemes = tuple(name.strip() for name in args.tx_schemes.split(",")) if args.tx_schemes else None
    # Transient, and off where stdout is no terminal: a log gets only the closing line
    # (an enabled transient bar would still leave a blank line there).
    console = Console()
    with Progress(TextColumn(f"generating {args.scheme} keys"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TimeRemainingColumn(), console=console, transient=True,
                  disable=not console.is_terminal) as bar:
        task = bar.add_task("keys", total=None)
        devnet = create_devnet(DevnetSpec(
            out=args.out, validators=args.validators, accounts=args.accounts, scheme=args.scheme,
            validator_scheme=args.validator_scheme, tx_schemes=tx_schemes, chain_id=args.chain_id,
            balance=args.balance, block_interval_ms=args.block_interval_ms,
            producer_timeout_ms=args.producer_timeout_ms, max_clock_drift_ms=args.max_clock_drift_ms,
            max_block_transactions=args.max_block_transactions, min_fee=args.min_fee,
            genesis_time_ms=args.genesis_time_ms, force=args.force, shards=args.shards),
            on_keys=lambda done, total: bar.update(task, completed=done, total=total))
    validator_scheme = devnet.validators[0].scheme
    account_scheme = devnet.accounts[0].scheme if devnet.accounts else validator_scheme
    if devnet.sharded is not None:
        chains = ", ".join(str(view.chain_id) for view in devnet.sharded.views)
        print(f"sharded devnet in {devnet.dir}: {devnet.sharded.count} shards (chains {chains}), "
              f"{len(devnet.validators)} {validator_scheme} validators, {len(devnet.accounts)} {account_scheme} "
              f"accounts ({time.perf_counter() - started:.1f} s)")
        return 0
    print(f"devnet in {devnet.dir}: chain {devnet.genesis.chain_id}, genesis {devnet.genesis.hash.hex()[:16]}.., "
          f"{len(devnet.validators)} {validator_scheme} validators, {len(devnet.accounts)} {account_scheme} accounts "
          f"({time.perf_counter() - started:.1f} s)")
    return 0
