"""The soak run: a devnet under steady load for minutes, each node's memory and open files
sampled, to show that nothing grows without bound.

`run_soak` starts the nodes (`qmemo node` processes, one per validator, each peering
with all the others), runs the generator (`qmemo gen`) at one constant rate for the
whole run, and every `interval_s` reads each node's resident set size and open file
descriptors from /proc (Linux), and every `cost_window_s` each node's stage costs from its
/metrics. It writes `soak.json`: the timeline, a per-node summary
(least-squares slope per hour after a warm-up, and a verdict), and the generator's
accounting at the end and whether the load held (`LOAD_RULE`: a soak whose load
collapsed says nothing about memory under load), whether the nodes agree at the end (every
final block one hash on every node, and their branch switches over the soak:
qmemo.load.agreement; a disagreement fails the soak), and each window's CPU per admitted
transaction by stage with the store's judged first window against last
(`qmemo.devnet.growth.COST_RULE`: a store that slows as the chain grows). Every process it starts is stopped by PID when it ends, also on
an error, Ctrl-C, SIGTERM or SIGHUP (qmemo.interrupts).

The verdict's rule (`FLAT_RULE`, also written into soak.json) is qmemo.devnet.growth's, which
the chaos scenario's `resources_flat` judges each node's process lives with as well.

Pure helpers (`load_judgement`, `saturation_tps`, and the rule in qmemo.devnet.growth) are apart
from the process handling, so they are tested without starting anything.
"""

from __future__ import annotations

import datetime
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from qmemo.api_schema import MetricsSnapshot
from qmemo.devnet.growth import COST_RULE, FLAT, FLAT_RULE, TOO_FEW, node_summary, stage_cost_summary
from qmemo.errors import ConfigError
from qmemo.interrupts import deferred, interrupt_on_signals, shielded
from qmemo.load.agreement import Agreement, check_agreement
from qmemo.load.node_stages import run_costs
from qmemo.load.summary import Sweep
from qmemo.net.client import base_url
from qmemo.records import to_json

SOAK_SCHEMA = "qmemo-soak/3"       # /3: stage_costs
# The memory judged: a node's anonymous resident memory (RssAnon: heap, stacks). Its whole
# resident set (VmRSS, kept in the timeline as rss_bytes) also counts the store's
# memory-mapped file pages, page cache that rises with what the node reads, up to the map's
# size, and that a rule reading VmRSS cannot tell from a leak (docs/soak.md, "Today's code
# at 1,500 TPS", has the soak that showed it).
JUDGED_MEMORY = "anonymous resident memory (RssAnon)"
# The load held when at least this share of the planned transactions committed (final): at
# 80% of saturation a chain should commit everything, and a soak whose load collapsed
# (senders poisoned by nonce gaps, the nodes idle) says nothing about memory under load.
LOAD_HELD_SHARE = 0.99
LOAD_RULE = f"at least {LOAD_HELD_SHARE:.0%} of the planned transactions committed (final)"
SATURATION_SHARE = 0.8              # the soak rate: 80% of the saturation rate
STOP_TIMEOUT_S = 20.0


@dataclass(frozen=True, slots=True)
class SoakConfig:
    devnet: Path            # made by `qmemo genesis`: genesis.json, validator-<i>.keys.json
    validators: int
    out: Path
    rate_tps: float
    duration_s: float
    interval_s: float = 5.0
    base_port: int | None = None        # default: free ports
    gen_args: tuple[str, ...] = ()      # more `qmemo gen` flags (e.g. --batch)
    cost_window_s: float = 60.0         # how often each node's stage costs are read


# --- the load and the rate (pure) ------------------------------------------------------------

def load_judgement(counts: dict[str, Any]) -> dict[str, Any]:
    """Did the chain carry the soak's load (`LOAD_RULE`)? From the generator's summary counts."""
    share = counts["committed"] / counts["planned"] if counts["planned"] else 0.0
    return {"rule": LOAD_RULE, "committed_share": share, "held": counts["planned"] > 0 and share >= LOAD_HELD_SHARE}


