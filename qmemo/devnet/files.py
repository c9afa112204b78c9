"""A devnet's files: the genesis, one key file per validator, the funded accounts' keys.

`qmemo genesis` (the command: flags and the console) and `qmemo bench node` (a
throw-away devnet) both create a devnet through `create_devnet`, so there is one way to
make one. Key files are in the qmemo-keys/1 format (qmemo/crypto/keys.py), mode 0600.
Keys are generated on every core by threads (liboqs-python calls liboqs through ctypes,
which releases the GIL, so threads already use every core; processes would add only
their start-up and the keys' pickling; docs/setup.md has how long a devnet's keys take).
Nothing here prints: progress goes to `on_keys`.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

from qmemo.core.defaults import CHAIN
from qmemo.core.genesis import GENESIS_FORMAT, Genesis, parse_genesis
from qmemo.core.shards import MAX_SHARDS, ShardedGenesis, parse_sharded_genesis, shard_of, sharded_document
from qmemo.core.transaction import derive_address
from qmemo.crypto.keys import NamedKey, save_keys
from qmemo.crypto.schemes import canonical_name, get_scheme
from qmemo.crypto.verifier import scheme_table
from qmemo.errors import ConfigError

GENESIS_FILE = "genesis.json"
ACCOUNTS_FILE = "accounts.keys.json"


def validator_key_file(index: int, shard: int | None = None) -> str:
    """Validator `index`'s key file (of `shard`, in a sharded devnet)."""
    return f"validator-{index}.keys.json" if shard is None else f"shard-{shard}-validator-{index}.keys.json"


@dataclass(frozen=True, slots=True)
class DevnetSpec:
    """What `qmemo genesis` takes: the chain's parameters and how many keys to make."""

    out: Path
    validators: int = CHAIN.validators
    accounts: int = CHAIN.accounts
    scheme: str = CHAIN.scheme
    validator_scheme: str | None = None          # default: scheme
    tx_schemes: tuple[str, ...] | None = None    # default: (scheme,)
    chain_id: int = CHAIN.chain_id
    balance: int = CHAIN.balance
    block_interval_ms: int = CHAIN.block_interval_ms
    producer_timeout_ms: int | None = None       # default: the block interval
    max_clock_drift_ms: int = CHAIN.max_clock_drift_ms
    max_block_transactions: int = CHAIN.max_block_transactions
    min_fee: int = CHAIN.min_fee
    genesis_time_ms: int | None = None           # default: now
    force: bool = False                          # replace an existing devnet in `out`
    # Shards (qmemo.core.shards): more than one writes a sharded genesis (qmemo-genesis/2):
    # `validators` per shard, shard k's chain id `chain_id + k`, each account in the shard
    # its address names.
    shards: int = 1


@dataclass(frozen=True, slots=True)
class Devnet:
    """The devnet written: its parsed genesis and its keys (a sharded devnet's genesis is
    its shard 0's view; `sharded` holds them all)."""

    dir: Path
    genesis: Genesis
    validators: tuple[NamedKey, ...]
    accounts: tuple[NamedKey, ...]
    sharded: ShardedGenesis | None = None


def _no_progress(done: int, total: int) -> None:
    pass


def create_devnet(spec: DevnetSpec, on_keys: Callable[[int, int], None] = _no_progress) -> Devnet:
    """Generate the keys, check the genesis as a node would, and write every file.

    `on_keys(done, total)` is called (on this thread) as keys are made, for a progress line."""
    if spec.validators < 1 or spec.accounts < 0:
        raise ConfigError("--validators must be at least 1 and --accounts at least 0")
    if not 1 <= spec.shards <= MAX_SHARDS:
        raise ConfigError(f"--shards must be 1 to {MAX_SHARDS}")
    if spec.shards > 1:
        return _create_sharded(spec, on_keys)
    if (spec.out / GENESIS_FILE).exists() and not spec.force:
        raise ConfigError(f"{spec.out / GENESIS_FILE} exists; pass --force to replace the devnet")
    account_scheme = canonical_name(spec.scheme)
    validator_scheme = canonical_name(spec.validator_scheme or account_scheme)
    tx_schemes = [canonical_name(name) for name in (spec.tx_schemes or (account_scheme,))]
    if account_scheme not in tx_schemes:
        raise ConfigError(f"the accounts' scheme {account_scheme} must be one of --tx-schemes")

    jobs = [(f"validator-{i}", validator_scheme) for i in range(spec.validators)]
    jobs += [(f"account-{i:05d}", account_scheme) for i in range(spec.accounts)]
    keys: list[NamedKey] = []
    on_keys(0, len(jobs))
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for key in pool.map(lambda job: NamedKey.from_keypair(job[0], get_scheme(job[1]).keypair()), jobs):
            keys.append(key)
            on_keys(len(keys), len(jobs))
    validators, accounts = keys[:spec.validators], keys[spec.validators:]

    document = {
        "format": GENESIS_FORMAT,
        "chain_id": spec.chain_id,
        "genesis_time_ms": spec.genesis_time_ms if spec.genesis_time_ms is not None else time.time_ns() // 1_000_000,
        "block_interval_ms": spec.block_interval_ms,
        "producer_timeout_ms": spec.producer_timeout_ms or spec.block_interval_ms,
        "max_clock_drift_ms": spec.max_clock_drift_ms,
        "max_block_transactions": spec.max_block_transactions,
        "min_fee": spec.min_fee,
        "tx_schemes": tx_schemes,
        "validators": [{"name": key.name, "scheme": key.scheme, "public_key": key.public_key.hex()}
                       for key in validators],
        "accounts": [{"address": derive_address(get_scheme(key.scheme).info.scheme_id, key.public_key).hex(),
                      "balance": spec.balance} for key in accounts],
    }
    genesis = parse_genesis(document, scheme_table())   # the same checks a node runs on it

    spec.out.mkdir(parents=True, exist_ok=True)
    for index, key in enumerate(validators):
        save_keys(spec.out / validator_key_file(index), [key])
    save_keys(spec.out / ACCOUNTS_FILE, accounts)
    (spec.out / GENESIS_FILE).write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")
    return Devnet(spec.out, genesis, tuple(validators), tuple(accounts))


