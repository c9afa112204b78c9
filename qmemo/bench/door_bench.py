"""`qmemo bench door`: what slow and idle clients cost a node's admission rate.

Method: `qmemo bench node`'s devnet, signing and node runs (qmemo.bench.node_setup,
node_run), one verify-thread count. Each round runs two fresh nodes, one undisturbed
("quiet") and one with a mix of hostile clients held against it through the timed span
("hostile": qmemo.bench.hostile - bodies a byte a second, headers never finished, idle
connections, clients that never read their answers), the order swapped every other round so neither always runs first. Measured
per run: admitted tx/s and the node's CPU per admitted transaction, and what the hostile
clients did (connections, closed by the node, answered 408) and the descriptors the node
held. The figures are each mode's median run (by admitted tx/s); the verdict is the hostile
median's rate over the quiet one's (target: at least 0.90), and a mode whose runs spread
more than `DISTURBED_ABOVE` marks the machine as disturbed.

The hostile clients run in this process, on a thread of their own: their CPU (a few
writes a second per connection) competes for the same cores, as an attacker on the same
host would; the client's CPU time is in each run.
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qmemo.bench.hostile import HostileMix, hostile_clients
from qmemo.bench.node_run import run_node
from qmemo.bench.node_setup import make_devnet, sign_transactions
from qmemo.crypto.schemes import DEFAULT_VERIFIER, backend_of
from qmemo.errors import ConfigError
from qmemo.sysinfo import machine_info

SCHEMA = "qmemo-door-bench/1"
DISTURBED_ABOVE = 0.15      # runs of one mode this far apart: the machine moved under them
TARGET_RATIO = 0.90
MODES = ("quiet", "hostile")


@dataclass(frozen=True, slots=True)
class DoorBenchConfig:
    txs: int = 300_000       # ~5-10 s of timed span a run: slow clients send a byte a second
    warmup: int = 3_000
    batch: int = 500
    concurrency: int = 4
    threads: int = 1
    rounds: int = 3
    scheme: str = "Falcon-512"
    verifier: str = DEFAULT_VERIFIER
    mix: HostileMix = HostileMix()
    # The node's body_timeout_s and idle_timeout_s in both modes (None: the node's defaults,
    # 30 s). Shorter than the timed span, the node closes slow clients during it and they
    # connect again: what that churn costs is measured too.
    node_timeout_s: float | None = None

    def __post_init__(self) -> None:
        if self.txs < self.batch or self.batch < 1 or self.concurrency < 1 or self.threads < 0 or self.rounds < 1 \
                or self.warmup < 0 or min(self.mix.slow_bodies, self.mix.trickled_headers, self.mix.idle, self.mix.slow_readers) < 0 \
                or self.mix.interval_s <= 0 or (self.node_timeout_s is not None and self.node_timeout_s <= 0):
            raise ConfigError("need --txs >= --batch >= 1, --concurrency >= 1, --threads >= 0, --rounds >= 1, "
                              "--warmup >= 0, client counts >= 0 and --interval-s > 0")
        backend_of("Falcon-512", self.verifier)

    def parameters(self) -> dict[str, Any]:
        return {"scheme": self.scheme, "txs": self.txs, "warmup": self.warmup, "batch": self.batch,
                "concurrency": self.concurrency, "threads": self.threads, "rounds": self.rounds,
                "verifier": self.verifier, "hostile": self.mix.as_dict(), "node_timeout_s": self.node_timeout_s}


def run_door_bench(config: DoorBenchConfig, progress: Callable[[str], None]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="qmemo-door-bench-") as tmp:
        workdir = Path(tmp)
        devnet = make_devnet(workdir, config.scheme, config.warmup + config.txs)
        progress(f"signing {config.warmup + config.txs:,} {config.scheme} transactions ...")
        transactions = sign_transactions(devnet, config.warmup + config.txs)
        settings = ({} if config.node_timeout_s is None else
                    {"body_timeout_s": config.node_timeout_s, "idle_timeout_s": config.node_timeout_s})
        runs = []
        for round_ in range(config.rounds):
            for mode in MODES if round_ % 2 == 0 else MODES[::-1]:
                progress(f"round {round_ + 1}, {mode}:")
                run = run_node(workdir, devnet, transactions, config.threads, batch=config.batch,
                               warmup=config.warmup, concurrency=config.concurrency, gil_switch_interval_s=None,
                               verifier=config.verifier, progress=progress, round_=round_, label=mode,
                               disturb=hostile_clients(config.mix) if mode == "hostile" else None,
                               node_settings=settings)
                n = run["transactions"]
                runs.append({"mode": mode, "round": round_, "admitted_per_s": n / run["wall_s"],
                             "node_cpu_us_per_tx": run["node_cpu_s"] / n * 1e6, **run})
    document = {"schema": SCHEMA, "parameters": config.parameters(), "runs": runs, **figures(runs)}
    document["machine"] = machine_info()
    return document


def figures(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each mode's median run, the hostile-over-quiet ratios, and whether the runs look disturbed."""
    by_mode: dict[str, Any] = {}
    for mode in MODES:
        rates = [run["admitted_per_s"] for run in runs if run["mode"] == mode]
        cpu = [run["node_cpu_us_per_tx"] for run in runs if run["mode"] == mode]
        by_mode[mode] = {"admitted_per_s": statistics.median(rates), "node_cpu_us_per_tx": statistics.median(cpu),
                         "admitted_per_s_by_round": rates, "spread": max(rates) / min(rates) - 1}
    quiet, hostile = by_mode["quiet"], by_mode["hostile"]
    ratio = hostile["admitted_per_s"] / quiet["admitted_per_s"]
    disturbed = [mode for mode in MODES if by_mode[mode]["spread"] > DISTURBED_ABOVE]
    return {"by_mode": by_mode, "rate_ratio": ratio,
            "cpu_per_tx_ratio": hostile["node_cpu_us_per_tx"] / quiet["node_cpu_us_per_tx"],
            "target_ratio": TARGET_RATIO, "meets_target": ratio >= TARGET_RATIO,
            "disturbed_above": DISTURBED_ABOVE, "disturbed": disturbed}
