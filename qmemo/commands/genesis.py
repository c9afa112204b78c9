"""`qmemo genesis`: create a devnet - its genesis file and every key it needs.

Writes into --out:
- genesis.json             the chain's parameters, validators (producer order) and balances;
- validator-<i>.keys.json  one key file per validator (what `qmemo node --key` takes);
- accounts.keys.json       the funded accounts' keys, for the load generator. Many
                           accounts, because each account's nonces are consecutive: one
                           account's transactions cannot be admitted out of order, so a
                           load spread over many accounts never waits on itself.

Key files are in the qmemo-keys/1 format (qmemo/crypto/keys.py), mode 0600. Keys are
generated on every core (liboqs releases the GIL): 1,000 Falcon-512 accounts take a
few seconds.
"""

from __future__ import annotations

import argparse
from pathlib import Path

GENESIS_FILE = "genesis.json"
ACCOUNTS_FILE = "accounts.keys.json"


def validator_key_file(index: int) -> str:
    return f"validator-{index}.keys.json"


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, required=True, help="directory to write the devnet into")
    parser.add_argument("--validators", type=int, default=3, help="number of validators (default 3)")
    parser.add_argument("--accounts", type=int, default=1000, help="number of funded accounts (default 1000)")
    parser.add_argument("--scheme", default="Falcon-512",
                        help="signature scheme of the accounts and validators (default Falcon-512)")
    parser.add_argument("--validator-scheme", help="scheme of the validators' keys (default: --scheme)")
    parser.add_argument("--tx-schemes", help="comma-separated schemes transactions may use (default: --scheme)")
    parser.add_argument("--chain-id", type=int, default=1, help="u32 chain id (default 1)")
    parser.add_argument("--balance", type=int, default=10**12, help="each account's balance (default 10^12)")
    parser.add_argument("--block-interval-ms", type=int, default=2000, help="block interval (default 2000)")
    parser.add_argument("--producer-timeout-ms", type=int,
                        help="how long each fallback producer has (default: the block interval)")
    parser.add_argument("--max-clock-drift-ms", type=int, default=500,
                        help="how far ahead of a node's clock a block may be stamped (default 500)")
    parser.add_argument("--max-block-transactions", type=int, default=4000, help="block size limit (default 4000)")
    parser.add_argument("--genesis-time-ms", type=int, help="genesis timestamp (default: now)")
    parser.add_argument("--force", action="store_true", help="overwrite an existing devnet in --out")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import os
    import time
    from concurrent.futures import ThreadPoolExecutor

    import orjson

    from qmemo.core.genesis import GENESIS_FORMAT, parse_genesis
    from qmemo.core.transaction import derive_address
    from qmemo.crypto.keys import NamedKey, save_keys
    from qmemo.crypto.schemes import canonical_name, get_scheme
    from qmemo.crypto.verifier import scheme_table
    from qmemo.errors import ConfigError

    if args.validators < 1 or args.accounts < 0:
        raise ConfigError("--validators must be at least 1 and --accounts at least 0")
    out: Path = args.out
    if (out / GENESIS_FILE).exists() and not args.force:
        raise ConfigError(f"{out / GENESIS_FILE} exists; pass --force to replace the devnet")
    account_scheme = canonical_name(args.scheme)
    validator_scheme = canonical_name(args.validator_scheme or account_scheme)
    tx_schemes = [canonical_name(name.strip()) for name in (args.tx_schemes or account_scheme).split(",")]
    if account_scheme not in tx_schemes:
        raise ConfigError(f"the accounts' scheme {account_scheme} must be one of --tx-schemes")

    started = time.perf_counter()
    jobs = [(f"validator-{i}", validator_scheme) for i in range(args.validators)]
    jobs += [(f"account-{i:05d}", account_scheme) for i in range(args.accounts)]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        keys = list(pool.map(lambda job: NamedKey.from_keypair(job[0], get_scheme(job[1]).keypair()), jobs))
    validators, accounts = keys[:args.validators], keys[args.validators:]

    document = {
        "format": GENESIS_FORMAT,
        "chain_id": args.chain_id,
        "genesis_time_ms": args.genesis_time_ms if args.genesis_time_ms is not None else time.time_ns() // 1_000_000,
        "block_interval_ms": args.block_interval_ms,
        "producer_timeout_ms": args.producer_timeout_ms or args.block_interval_ms,
        "max_clock_drift_ms": args.max_clock_drift_ms,
        "max_block_transactions": args.max_block_transactions,
        "tx_schemes": tx_schemes,
        "validators": [{"name": key.name, "scheme": key.scheme, "public_key": key.public_key.hex()}
                       for key in validators],
        "accounts": [{"address": derive_address(get_scheme(key.scheme).info.scheme_id, key.public_key).hex(),
                      "balance": args.balance} for key in accounts],
    }
    genesis = parse_genesis(document, scheme_table())   # the same checks a node runs on it

    out.mkdir(parents=True, exist_ok=True)
    for index, key in enumerate(validators):
        save_keys(out / validator_key_file(index), [key])
    save_keys(out / ACCOUNTS_FILE, accounts)
    (out / GENESIS_FILE).write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")
    print(f"devnet in {out}: chain {genesis.chain_id}, genesis {genesis.hash.hex()[:16]}.., "
          f"{len(validators)} {validator_scheme} validators, {len(accounts)} {account_scheme} accounts "
          f"({time.perf_counter() - started:.1f} s)")
    return 0