def _schemes(spec: DevnetSpec) -> tuple[str, str, list[str]]:
    account_scheme = canonical_name(spec.scheme)
    tx_schemes = [canonical_name(name) for name in (spec.tx_schemes or (account_scheme,))]
    if account_scheme not in tx_schemes:
        raise ConfigError(f"the accounts' scheme {account_scheme} must be one of --tx-schemes")
    return account_scheme, canonical_name(spec.validator_scheme or account_scheme), tx_schemes


def _key_in_shard(name: str, scheme: str, shard: int, shards: int) -> NamedKey:
    """A new key whose address lies in `shard` (drawn until it does: `shards` draws on average)."""
    signer = get_scheme(scheme)
    while True:
        key = NamedKey.from_keypair(name, signer.keypair())
        if shard_of(derive_address(signer.info.scheme_id, key.public_key), shards) == shard:
            return key


def _create_sharded(spec: DevnetSpec, on_keys: Callable[[int, int], None]) -> Devnet:
    """A sharded devnet: `spec.validators` validators per shard, each keyed into its shard,
    and `spec.accounts` accounts, each in the shard its address names."""
    account_scheme, validator_scheme, tx_schemes = _schemes(spec)
    jobs = [(f"shard-{k}-validator-{i}", k) for k in range(spec.shards) for i in range(spec.validators)]
    total = len(jobs) + spec.accounts
    on_keys(0, total)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        validators: list[NamedKey] = []
        for key in pool.map(lambda job: _key_in_shard(job[0], validator_scheme, job[1], spec.shards), jobs):
            validators.append(key)
            on_keys(len(validators), total)
        accounts: list[NamedKey] = []
        names = [f"account-{i:05d}" for i in range(spec.accounts)]
        for key in pool.map(lambda name: NamedKey.from_keypair(name, get_scheme(account_scheme).keypair()), names):
            accounts.append(key)
            on_keys(len(validators) + len(accounts), total)
    account_id = get_scheme(account_scheme).info.scheme_id
    by_shard: list[list[dict]] = [[] for _ in range(spec.shards)]
    for key in accounts:
        address = derive_address(account_id, key.public_key)
        by_shard[shard_of(address, spec.shards)].append({"address": address.hex(), "balance": spec.balance})
    common = {"genesis_time_ms": spec.genesis_time_ms if spec.genesis_time_ms is not None
              else time.time_ns() // 1_000_000,
              "block_interval_ms": spec.block_interval_ms,
              "producer_timeout_ms": spec.producer_timeout_ms or spec.block_interval_ms,
              "max_clock_drift_ms": spec.max_clock_drift_ms, "max_block_transactions": spec.max_block_transactions,
              "min_fee": spec.min_fee}
    shards = [{"chain_id": spec.chain_id + k,
               "validators": [{"name": key.name, "scheme": key.scheme, "public_key": key.public_key.hex()}
                              for key in validators[k * spec.validators:(k + 1) * spec.validators]],
               "accounts": by_shard[k]} for k in range(spec.shards)]
    document = sharded_document(common, tx_schemes, shards)
    sharded = parse_sharded_genesis(document, scheme_table())    # the same checks a node runs on it
    spec.out.mkdir(parents=True, exist_ok=True)
    for k in range(spec.shards):
        for i in range(spec.validators):
            save_keys(spec.out / validator_key_file(i, k), [validators[k * spec.validators + i]])
    save_keys(spec.out / ACCOUNTS_FILE, accounts)
    (spec.out / GENESIS_FILE).write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")
    return Devnet(spec.out, sharded.view(0), tuple(validators), tuple(accounts), sharded)
