"""`qmemo bench node`, where admission time goes: each admission step timed in this
process on the same transactions, one step at a time with nothing else running (no HTTP,
no threads), in microseconds of this thread's CPU time per transaction.

The steps are the node's one admission path (qmemo.node.admission) over the node's
ledger (qmemo.node.ledger), batch by batch as the node receives them: the admission
kernel's call (framing, decoding, ids, digests, senders), the ledger's checks
(duplicates, form, nonce and balance), the verify of every candidate through the node's
verifier, the ledger's commit into the pool, and the JSON answer built in C. The
kernel's step is the best of `KERNEL_PASSES`: it is also the decode and hash of the
headline's floor (qmemo.bench.node_figures), which noise must not lower.

Each step starts with the cycle collector settled as a running node has it: what exists
is collected and frozen (the node freezes what exists at start), and young collections
come at the node's threshold. Without that, a full collection over the benchmark's own
tens of thousands of transactions would fall in whichever step crosses the collector's
threshold and swamp that step's figure (docs/methodology.md section 10, "The breakdown's
cycle collector", has the runs).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from qmemo.bench.node_figures import KERNEL_STEP
from qmemo.bench.node_setup import BenchDevnet
from qmemo.core.transaction import Transaction
from qmemo.crypto.admit_kernel import AdmitKernel
from qmemo.crypto.verifier import load_genesis
from qmemo.devnet.files import GENESIS_FILE
from qmemo.errors import BenchmarkError
from qmemo.net.wire import encode_tx_batch
from qmemo.node.heap import GC_YOUNG_THRESHOLD
from qmemo.node.ledger import PoolLimits, new_ledger

KERNEL_PASSES = 3     # the kernel step is the best of this many passes: a ceiling must not be lowered by noise


@contextmanager
def _node_collector() -> Iterator[None]:
    """The node's young threshold until the end; this process's own settings after."""
    threshold = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *threshold[1:])
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


def _settle() -> None:
    """Before a step: nothing left for the collector from the steps before, all of it frozen."""
    gc.collect()
    gc.freeze()


def admission_breakdown(devnet: BenchDevnet, transactions: list[Transaction], verifier: str,
                        batch: int = 500) -> dict[str, float]:
    """Microseconds per transaction of each admission step, in this process (no HTTP); see
    `_admission_steps`."""
    with _node_collector():
        return _admission_steps(devnet, transactions, verifier, batch)


def _admission_steps(devnet: BenchDevnet, transactions: list[Transaction], verifier: str,
                     batch: int) -> dict[str, float]:
    """Microseconds per transaction of each admission step, in this process (no HTTP),
    batch by batch (`batch` transactions, as the node receives them) on a fresh ledger."""
    genesis = load_genesis(devnet.dir / GENESIS_FILE)
    n = len(transactions)
    kernel = AdmitKernel(genesis.chain_id, [genesis.scheme_name(i) for i in genesis.tx_scheme_ids], verifier=verifier)
    bodies = [encode_tx_batch([tx.encoded for tx in transactions[i:i + batch]]) for i in range(0, n, batch)]
    steps: dict[str, float] = {}

    def ledger_of() -> Any:
        ledger = new_ledger(genesis, PoolLimits(max_txs=10 * n, max_bytes=1 << 34, max_per_sender=n))
        for address, balance in genesis.balances:
            ledger.set_account(address, balance, 0)
        return ledger

    best = float("inf")
    for _ in range(KERNEL_PASSES):
        ledger = ledger_of()
        _settle()
        started = time.thread_time()
        batches = [ledger.admit(kernel.table, part, batch) for part in bodies]
        best = min(best, (time.thread_time() - started) / n * 1e6)
    steps[KERNEL_STEP] = best

    # Batch by batch, as the node does (a sender's nonces may span two batches): each step's
    # CPU is summed over the batches.
    names = ("ledger checks", "signature (kernel, node's verifier)", "ledger commit (pool)", "JSON answer (C)")
    totals = dict.fromkeys(names, 0.0)
    _settle()
    for part in batches:
        for name, step in zip(names, (ledger.precheck, lambda p: p.verify(kernel.table, 0, 1),
                                      lambda p: ledger.commit(p, 0.0, True), lambda p: p.answer_json({}))):
            started = time.thread_time()
            step(part)
            totals[name] += time.thread_time() - started
    steps.update({name: seconds / n * 1e6 for name, seconds in totals.items()})
    accepted = sum(part.counts()[0] for part in batches)
    if accepted != n:
        raise BenchmarkError(f"the ledger accepted {accepted} of the benchmark's {n} transactions: "
                             f"{[part.counts()[2] for part in batches]}")
    return steps
