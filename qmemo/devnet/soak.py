"""The soak run: a devnet under steady load for minutes, each node's memory and open files
sampled, to show that nothing grows without bound (issue 12, "a soak command").

`run_soak` starts the nodes (`qmemo node` processes, one per validator, each peering
with all the others), runs the generator (`qmemo gen`) at one constant rate for the
whole run, and every `interval_s` reads each node's resident set size and open file
descriptors from /proc (Linux). It writes `soak.json`: the timeline, a per-node summary
(least-squares slope per hour after a warm-up, and a verdict), and the generator's
accounting at the end and whether the load held (`LOAD_RULE`: a soak whose load
collapsed says nothing about memory under load). Every process it starts is stopped by PID when it ends, also on
an error, Ctrl-C, SIGTERM or SIGHUP (qmemo.interrupts).

The verdict's rule (`FLAT_RULE`, also written into soak.json): the first
`WARMUP_SHARE` of the samples are left out (caches, the mempool and the first blocks
fill up there); over the rest, a node's RSS (and its open fds) grows when the
least-squares slope is above `MAX_RSS_GROWTH_PER_HOUR` of its mean RSS per hour (fds:
`MAX_FD_GROWTH_PER_HOUR`) *and* the rise that slope makes over the window stands out of
the samples' noise (above `NOISE_SIGMAS` standard deviations of the residuals): a
mempool that fills and drains with every block moves RSS by a hundred MiB, and in ten
minutes that swing alone fits a slope of hundreds of MiB per hour. A steady leak of one
socket a minute, or of 2% of the process's memory in ten minutes, fails it.

Pure helpers (`slope_per_hour`, `node_summary`, `load_judgement`, `saturation_tps`) are apart from the
process handling, so the rule is tested without starting anything.
"""

from __future__ import annotations

import datetime
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from qmemo.errors import ConfigError
from qmemo.interrupts import deferred, interrupt_on_signals, shielded
from qmemo.load.summary import Sweep
from qmemo.net.client import base_url

SOAK_SCHEMA = "qmemo-soak/1"
WARMUP_SHARE = 0.2
MAX_RSS_GROWTH_PER_HOUR = 0.10      # of the mean RSS
MAX_FD_GROWTH_PER_HOUR = 10.0
NOISE_SIGMAS = 2.0
FLAT_RULE = (f"after the first {WARMUP_SHARE:.0%} of the samples, on every node: no least-squares slope of RSS "
             f"above {MAX_RSS_GROWTH_PER_HOUR:.0%} of the mean RSS per hour, nor of open fds above "
             f"{MAX_FD_GROWTH_PER_HOUR:g} per hour, whose rise over the window exceeds {NOISE_SIGMAS:g} standard "
             f"deviations of the samples around that line")
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


# --- the rule (pure) ----------------------------------------------------------------------------

def slope_per_hour(times_s: Sequence[float], values: Sequence[float]) -> float:
    """Least-squares slope of `values` over `times_s`, per hour (0 for fewer than two points)."""
    n = len(times_s)
    if n < 2:
        return 0.0
    mean_t, mean_v = sum(times_s) / n, sum(values) / n
    spread = sum((t - mean_t) ** 2 for t in times_s)
    if spread == 0:
        return 0.0
    return sum((t - mean_t) * (v - mean_v) for t, v in zip(times_s, values)) / spread * 3600


