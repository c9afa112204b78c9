"""What an idle devnet's nodes cost: each node's CPU over a window with no load, from /proc.

`run_idle_bench` starts a devnet with `./devnet.sh --no-load --no-monitor --no-baseline`
(S shards of 3 validators, in its own folder and on its own ports, so another devnet is
never touched), finds the node processes among the script's children, lets them settle
(the first sync rounds, the producers' first turns), and reads each node's utime + stime
(/proc/<pid>/stat) and its threads' wake-ups (voluntary and involuntary context switches, in
/proc/<pid>/task/*/status) at the start and at the end of the window, and each node's /metrics just outside it: the CPU its stages
account for (qmemo.node.stages: block build, store, mempool, relay, verify, and "other",
the event loop's HTTP, timers and scheduling), the blocks it produced and received, so
the window's CPU is split by source and charged per block. After the window
it scrapes one node's /metrics `scrapes` times and charges that node's extra CPU to the
scrapes: what a dashboard or Prometheus costs per look. The devnet is stopped by the
script's PID (SIGTERM: devnet.sh stops its nodes by theirs), also on an error or Ctrl-C.

The document (`SCHEMA`) holds the machine and versions, each node's CPU share of one
core and wake-ups per second, the total, and the targets it is judged by. CPU is
charged from clock ticks (10 ms), so a window of 60 s resolves a node's share to
~0.02% of a core.

Never imports the CLI; the command is qmemo.commands.bench_idle.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from qmemo.api_schema import MetricsSnapshot
from qmemo.devnet.health import wait_ready
from qmemo.errors import ConfigError
from qmemo.net.client import open_clients
from qmemo.paths import REPO_ROOT
from qmemo.sysinfo import machine_info

SCHEMA = "qmemo-idle-bench/1"
VALIDATORS_PER_SHARD = 3       # devnet.sh's --nodes default: the devnet a user starts
# The targets: an idle 4-shard devnet's 12 nodes under 15% of one core together,
# and one node of an idle devnet under 1%.
TARGET_TOTAL_PERCENT = 15.0
TARGET_NODE_PERCENT = 1.0
HEALTH_WAIT_S = 180.0          # a new devnet's genesis (12 validators, 1,200 accounts) comes first
STOP_WAIT_S = 30.0


@dataclass(frozen=True, slots=True)
class IdleBenchConfig:
    shards: int = 4
    seconds: float = 60.0          # the measured window
    settle_s: float = 10.0         # after every node is ready, before the window
    scrapes: int = 50              # /metrics scrapes of one node after the window (0: none)
    base_port: int = 8600
    devnet_dir: Path | None = None  # default: a folder of its own under the system's temp dir, reused

    def parameters(self) -> dict[str, Any]:
        document = asdict(self)
        document["devnet_dir"] = str(self.devnet_dir) if self.devnet_dir else None
        return document


@dataclass(frozen=True, slots=True)
class ProcSample:
    cpu_s: float          # utime + stime
    wakeups: int          # voluntary + involuntary context switches of every live thread


def proc_sample(pid: int) -> ProcSample:
    """One process's CPU seconds and context switches so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat", "rb") as stat:
        fields = stat.read().rsplit(b")", 1)[1].split()
    cpu_s = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    switches = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status", "rb") as status:
                for line in status:
                    if line.startswith((b"voluntary_ctxt_switches", b"nonvoluntary_ctxt_switches")):
                        switches += int(line.split()[1])
        except OSError:        # the thread ended meanwhile
            continue
    return ProcSample(cpu_s, switches)


def node_children(parent: int) -> dict[int, int]:
    """{port: pid} of the `qmemo node` processes started by process `parent`."""
    found: dict[int, int] = {}
    try:
        children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
    except OSError:
        return found
    for child in map(int, children):
        try:
            argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"node" in argv and b"--port" in argv:
            found[int(argv[argv.index(b"--port") + 1])] = child
    return found


def figures(names: list[str], before: dict[str, ProcSample], after: dict[str, ProcSample],
            seconds: float) -> dict[str, Any]:
    """Each node's share of one core and wake-ups per second over the window, the total, the verdicts."""
    nodes = []
    for name in names:
        cpu_s = after[name].cpu_s - before[name].cpu_s
        nodes.append({"name": name, "cpu_s": round(cpu_s, 3), "cpu_percent": round(100 * cpu_s / seconds, 3),
                      "wakeups_per_s": round((after[name].wakeups - before[name].wakeups) / seconds, 1)})
    total = sum(node["cpu_percent"] for node in nodes)
    busiest = max(node["cpu_percent"] for node in nodes)
    return {"nodes": nodes, "total_cpu_percent": round(total, 3), "max_node_cpu_percent": busiest,
            "mean_node_cpu_percent": round(total / len(nodes), 3),
            "targets": {"total_cpu_percent_below": TARGET_TOTAL_PERCENT,
                        "node_cpu_percent_below": TARGET_NODE_PERCENT},
            "meets_total": total < TARGET_TOTAL_PERCENT, "meets_node": busiest < TARGET_NODE_PERCENT}


def by_source(before: list[MetricsSnapshot], after: list[MetricsSnapshot], seconds: float) -> dict[str, Any]:
    """All nodes together over the window: each stage's share of one core, the blocks
    produced and received, and the CPU per block of everything but the loop's "other"."""
    stages: dict[str, float] = {}
    for first, last in zip(before, after):
        for name, figure in last.stages.by_stage.items():
            start = first.stages.by_stage.get(name)
            stages[name] = stages.get(name, 0.0) + figure.cpu_s - (start.cpu_s if start else 0.0)
    blocks = sum(last.blocks.produced + last.blocks.received - first.blocks.produced - first.blocks.received
                 for first, last in zip(before, after))
    staged_s = sum(cpu_s for name, cpu_s in stages.items() if name != "other")
    return {"stage_cpu_percent": {name: round(100 * cpu_s / seconds, 3) for name, cpu_s in stages.items()},
            "blocks_applied": blocks,     # every node's produced and received blocks
            "staged_cpu_us_per_block": round(staged_s / blocks * 1e6, 1) if blocks else None}


