"""`qmemo bench node`: how fast one node admits pre-signed transactions, per CPU-second.

Method:
1. A throw-away devnet with one validator whose block interval is an hour, so no block
   is produced during the measurement: what is timed is admission alone (decode, cheap
   checks, signature verification in the pool, mempool insertion, the JSON answer).
2. Every transaction is signed before any node starts (a thread pool; never timed), and
   framed into binary `POST /txs` bodies of `--batch` transactions.
3. For each verify-thread count (`--threads 1,2`), `--rounds` times (the counts' order
   reversed every other round, so neither always runs first): a fresh `qmemo node` subprocess, a
   warm-up of `--warmup` transactions, then the rest sent over loopback with
   `--concurrency` requests in flight. Measured: wall time from the first request to the
   last answer, and the node process's CPU time (user + system, every thread, from
   /proc/<pid>/task/*/schedstat: qmemo.bench.proc_cpu) over the same span. Every
   transaction must be accepted.
4. Figures: admitted tx/s; admitted tx per CPU-second of the node; the ratio of the
   latter to the C single-core verify rate (bench_c's latest summary.json, or - if there
   is none - labelled as missing); the same ratio against same-run references measured
   here in one thread, all through the node's own Falcon verifier (`--verifier`, the
   node's default "fast" or "liboqs"): a native loop over the transactions
   (`verify_many`: one call, no Python per transaction - the `headline`'s reference), the
   registry's `verify` (what the node calls) and the bare ctypes call; and the 2-vs-1-thread
   speed-up. The node reports which verifier ran (/metrics); a mismatch fails the run.
5. Where time goes: the node's CPU split by thread (the event loop: HTTP, decoding, checks,
   mempool, JSON; the verify threads: liboqs plus the Python around each call and the waits
   for the GIL), and an in-process breakdown of the admission steps on the same transactions,
   one step at a time with nothing else running.

The client runs on the same machine and competes for the same cores; its CPU time is
reported too. `run_node_bench` returns the result document ("qmemo-node-bench/1"); the
command (qmemo.commands.bench_node) prints it and saves it. This module never prints
and never imports the CLI: progress goes to the `progress` callback.

One job per module: this one the parameters and the sequence; qmemo.bench.node_setup the
devnet and the signing, node_references the same-run and C references, node_breakdown
the in-process steps, node_run one node run over HTTP (proc_cpu its CPU sampling), and
node_figures the arithmetic and the document.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qmemo.bench.node_breakdown import admission_breakdown
from qmemo.bench.node_figures import summarize
from qmemo.bench.node_references import c_baseline_reference, same_run_references
from qmemo.bench.node_run import run_node
from qmemo.bench.node_setup import make_devnet, sign_transactions
from qmemo.crypto.schemes import DEFAULT_VERIFIER, backend_of
from qmemo.errors import ConfigError
from qmemo.sysinfo import machine_info


@dataclass(frozen=True, slots=True)
class NodeBenchConfig:
    """The benchmark's parameters (the `qmemo bench node` flags)."""

    txs: int = 30_000                    # measured transactions per run
    warmup: int = 3_000                  # transactions before timing starts
    batch: int = 500                     # transactions per request
    concurrency: int = 4                 # requests in flight
    threads: tuple[int, ...] = (1, 2)    # verify-thread counts, `rounds` node runs each (0: the node verifies inline)
    # Node runs per thread count. One run's CPU per transaction moves from run to run with
    # the same code (docs/methodology.md section 12 gives the spread seen on 2 cores); the
    # figures are the median run's, and the spread is in the file.
    rounds: int = 3
    scheme: str = "Falcon-512"
    verifier: str = DEFAULT_VERIFIER     # the node's Falcon verifier, and the references'
    gil_switch_interval_s: float | None = None   # the node's sys.setswitchinterval (None: its default)

    def __post_init__(self) -> None:
        if self.txs < self.batch or self.batch < 1 or self.concurrency < 1 or not self.threads \
                or min(self.threads) < 0 or self.warmup < 0 or self.rounds < 1:
            raise ConfigError("need --txs >= --batch >= 1, --concurrency >= 1, --warmup >= 0, --rounds >= 1 and "
                              "thread counts >= 0 (0: verify inline)")
        backend_of("Falcon-512", self.verifier)    # an unknown verifier is refused before any work

    def parameters(self) -> dict[str, Any]:
        return {"scheme": self.scheme, "txs": self.txs, "warmup": self.warmup, "batch": self.batch,
                "concurrency": self.concurrency, "threads": list(self.threads), "rounds": self.rounds,
                "gil_switch_interval_s": self.gil_switch_interval_s, "verifier": self.verifier}


def run_node_bench(config: NodeBenchConfig, progress: Callable[[str], None]) -> dict[str, Any]:
    """Run the whole benchmark and return its result document (see the module docstring)."""
    with tempfile.TemporaryDirectory(prefix="qmemo-node-bench-") as tmp:
        workdir = Path(tmp)
        devnet = make_devnet(workdir, config.scheme, config.warmup + config.txs)
        progress(f"signing {config.warmup + config.txs:,} {config.scheme} transactions ...")
        transactions = sign_transactions(devnet, config.warmup + config.txs)
        references = same_run_references(config.scheme, config.verifier, transactions[:3000])
        breakdown = admission_breakdown(devnet, transactions[:4000], config.verifier, config.batch)
        runs = [run_node(workdir, devnet, transactions, threads, batch=config.batch, warmup=config.warmup,
                         concurrency=config.concurrency, gil_switch_interval_s=config.gil_switch_interval_s,
                         verifier=config.verifier, progress=progress, round_=round_)
                for round_ in range(config.rounds)
                for threads in (config.threads if round_ % 2 == 0 else config.threads[::-1])]
    document = summarize(config.parameters(), runs, references, c_baseline_reference(config.scheme), breakdown)
    document["machine"] = machine_info()
    return document
