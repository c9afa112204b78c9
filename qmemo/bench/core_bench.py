"""`qmemo bench core`: what the chain core costs per transaction, next to the signature check.

For each scheme (Falcon-512 and ML-DSA-44 by default) it signs a block's worth of
transactions (4,000, MEMO's block) with 256-byte payloads and times, per transaction:
binary decoding (which includes the signing-digest and id hashing and the address),
JSON decoding, each digest alone, Merkle root building, block decoding, the bare
signature verifications, and the full `apply_block` of the block with a cold signature
cache (every signature verified) and a warm one (all verified at admission: the cache
answers).

The share of signature verification in a cold validation is measured inside that same
validation (the verifier it is given times its own calls), so it does not depend on
two runs seeing the same machine; what is left is the core's own overhead.

Each step runs --repeat times, round-robin over the steps (so a busy neighbour slows
them alike), one pass over the whole block each time, GC off during a pass as timeit
does. The table shows the best pass (the one least disturbed by other processes); the
JSON, saved with the machine, versions and load average under results/ (`--out` to
choose the file), has every pass and the medians. This module measures and returns the
document; qmemo.commands.bench_core prints and saves it.
"""
from __future__ import annotations

import gc
import os
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson

from qmemo.core.block import Block, make_block
from qmemo.core.genesis import next_turn_ms, parse_genesis
from qmemo.core.merkle import merkle_root
from qmemo.core.state import ChainState, apply_block
from qmemo.core.transaction import Transaction, derive_address
from qmemo.core.verify_cache import VerifyCache
from qmemo.core.hashing import Domain, blake3_512
from qmemo.crypto.schemes import get_scheme
from qmemo.crypto.verifier import RegistryVerifier, scheme_table
from qmemo.errors import ConfigError
from qmemo.sysinfo import machine_info

SCHEMA = "qmemo-core-bench/1"
PAYLOAD_BYTES = 256     # MEMO's transaction body


def run_core_bench(schemes: list[str], transactions: int, accounts: int, repeat: int) -> dict[str, Any]:
    """Every step for every scheme: the result document ("qmemo-core-bench/1")."""
    if transactions < 1 or accounts < 1 or repeat < 1:
        raise ConfigError("--transactions, --accounts and --repeat must be at least 1")
    load_before = os.getloadavg()[0]   # other processes on the machine skew every figure
    results = {name: bench_scheme(name, transactions, accounts, repeat) for name in schemes}
    return {
        "schema": SCHEMA,
        "parameters": {"transactions": transactions, "accounts": accounts, "repeat": repeat,
                       "payload_bytes": PAYLOAD_BYTES},
        "machine": machine_info(),
        "load_average_1m": {"before": load_before, "after": os.getloadavg()[0]},
        "schemes": results,
    }


# (key, label) in the order printed.
STEPS = (
    ("decode_binary", "decode (binary; digests, id, address)"),
    ("decode_json", "decode (JSON text)"),
    ("hash_signing_digest", "  of which: signing digest"),
    ("hash_id", "  of which: id"),
    ("derive_address", "address derivation (uncached)"),
    ("merkle_root", "Merkle root (per leaf)"),
    ("decode_block", "block decode (per transaction)"),
    ("validate_cold", "apply_block, cold signature cache"),
    ("validate_warm", "apply_block, warm signature cache"),
    ("verify_only", "signature verification alone"),
)


