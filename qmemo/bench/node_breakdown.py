"""`qmemo bench node`, where admission time goes: each admission step timed in this
process on the same transactions, one step at a time with nothing else running (no HTTP,
no threads), in microseconds per transaction.
"""

from __future__ import annotations

import time
from typing import Any

import orjson

from qmemo.bench.node_setup import BenchDevnet
from qmemo.core.genesis import parse_genesis
from qmemo.core.mempool import Mempool, MempoolLimits
from qmemo.core.state import ChainState, check_transaction_form
from qmemo.core.transaction import Transaction
from qmemo.core.verify_cache import VerifyCache
from qmemo.crypto.verifier import RegistryVerifier, scheme_table
from qmemo.devnet.files import GENESIS_FILE
from qmemo.net.wire import decode_tx_batch, encode_tx_batch, encode_tx_results
from qmemo.node.answers import ACCEPTED, TxOutcome


def admission_breakdown(devnet: BenchDevnet, transactions: list[Transaction], verifier: str) -> dict[str, float]:
    """Microseconds per transaction of each admission step, in this process (no HTTP)."""
    genesis = parse_genesis(orjson.loads((devnet.dir / GENESIS_FILE).read_bytes()), scheme_table())
    state = ChainState.from_genesis(genesis)
    body = encode_tx_batch([tx.encoded for tx in transactions])
    n = len(transactions)
    steps: dict[str, float] = {}

    def timed(name: str, fn) -> Any:
        started = time.perf_counter()
        value = fn()
        steps[name] = (time.perf_counter() - started) / n * 1e6
        return value

    records = timed("unframe", lambda: decode_tx_batch(body, n))
    decoded = timed("decode (ids, digests, address)", lambda: [Transaction.decode(r) for r in records])
    timed("form rules", lambda: [check_transaction_form(genesis, tx) for tx in decoded])
    cache = VerifyCache(RegistryVerifier(verifier))
    timed("signature (cache + registry verify)", lambda: cache.verify_transactions(decoded))
    mempool = Mempool(MempoolLimits(max_transactions=10 * n, max_bytes=1 << 34, max_per_sender=n))

    def check_and_add() -> None:
        for tx in decoded:
            account = state.account(tx.sender)
            mempool.check(tx, account)
            mempool.add(tx, account)

    timed("mempool check + add", check_and_add)
    outcomes = [TxOutcome(tx.id, ACCEPTED) for tx in decoded]
    timed("JSON answer", lambda: encode_tx_results(outcomes))
    return steps