async def _metrics(urls: list[str]) -> list[MetricsSnapshot]:
    async with open_clients(urls) as clients:
        return list(await asyncio.gather(*(client.metrics() for client in clients)))


def run_idle_bench(config: IdleBenchConfig, progress: Callable[[str], None]) -> dict[str, Any]:
    if config.shards < 1 or config.seconds <= 0:
        raise ConfigError("an idle bench needs at least one shard and a window of more than 0 s")
    total = config.shards * VALIDATORS_PER_SHARD
    devnet_dir = config.devnet_dir or Path(tempfile.gettempdir()) / f"qmemo-idle-devnet-{config.shards}"
    runs = Path(tempfile.mkdtemp(prefix="qmemo-idle-runs-"))
    command = [str(REPO_ROOT / "devnet.sh"), "--no-load", "--no-monitor", "--no-baseline",
               "--nodes", str(VALIDATORS_PER_SHARD), "--base-port", str(config.base_port),
               "--duration", str(int(config.settle_s + config.seconds + HEALTH_WAIT_S + 60)),
               "--dir", str(devnet_dir), "--runs", str(runs)]
    if config.shards > 1:
        command += ["--shards", str(config.shards)]
    progress(f"starting {' '.join(command)}")
    # Its output to a file, not a pipe nobody reads (a full pipe would stop the script).
    with open(runs / "devnet.log", "wb") as log:
        script = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    kept = False
    urls = [f"http://127.0.0.1:{config.base_port + n}" for n in range(total)]
    try:
        ready = asyncio.run(wait_ready(urls, HEALTH_WAIT_S))
        if not all(ready.values()) or script.poll() is not None:
            kept = True
            raise ConfigError(f"the idle devnet did not become ready: {_output(script, runs)}")
        pids = node_children(script.pid)
        if len(pids) != total:
            raise ConfigError(f"found {len(pids)} node processes under devnet.sh, expected {total}")
        names = [_name(n, config.shards) for n in range(total)]
        by_name = {name: pids[config.base_port + n] for n, name in enumerate(names)}
        progress(f"{total} nodes ready; settling {config.settle_s:g} s, then measuring {config.seconds:g} s")
        time.sleep(config.settle_s)
        metrics_before = asyncio.run(_metrics(urls))
        loadavg_before = list(os.getloadavg())
        before = {name: proc_sample(pid) for name, pid in by_name.items()}
        started = time.monotonic()
        time.sleep(config.seconds)
        after = {name: proc_sample(pid) for name, pid in by_name.items()}
        window_s = time.monotonic() - started
        document = {"schema": SCHEMA, "parameters": config.parameters(), "command": command,
                    "window_s": round(window_s, 3), "loadavg_before": loadavg_before,
                    "loadavg_after": list(os.getloadavg()), **figures(names, before, after, window_s)}
        document["by_source"] = by_source(metrics_before, asyncio.run(_metrics(urls)), window_s)
        if config.scrapes:
            document["metrics_scrape"] = _scrape_cost(urls[0], by_name[names[0]], config.scrapes,
                                                      after[names[0]].cpu_s - before[names[0]].cpu_s, window_s)
        document["machine"] = machine_info()
        return document
    finally:
        _stop(script, progress)
        if not kept:        # a failed start keeps its logs for the reader of the error
            shutil.rmtree(runs, ignore_errors=True)


def _scrape_cost(url: str, pid: int, scrapes: int, idle_cpu_s: float, idle_s: float) -> dict[str, Any]:
    """The node's CPU per /metrics scrape: its CPU over `scrapes` back-to-back scrapes, less
    what it spends idle in that time."""
    async def scrape() -> float:
        async with open_clients([url]) as (client,):
            started = time.monotonic()
            for _ in range(scrapes):
                await client.metrics()
            return time.monotonic() - started

    before = proc_sample(pid).cpu_s
    elapsed_s = asyncio.run(scrape())
    spent_s = proc_sample(pid).cpu_s - before - idle_cpu_s / idle_s * elapsed_s
    return {"scrapes": scrapes, "elapsed_s": round(elapsed_s, 3),
            "cpu_us_per_scrape": round(max(0.0, spent_s) / scrapes * 1e6, 1)}


def _name(n: int, shards: int) -> str:
    """devnet.sh's name of its node n."""
    k, i = divmod(n, VALIDATORS_PER_SHARD)
    return f"node-{i}" if shards == 1 else f"shard-{k}-node-{i}"


def _output(script: subprocess.Popen, runs: Path) -> str:
    logs = [runs / "devnet.log", *sorted(runs.glob("*/logs/*.log"))]
    return f"devnet.sh exited {script.poll()}; its run folder's logs: {', '.join(map(str, logs)) or 'none'}"


def _stop(script: subprocess.Popen, progress: Callable[[str], None]) -> None:
    """SIGTERM to devnet.sh (it stops its nodes by PID), SIGKILL to its group if it hangs."""
    if script.poll() is None:
        script.send_signal(signal.SIGTERM)
        try:
            script.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            progress(f"devnet.sh (pid {script.pid}) did not stop in {STOP_WAIT_S:g} s; killing its process group")
            os.killpg(script.pid, signal.SIGKILL)
            script.wait()
    if script.stdout is not None:
        script.stdout.close()