def node_summary(samples: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One node's figures and verdict from its samples ({"t_s", "rss_bytes", "fds"})."""
    kept = list(samples[int(len(samples) * WARMUP_SHARE):])
    if len(kept) < 3:           # two points always lie on a line: no trend can be told from noise
        return {"samples": len(samples), "verdict": "too few samples"}
    times = [s["t_s"] for s in kept]
    rss = [s["rss_bytes"] for s in kept]
    fds = [s["fds"] for s in kept]
    mean_rss = sum(rss) / len(rss)
    rss_slope = slope_per_hour(times, rss)
    fd_slope = slope_per_hour(times, fds)
    rss_grows = rss_slope >= MAX_RSS_GROWTH_PER_HOUR * mean_rss and _stands_out(times, rss, rss_slope)
    fds_grow = fd_slope >= MAX_FD_GROWTH_PER_HOUR and _stands_out(times, fds, fd_slope)
    flat = not rss_grows and not fds_grow
    return {"samples": len(samples), "rss_first_bytes": samples[0]["rss_bytes"], "rss_last_bytes": rss[-1],
            "rss_max_bytes": max(s["rss_bytes"] for s in samples), "rss_mean_bytes": round(mean_rss),
            "rss_slope_bytes_per_hour": round(rss_slope), "rss_slope_share_per_hour": rss_slope / mean_rss,
            "fds_first": samples[0]["fds"], "fds_last": fds[-1], "fds_max": max(s["fds"] for s in samples),
            "fds_slope_per_hour": fd_slope, "verdict": "flat" if flat else "growing"}


def _stands_out(times_s: Sequence[float], values: Sequence[float], slope_per_h: float) -> bool:
    """Whether the rise the fitted line makes over the window exceeds NOISE_SIGMAS standard
    deviations of the values around that line (a trend, not a swing)."""
    n = len(times_s)
    mean_t, mean_v = sum(times_s) / n, sum(values) / n
    slope_s = slope_per_h / 3600
    residuals = [v - (mean_v + slope_s * (t - mean_t)) for t, v in zip(times_s, values)]
    sigma = (sum(r * r for r in residuals) / n) ** 0.5
    return slope_s * (times_s[-1] - times_s[0]) > NOISE_SIGMAS * sigma


def load_judgement(counts: dict[str, Any]) -> dict[str, Any]:
    """Did the chain carry the soak's load (`LOAD_RULE`)? From the generator's summary counts."""
    share = counts["committed"] / counts["planned"] if counts["planned"] else 0.0
    return {"rule": LOAD_RULE, "committed_share": share, "held": counts["planned"] > 0 and share >= LOAD_HELD_SHARE}


def saturation_tps(sweep: Sweep) -> float:
    """A sweep's saturation rate (sweep.json, `qmemo gen --sweep`): what its highest stage
    that no verdict limited committed per second (qmemo.load.summary.verdicts: at least
    90% of the target committed, p99 intended -> included within three block intervals,
    the generator on schedule). A limited stage can commit more per second for a minute
    (7,270 TPS at p99 92 s, the stage above a clean 5,859 in a sweep of 60 s stages), but
    not for ten: that is past saturation, not a rate to soak at 80% of. The same stage as
    the report's headline (qmemo.analysis.devnet.held_and_limit, which the headline reads)."""
    from qmemo.analysis.devnet import held_and_limit, sweep_points

    held, _ = held_and_limit(sweep_points(sweep))
    rates = [held.committed_tps] if held is not None and held.committed_tps > 0 else []
    if not rates:
        raise ConfigError("no stage of the sweep ran unlimited (90% of its target committed, p99 inclusion within 3 "
                          "block intervals, the generator on schedule): sweep from a lower rate")
    return max(rates)


# --- processes ----------------------------------------------------------------------------------

def proc_sample(pid: int) -> tuple[int, int]:
    """(resident set size in bytes, open file descriptors) of a running process, from /proc."""
    rss_kb = 0
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                rss_kb = int(line.split()[1])
                break
    return rss_kb * 1024, len(os.listdir(f"/proc/{pid}/fd"))


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
        """SIGTERM each, wait, SIGKILL what does not stop: {name: exit status}."""
        for _, process in self.started:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        codes: dict[str, int | None] = {}
        for name, process in self.started:
            try:
                codes[name] = process.wait(timeout=STOP_TIMEOUT_S)
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
        while generator.poll() is None:
            t_s = round(time.monotonic() - began, 3)
            for name, pid in nodes.items():
                try:
                    rss, fds = proc_sample(pid)
                except (FileNotFoundError, ProcessLookupError):
                    raise ConfigError(f"{name} (pid {pid}) exited during the soak; see {logs / name}.log") from None
                timeline.append({"t_s": t_s, "node": name, "rss_bytes": rss, "fds": fds})
            if len(timeline) % (len(nodes) * 12) == 0:
                progress(f"{t_s:,.0f} s: " + ", ".join(f"{s['node']} {s['rss_bytes'] / 2**20:.0f} MiB "
                                                        f"{s['fds']} fds" for s in timeline[-len(nodes):]))
            try:
                generator.wait(timeout=config.interval_s)
            except subprocess.TimeoutExpired:
                pass
    finally:
        with shielded():
            exit_codes = processes.stop_all()
        restore_signals()
    document = _document(config, started_utc, nodes, timeline, exit_codes)
    (config.out / "soak.json").write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    return document


def _document(config: SoakConfig, started_utc: str, nodes: dict[str, int], timeline: list[dict[str, Any]],
              exit_codes: dict[str, int | None]) -> dict[str, Any]:
    summaries = {name: node_summary([s for s in timeline if s["node"] == name]) for name in nodes}
    gen_summary = config.out / "gen" / "summary.json"
    counts = orjson.loads(gen_summary.read_bytes())["counts"] if gen_summary.exists() else None
    accounting = load = None
    if counts is not None:
        load = load_judgement(counts)
        accounting = {"counts": counts, "identity": "committed + rejected + lost + failed + unsent = planned",
                      "holds": counts["committed"] + counts["rejected_total"] + counts["lost"] + counts["failed"]
                      + counts["unsent"] == counts["planned"] == counts["accounted"]}
    return {
        "schema": SOAK_SCHEMA, "started_utc": started_utc, "rate_tps": config.rate_tps,
        "duration_s": config.duration_s, "interval_s": config.interval_s, "devnet": str(config.devnet),
        "nodes": nodes, "exit_codes": exit_codes, "rule": FLAT_RULE,
        "verdict": "flat" if summaries and all(s["verdict"] == "flat" for s in summaries.values()) else "not flat",
        "summary": summaries, "accounting": accounting, "load": load, "timeline": timeline,
    }