def bench_scheme(name: str, count: int, accounts: int, repeat: int) -> dict[str, Any]:
    """Build a signed block for `name` and time every step over it."""
    scheme = get_scheme(name)
    scheme_id = scheme.info.scheme_id
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        keys = list(pool.map(lambda _: scheme.keypair(), range(accounts + 1)))
        validator, senders = keys[0], keys[1:]
        addresses = [derive_address(scheme_id, key.public_key) for key in senders]
        genesis = parse_genesis({
            "format": "qmemo-genesis/1", "chain_id": 1, "genesis_time_ms": 0, "block_interval_ms": 2000,
            "producer_timeout_ms": 2000, "max_clock_drift_ms": 500, "max_block_transactions": count, "min_fee": 1,
            "tx_schemes": [scheme.name],
            "validators": [{"name": "validator-0", "scheme": scheme.name, "public_key": validator.public_key.hex()}],
            "accounts": [{"address": address.hex(), "balance": 10**12} for address in addresses],
        }, scheme_table([scheme.name]))
        payload = bytes(range(256)) * (PAYLOAD_BYTES // 256)
        unsigned = [Transaction(1, scheme_id, senders[i % accounts].public_key, i // accounts,
                                addresses[(i + 1) % accounts], 1, 1, payload) for i in range(count)]
        signatures = pool.map(lambda i: scheme.sign(senders[i % accounts].secret_key, unsigned[i].signing_digest),
                              range(count))
        transactions = [tx.signed(lambda _, s=signature: s) for tx, signature in zip(unsigned, signatures)]
    block = make_block(chain_id=1, height=1, previous_hash=genesis.hash,
                       timestamp_ms=next_turn_ms(genesis, 0, 1, 0, 0), producer_index=0, transactions=transactions,
                       sign=lambda digest: scheme.sign(validator.secret_key, digest))
    now_ms = block.header.timestamp_ms
    encodings = [tx.encoded for tx in transactions]
    json_texts = [orjson.dumps(tx.to_json()) for tx in transactions]
    block_bytes = block.encode()
    unsigned_parts = [tx.encoded[:len(tx.encoded) - 2 - len(tx.signature)] for tx in transactions]
    signature_parts = [(tx.signing_digest, tx.encoded[len(u):]) for tx, u in zip(transactions, unsigned_parts)]
    ids = [tx.id for tx in transactions]
    uncached_address = derive_address.__wrapped__

    def validate(cache: VerifyCache) -> None:
        apply_block(ChainState.from_genesis(genesis), block, cache, now_ms)

    verify_in_cold_us: list[float] = []

    def validate_cold() -> None:
        timed = _TimedVerifier(RegistryVerifier())
        validate(VerifyCache(timed))
        verify_in_cold_us.append(timed.elapsed_ns / 1000 / count)

    def warm_cache() -> VerifyCache:
        cache = VerifyCache(RegistryVerifier())
        cache.verify_transactions(transactions)
        return cache

    steps = {
        "decode_binary": lambda: [Transaction.decode(e) for e in encodings],
        "decode_json": lambda: [Transaction.from_json(orjson.loads(text)) for text in json_texts],
        "hash_signing_digest": lambda: [blake3_512(Domain.TX_SIGNING, part) for part in unsigned_parts],
        "hash_id": lambda: [blake3_512(Domain.TX_ID, digest, rest) for digest, rest in signature_parts],
        "derive_address": lambda: [uncached_address(scheme_id, tx.public_key) for tx in transactions],
        "merkle_root": lambda: merkle_root(ids),
        "decode_block": lambda: Block.decode(block_bytes),
        "validate_cold": validate_cold,
        "validate_warm": (validate, warm_cache),
        "verify_only": lambda: [scheme.verify(tx.public_key, tx.signing_digest, tx.signature) for tx in transactions],
    }
    runs_us: dict[str, list[float]] = {key: [] for key in steps}
    for _ in range(repeat):
        for key, step in steps.items():
            runs_us[key].append(_time_per_item(step, count))
    figures = {key: {"best_us": min(runs), "median_us": statistics.median(runs), "runs_us": runs}
               for key, runs in runs_us.items()}
    shares = [verify / total for verify, total in zip(verify_in_cold_us, runs_us["validate_cold"])]
    overheads = [total - verify for verify, total in zip(verify_in_cold_us, runs_us["validate_cold"])]
    return {
        "implementation": scheme.info.implementation,
        "transaction_bytes": len(encodings[0]),
        "block_bytes": len(block_bytes),
        "per_transaction_us": figures,
        "verify_in_cold_validation_us": verify_in_cold_us,
        "verify_share_of_cold_validation": statistics.median(shares),
        "core_overhead_cold_us": statistics.median(overheads),
    }


class _TimedVerifier:
    """A SignatureVerifier that adds up the time spent in the verifier it wraps."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._clock = time.perf_counter_ns
        self.elapsed_ns = 0

    def verify(self, scheme_id: int, public_key: bytes, message: bytes, signature: bytes) -> bool:
        started = self._clock()
        ok = self._inner.verify(scheme_id, public_key, message, signature)
        self.elapsed_ns += self._clock() - started
        return ok


def _time_per_item(step: Any, count: int) -> float:
    """Microseconds per item of one pass of `step` over `count` items.

    `step` is a callable, or (callable, setup) where setup() prepares its argument
    outside the timed region (a warm cache, for instance).
    """
    function, setup = step if isinstance(step, tuple) else (step, None)
    argument = setup() if setup else None
    gc.collect()
    gc.disable()
    try:
        started = time.perf_counter_ns()
        function(argument) if setup else function()
        elapsed_ns = time.perf_counter_ns() - started
    finally:
        gc.enable()
    return elapsed_ns / 1000 / count