def saturation_tps(sweep: Sweep) -> float:
    """A sweep's saturation rate (sweep.json, `qmemo gen --sweep`): what its highest stage
    that no verdict limited, below its first limited one, committed per second (qmemo.load.summary.verdicts: at least
    90% of the target committed, p99 intended -> included within three block intervals,
    the generator on schedule). A limited stage can commit more per second for a minute
    (docs/soak.md's sweep of 2026-11-25 has one), but not for ten: that is past
    saturation, not a rate to soak at 80% of. The same stage as
    the report's headline (qmemo.analysis.devnet.held_and_limit, which the headline reads)."""
    from qmemo.analysis.devnet import held_and_limit, sweep_points

    held, _ = held_and_limit(sweep_points(sweep))
    rates = [held.committed_tps] if held is not None and held.committed_tps > 0 else []
    if not rates:
        raise ConfigError("no stage of the sweep ran unlimited (90% of its target committed, p99 inclusion within 3 "
                          "block intervals, the generator on schedule): sweep from a lower rate")
    return max(rates)


# --- processes ----------------------------------------------------------------------------------

def proc_sample(pid: int) -> tuple[int, int, int]:
    """(resident set size, its anonymous part - both in bytes - and open file descriptors)
    of a running process, from /proc."""
    kb = {"VmRSS:": 0, "RssAnon:": 0}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            key = line.split(maxsplit=1)[0] if line.strip() else ""
            if key in kb:
                kb[key] = int(line.split()[1])
    return kb["VmRSS:"] * 1024, kb["RssAnon:"] * 1024, len(os.listdir(f"/proc/{pid}/fd"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _qmemo(*args: str) -> list[str]:
    return [sys.executable, "-m", "qmemo.cli", *args]


class _Processes:
    """The nodes and the generator, each stopped by PID at the end."""

    def __init__(self) -> None:
        self.started: list[tuple[str, subprocess.Popen]] = []

    def start(self, name: str, command: list[str], log: Path) -> subprocess.Popen:
        with log.open("wb") as out, deferred():    # started means recorded, so stopped at the end
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                       env={**os.environ, "PYTHONUNBUFFERED": "1"})
            self.started.append((name, process))
        return process

    def stop_all(self) -> dict[str, int | None]:
        """SIGTERM each, wait for them together up to STOP_TIMEOUT_S, SIGKILL what does not
        stop: {name: exit status}."""
        for _, process in self.started:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        codes: dict[str, int | None] = {}
        deadline = time.monotonic() + STOP_TIMEOUT_S   # one for all: their stops overlap
        for name, process in self.started:
            try:
                codes[name] = process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                codes[name] = process.wait()
        return codes


def _wait_ready(urls: list[str], processes: _Processes, deadline_s: float = 60.0) -> None:
    import asyncio

    from qmemo.devnet.health import wait_ready

    ready = asyncio.run(wait_ready(urls, deadline_s))
    dead = [name for name, p in processes.started if p.poll() is not None]
    if dead or not all(ready.values()):
        raise ConfigError(f"the nodes did not get ready (exited: {', '.join(dead) or 'none'}; "
                          f"not ready: {', '.join(u for u, ok in ready.items() if not ok) or 'none'})")


def run_soak(config: SoakConfig, progress: Callable[[str], None] = lambda line: None) -> dict[str, Any]:
    """Start the devnet, load it, sample it, stop it: the soak.json document (also written)."""
    genesis = config.devnet / "genesis.json"
    if not genesis.exists():
        raise ConfigError(f"no devnet in {config.devnet} (make one with `qmemo genesis`)")
    logs = config.out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    ports = ([config.base_port + i for i in range(config.validators)] if config.base_port
             else [_free_port() for _ in range(config.validators)])
    urls = [base_url("127.0.0.1", port) for port in ports]
    processes = _Processes()
    timeline: list[dict[str, Any]] = []
    started_utc = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    nodes: dict[str, int] = {}
    agreement: Agreement | None = None      # None: the soak ended before the check
    restore_signals = interrupt_on_signals()     # `kill` of the soak stops what it started, as Ctrl-C does
    try:
        for i, port in enumerate(ports):
            name = f"node-{i}"
            process = processes.start(name, _qmemo(
                "node", "--genesis", str(genesis), "--key", str(config.devnet / f"validator-{i}.keys.json"),
                "--data", str(config.out / name), "--port", str(port), "--name", name,
                "--peers", ",".join(u for u in urls if u != urls[i])), logs / f"{name}.log")
            nodes[name] = process.pid
        _wait_ready(urls, processes)
        progress(f"{len(nodes)} nodes ready on {', '.join(urls)}; load at {config.rate_tps:,.0f} TPS "
                 f"for {config.duration_s:g} s")
        gen = _qmemo("gen", "--devnet", str(config.devnet), "--nodes", ",".join(urls), "--tps",
                     f"{config.rate_tps:g}", "--duration", f"{config.duration_s:g}", "--out",
                     str(config.out / "gen"), "--quiet", *config.gen_args)
        # Sign first (cached), so the samples cover the load, not the generator's signing.
        if processes.start("signing", [*gen, "--prepare-only"], logs / "generator-prepare.log").wait() != 0:
            raise ConfigError(f"the generator could not prepare its workload; see {logs / 'generator-prepare.log'}")
        generator = processes.start("generator", gen, logs / "generator.log")
        began = time.monotonic()
        readings: list[tuple[float, dict[str, MetricsSnapshot | None]]] = [(0.0, _read_metrics(urls))]
        while generator.poll() is None:
            t_s = round(time.monotonic() - began, 3)
            if t_s >= readings[-1][0] + config.cost_window_s:
                readings.append((t_s, _read_metrics(urls)))
            for name, pid in nodes.items():
                try:
                    rss, anon, fds = proc_sample(pid)
                except (FileNotFoundError, ProcessLookupError):
                    raise ConfigError(f"{name} (pid {pid}) exited during the soak; see {logs / name}.log") from None
                timeline.append({"t_s": t_s, "node": name, "rss_bytes": rss, "rss_anon_bytes": anon, "fds": fds})
            if len(timeline) % (len(nodes) * 12) == 0:
                progress(f"{t_s:,.0f} s: " + ", ".join(f"{s['node']} {s['rss_anon_bytes'] / 2**20:.0f} MiB anon "
                                                        f"({s['rss_bytes'] / 2**20:.0f} resident) {s['fds']} fds"
                                                        for s in timeline[-len(nodes):]))
            try:
                generator.wait(timeout=config.interval_s)
            except subprocess.TimeoutExpired:
                pass
        agreement = _agreement(urls, readings[0][1])
    finally:
        with shielded():
            exit_codes = processes.stop_all()
        restore_signals()
    document = _document(config, started_utc, nodes, timeline, exit_codes, _cost_windows(urls, readings), agreement)
    (config.out / "soak.json").write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    return document


def _read_metrics(urls: list[str]) -> dict[str, MetricsSnapshot | None]:
    """Every node's /metrics document by URL (None: it did not answer)."""
    import asyncio

    from qmemo.load.run import read_metrics
    from qmemo.net.client import open_clients

    async def read() -> list[MetricsSnapshot | None]:
        async with open_clients(urls) as clients:
            return await read_metrics(clients)
    return dict(zip(urls, asyncio.run(read())))


def _agreement(urls: list[str], at_start: dict[str, MetricsSnapshot | None]) -> Agreement:
    """The nodes' final blocks compared over the whole chain, their branch switches since the soak's first reading."""
    import asyncio

    return asyncio.run(check_agreement(urls, 1, {url: m.blocks.reorgs if m else None for url, m in at_start.items()}))


def _cost_windows(urls: list[str], readings: list[tuple[float, dict[str, MetricsSnapshot | None]]]
                  ) -> list[dict[str, Any]]:
    """Each node's CPU per admitted transaction by stage between consecutive readings."""
    windows = []
    for (start_s, before), (end_s, after) in zip(readings, readings[1:]):
        for i, url in enumerate(urls):
            start, end = before.get(url), after.get(url)
            costs = run_costs(url, start, end) if start is not None and end is not None else None
            windows.append({"node": f"node-{i}", "t_start_s": start_s, "t_end_s": end_s,
                            "admitted": None if costs is None else costs.admitted,
                            "us_per_tx": None if costs is None else costs.us_per_tx()})
    return windows


def full_windows(windows: list[dict[str, Any]], window_s: float, duration_s: float, slack_s: float
                 ) -> list[dict[str, Any]]:
    """The windows of a whole `window_s` that ended while the generator was still sending
    (within `slack_s` of its `duration_s`) and that admitted at least 90% of the median
    such window: the drain after the load admits next to nothing, a short window's figure
    is noise, and the first window also holds the generator's start (reading a plan of
    gigabytes), where a block's fixed costs spread over fewer transactions."""
    whole = [w for w in windows if w["t_end_s"] - w["t_start_s"] >= 0.9 * window_s
             and w["t_end_s"] <= duration_s + slack_s]
    admitted = sorted(w["admitted"] or 0 for w in whole)
    floor = 0.9 * admitted[len(admitted) // 2] if admitted else 0
    return [w for w in whole if (w["admitted"] or 0) >= floor]


def _document(config: SoakConfig, started_utc: str, nodes: dict[str, int], timeline: list[dict[str, Any]],
              exit_codes: dict[str, int | None], windows: list[dict[str, Any]],
              agreement: Agreement | None = None) -> dict[str, Any]:
    summaries = {name: node_summary([{**s, "rss_bytes": s["rss_anon_bytes"]} for s in timeline if s["node"] == name])
                 for name in nodes}
    gen_summary = config.out / "gen" / "summary.json"
    counts = orjson.loads(gen_summary.read_bytes())["counts"] if gen_summary.exists() else None
    accounting = load = None
    if counts is not None:
        load = load_judgement(counts)
        accounting = {"counts": counts, "identity": "committed + rejected + lost + failed + unsent = planned",
                      "holds": counts["committed"] + counts["rejected_total"] + counts["lost"] + counts["failed"]
                      + counts["unsent"] == counts["planned"] == counts["accounted"]}
    under_load = full_windows(windows, config.cost_window_s, config.duration_s, 2 * config.interval_s)
    costs = {name: stage_cost_summary([w for w in under_load if w["node"] == name]) for name in nodes}
    verdicts = {summary["verdict"] for summary in costs.values()}
    stage_costs = {"window_s": config.cost_window_s, "rule": COST_RULE, "summary": costs, "windows": windows,
                   "verdict": (TOO_FEW if not costs or TOO_FEW in verdicts
                               else FLAT if verdicts == {FLAT} else "not flat")}
    return {
        "schema": SOAK_SCHEMA, "started_utc": started_utc, "rate_tps": config.rate_tps,
        "duration_s": config.duration_s, "interval_s": config.interval_s, "devnet": str(config.devnet),
        "nodes": nodes, "exit_codes": exit_codes, "rule": FLAT_RULE, "memory": JUDGED_MEMORY,
        "verdict": FLAT if summaries and all(s["verdict"] == FLAT for s in summaries.values()) else "not flat",
        "summary": summaries, "accounting": accounting, "load": load, "stage_costs": stage_costs,
        "agreement": to_json(agreement), "timeline": timeline,
    }
