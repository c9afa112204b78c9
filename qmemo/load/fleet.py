"""A fleet of generators: `qmemo gen --generators N` as N processes and one run folder.

Past ~15,000 TPS one process may not keep its schedule (`generator_fell_behind`); then a
run's verdict says what the generator could send, not what the nodes took. A fleet splits
the run over N processes (`qmemo gen --part K/N`, started by the parent here):

    share   - part K takes the accounts K, K+N, ... of the key file (disjoint: each sender in
              one process, so nonces never race; within its share the per-node pools and
              account affinity hold) and the schedule's transactions K, K+N, ... (TPS/N, the
              same shape and duration: the parts' plans interleave back into one process's)
    start   - every part signs, then says it is ready; the parent reads the nodes' /metrics
              once and gives one wall-clock start to all
    stop    - Ctrl-C/SIGTERM is passed to each part by its PID (before the start: killed,
              nothing is sent yet); the parent waits for every part
    merge   - each part saves its timings and counters; the parent interleaves them into one
              `Timings`, reads /metrics and the agreement once, and writes the run folder with
              qmemo.load.run's own writer (summary, transactions.csv, histograms, manifest)

The live status: each part writes its own; the parent merges them each second (sums, the
worst part's p99 and lag) with a per-part list (`generators`). This module never signs or
sends a transaction itself.

`run_parts` (spawn, barrier, start, signals, live merge) is the fleet's one machinery: a
sharded devnet's fleet (qmemo.load.shard_fleet, parts that take whole shards) runs on it too
and merges its parts its own way.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np
import orjson
import uvloop

from qmemo.errors import BenchmarkError, ConfigError
from qmemo.load.agreement import check_agreement
from qmemo.load.latency import Timings
from qmemo.load.live_status import OnStatus
from qmemo.load.node_record import NODES_SCHEMA, BlockSeen, NodeEnds, RunNodes, scheme_of
from qmemo.load.node_stages import costs_file
from qmemo.load.run import (Executed, GenConfig, RunCounters, RunResult, batch_size, node_verifier, offsets_for,
                            read_metrics, write_run)
from qmemo.load.summary import DoorAnswers
from qmemo.net.client import open_clients
from qmemo.records import to_json

T = TypeVar("T")
PARTS_DIR = "parts"                 # in the run folder: each part's folder, part-K
START_FILE = "start.json"           # in PARTS_DIR: the wall-clock start the parent gives
READY_FILE = "ready"                # in a part's folder: signed, waiting for the start
PART_FILE = "part.npz"              # a part's timings
PART_COUNTERS = "part.json"         # a part's counters, reasons and blocks seen
START_AHEAD_S = 0.5                 # the start lies this far ahead: every part reads it in time
POLL_S = 0.01
STATUS_EVERY_S = 1.0
_ARRAYS = ("intended", "due", "sent", "accepted", "included", "committed")


def parse_part(text: str) -> tuple[int, int]:
    """"K/N" -> (K, N), 0 <= K < N; ConfigError otherwise."""
    try:
        index, count = (int(x) for x in text.split("/"))
    except ValueError:
        raise ConfigError("--part takes K/N, e.g. 0/2") from None
    if not 0 <= index < count:
        raise ConfigError(f"--part {text}: K must be 0..N-1")
    return index, count


def share(items: Sequence[T], index: int, count: int) -> list[T]:
    """Part `index` of `count`'s items: index, index + count, ..."""
    return list(items[index::count])


def positions(index: int, count: int, length: int) -> np.ndarray:
    """Where part `index`'s `length` items sit in the whole (the inverse of `share`)."""
    return index + count * np.arange(length, dtype=np.int64)


# --- a part (the child's side) ----------------------------------------------------------

@dataclass(frozen=True, slots=True)
class FleetPart:
    """Part `index` of `count`: what qmemo.load.run asks of it (share, ready, start, save)."""

    index: int
    count: int
    folder: Path                    # its own folder, PARTS_DIR/part-K in the run folder

    def share(self, items: Sequence[T]) -> list[T]:
        return share(items, self.index, self.count)

    def ready(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / READY_FILE).write_bytes(b"")

    def wait_for_start(self) -> float:
        """The parent's start as this process's perf_counter time (blocks until it is given)."""
        start_file, parent = self.folder.parent / START_FILE, os.getppid()
        while not start_file.is_file():
            if os.getppid() != parent:
                raise BenchmarkError("the fleet's parent went away before the start", code="fleet_parent_gone")
            time.sleep(POLL_S)
        start_unix = orjson.loads(start_file.read_bytes())["start_unix"]
        return time.perf_counter() + (start_unix - time.time())

    def save(self, timings: Timings, workload: Any, executed: Executed, batch: int) -> None:
        np.savez(self.folder / PART_FILE, **timings_arrays(timings),
                 outcome_unknown=np.frombuffer(bytes(executed.outcome_unknown).ljust(len(timings), b"\0"),
                                               dtype=np.uint8),
                 ids=np.frombuffer(b"".join(workload.ids), dtype=np.uint8).reshape(len(workload.ids), -1))
        (self.folder / PART_COUNTERS).write_bytes(orjson.dumps({
            "index": self.index, "count": self.count, "interrupted_at": executed.interrupted_at,
            "counters": to_json(executed.counters), "reasons": {str(i): r for i, r in timings.reasons.items()},
            "blocks": [to_json(block) for block in executed.blocks], "from_cache": workload.from_cache,
            "batch_size": batch,
        }))


def timings_arrays(timings: Timings) -> dict[str, np.ndarray]:
    """A Timings' arrays as a part saves them (its reasons go beside, by index)."""
    return {**{name: np.frombuffer(getattr(timings, name), dtype=np.float64) for name in _ARRAYS},
            "status": np.frombuffer(timings.status, dtype=np.uint8)}


def timings_from(arrays: Any, reasons: dict[str, str]) -> Timings:
    """The Timings `timings_arrays` saved (`arrays`: an npz or a dict), with its reasons."""
    timings = Timings(arrays["intended"].tolist())
    for name in _ARRAYS[1:]:
        np.frombuffer(getattr(timings, name), dtype=np.float64)[:] = arrays[name]
    timings.status[:] = arrays["status"].tobytes()
    timings.reasons = {int(i): r for i, r in reasons.items()}
    return timings


# --- the parts' results, merged (pure) --------------------------------------------------

@dataclass(frozen=True, slots=True)
class PartResult:
    index: int
    timings: Timings
    ids: list[bytes]
    outcome_unknown: bytearray
    counters: RunCounters
    interrupted_at: float | None
    blocks: tuple[BlockSeen, ...]
    from_cache: bool


def load_part(folder: Path) -> PartResult:
    document = orjson.loads((folder / PART_COUNTERS).read_bytes())
    with np.load(folder / PART_FILE) as arrays:
        timings = timings_from(arrays, document["reasons"])
        ids = [bytes(row) for row in arrays["ids"]]
        unknown = bytearray(arrays["outcome_unknown"].tobytes())
    counters = document["counters"]
    return PartResult(document["index"], timings, ids, unknown,
                      RunCounters(**{**counters, "door": DoorAnswers(**counters["door"])}),
                      document["interrupted_at"], tuple(BlockSeen(**b) for b in document["blocks"]),
                      document["from_cache"])


def interleave(parts: Sequence[tuple[int, Timings]], count: int) -> Timings:
    """One Timings of the parts' transactions, each at its place in the whole plan (part k's
    i-th at k + count * i): the parts' schedules interleave back into one process's."""
    total = sum(len(t) for _, t in parts)
    places = [(positions(k, count, len(t)), t) for k, t in parts]
    seen = np.zeros(total, dtype=bool)
    for where, _ in places:
        if len(where) and where[-1] >= total:
            raise ValueError("the parts' sizes are not the shares of one plan")
        seen[where] = True
    if not seen.all():
        raise ValueError("the parts' sizes are not the shares of one plan")
    intended = np.empty(total)
    for where, t in places:
        intended[where] = np.frombuffer(t.intended, dtype=np.float64)
    merged = Timings(intended.tolist())
    for where, t in places:
        for name in _ARRAYS[1:]:
            np.frombuffer(getattr(merged, name), dtype=np.float64)[where] = np.frombuffer(getattr(t, name),
                                                                                           dtype=np.float64)
        np.frombuffer(merged.status, dtype=np.uint8)[where] = np.frombuffer(t.status, dtype=np.uint8)
        merged.reasons.update({int(where[i]): reason for i, reason in t.reasons.items()})
    return merged


def interleave_items(parts: Sequence[tuple[int, Sequence[T]]], count: int) -> list[T]:
    """The parts' per-transaction items (ids, flags) in the whole plan's order, as `interleave`."""
    total = sum(len(items) for _, items in parts)
    merged: list[Any] = [None] * total
    for k, items in parts:
        merged[k::count] = list(items)
    return merged


def sum_counters(parts: Sequence[RunCounters]) -> RunCounters:
    """The fleet's counters: every count summed (each part's in-flight window is its own, so
    their largest summed bounds the fleet's); blocks_seen the most any part saw (they follow
    one chain)."""
    def added(dicts: list[dict[str, int]]) -> dict[str, int]:
        out: dict[str, int] = {}
        for d in dicts:
            for key, value in d.items():
                out[key] = out.get(key, 0) + value
        return out

    door = DoorAnswers(*(sum(getattr(p.door, f) for p in parts) for f in DoorAnswers.__dataclass_fields__))
    return RunCounters(
        lost_reasons=added([p.lost_reasons for p in parts]),
        max_in_flight_seen=sum(p.max_in_flight_seen for p in parts),
        blocks_seen=max((p.blocks_seen for p in parts), default=0),
        follower_node_switches=sum(p.follower_node_switches for p in parts),
        node_failures=added([p.node_failures for p in parts]),
        failovers=sum(p.failovers for p in parts), failover_txs=sum(p.failover_txs for p in parts),
        resends=sum(p.resends for p in parts), resend_txs=sum(p.resend_txs for p in parts),
        unknown_resends=sum(p.unknown_resends for p in parts), cpu_s=sum(p.cpu_s for p in parts),
        offered=sum(p.offered for p in parts), door=door, committed_late=sum(p.committed_late for p in parts))


def merge_blocks(parts: Sequence[Sequence[BlockSeen]]) -> tuple[BlockSeen, ...]:
    """The blocks every part's follower saw, by height: each part counted its own transactions."""
    by_height: dict[int, BlockSeen] = {}
    for blocks in parts:
        for b in blocks:
            seen = by_height.get(b.height)
            by_height[b.height] = b if seen is None else BlockSeen(
                b.height, max(seen.tx_count, b.tx_count), seen.ours + b.ours, seen.our_tx_bytes + b.our_tx_bytes)
    return tuple(by_height[h] for h in sorted(by_height))


def schedule_lag_p99_ms(timings: Timings, warmup_s: float, end_s: float) -> float | None:
    """A part's p99 send lag (sent - due) over the measured window, in ms (None: nothing sent)."""
    intended = np.frombuffer(timings.intended, dtype=np.float64)
    lag = (np.frombuffer(timings.sent, dtype=np.float64) - np.frombuffer(timings.due, dtype=np.float64))
    lag = lag[(intended >= warmup_s) & (intended < end_s) & ~np.isnan(lag)]
    return float(np.percentile(lag, 99)) * 1e3 if len(lag) else None


def merge_live(documents: Sequence[dict[str, Any] | None]) -> dict[str, Any]:
    """The parts' live documents as one (qmemo.load.live_status's keys): counts summed, the
    latest elapsed, the worst part's p50/p99 and send lag, a sharded run's `cross_shard` alike,
    and each part's own under `generators` (with the shards it drives, on a sharded devnet)."""
    running = [d for d in documents if d and d.get("running")]
    if not running:
        return {"running": False}
    merged: dict[str, Any] = {"running": True}
    for key in ("planned", "offered", "sent", "answered", "accepted", "in_flight", "included", "committed",
                "failovers", "resend_txs", "target_tps"):
        merged[key] = sum(d.get(key) or 0 for d in running)
    merged["elapsed_s"] = max(d.get("elapsed_s") or 0.0 for d in running)
    merged["blocks_seen"] = max(d.get("blocks_seen") or 0 for d in running)
    failures: dict[str, int] = {}
    for d in running:
        for url, n in (d.get("node_failures") or {}).items():
            failures[url] = failures.get(url, 0) + n
    merged["node_failures"] = failures
    for key in ("p50_ms", "p99_ms", "schedule_lag_p99_ms"):
        values = [d[key] for d in running if isinstance(d.get(key), (int, float))]
        merged[key] = max(values) if values else None
    crosses = [d["cross_shard"] for d in running if isinstance(d.get("cross_shard"), dict)]
    if crosses:         # a sharded fleet: each part follows the credits of its own transfers
        merged["cross_shard"] = {key: sum(c.get(key) or 0 for c in crosses) for key in ("planned", "credited")}
        for key in ("p50_ms", "p99_ms"):
            values = [c[key] for c in crosses if isinstance(c.get(key), (int, float))]
            merged["cross_shard"][key] = max(values) if values else None
    merged["generators"] = [{"part": k, "running": bool(d and d.get("running")), "sent": (d or {}).get("sent"),
                             "schedule_lag_p99_ms": (d or {}).get("schedule_lag_p99_ms"),
                             **({"shards": d["shards"]} if d and "shards" in d else {})}
                            for k, d in enumerate(documents)]
    return merged


# --- the fleet (the parent's side) ------------------------------------------------------

def run_fleet(config: GenConfig, generators: int, part_args: list[str], *, quiet: bool = False,
              on_status: OnStatus | None = None) -> RunResult:
    """Run `generators` parts of `config` (each `qmemo gen` with `part_args` and its --part)
    and write their one run folder."""
    from qmemo.crypto.keys import load_keys
    from qmemo.crypto.verifier import load_genesis

    offsets, target_tps = offsets_for(config)       # the whole plan: its checks, its rate
    genesis = load_genesis(config.genesis)
    if len(offsets) < generators or len(load_keys(config.accounts)) < generators:
        raise ConfigError(f"--generators {generators}: the plan or the accounts cannot be split that many ways")
    started_utc = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    ran = run_parts(config, generators, part_args, lambda: _read_all(config.nodes), on_status=on_status)
    metrics_before = ran.before
    results = [load_part(folder) for folder in ran.folders]
    metrics_after = _read_all(config.nodes)
    timings = interleave([(r.index, r.timings) for r in results], generators)
    ids = interleave_items([(r.index, r.ids) for r in results], generators)
    unknown = bytearray(interleave_items([(r.index, list(r.outcome_unknown)) for r in results], generators))
    interrupts = [r.interrupted_at for r in results if r.interrupted_at is not None]
    ends = tuple(NodeEnds(url, metrics_before[url], metrics_after[url]) for url in config.nodes)
    agreement = uvloop.run(check_agreement(config.nodes, config.agreement_from,
                                           {url: m.blocks.reorgs if m else None for url, m in metrics_before.items()}))
    blocks = merge_blocks([r.blocks for r in results])
    executed = Executed(min(interrupts) if interrupts else None,
                        costs_file(config.nodes, metrics_before, metrics_after, os.cpu_count()),
                        sum_counters([r.counters for r in results]),
                        {url: node_verifier(metrics_after[url]) for url in config.nodes},
                        RunNodes(NODES_SCHEMA, scheme_of(ends), ends, blocks), unknown, agreement, blocks)
    end_s = min(config.duration_s, executed.interrupted_at or math.inf)
    warmup_s = min(config.warmup_s, config.duration_s / 2)
    manifest = {"generators": generators, "parts": [
        {"part": r.index, "planned": len(r.timings), "offered": r.counters.offered, "cpu_s": r.counters.cpu_s,
         "schedule_lag_p99_ms": schedule_lag_p99_ms(r.timings, warmup_s, end_s), "workload_from_cache": r.from_cache}
        for r in results]}
    result = write_run(config, genesis, timings, ids, executed, target_tps=target_tps,
                       batch=batch_size(config, offsets), started_utc=started_utc,
                       from_cache=all(r.from_cache for r in results), manifest_extra=manifest)
    ran.clean((PART_FILE, PART_COUNTERS))
    return replace(result, interrupted=result.interrupted or ran.signals > 0)


@dataclass(frozen=True, slots=True)
class PartsRun(Generic[T]):
    """What `run_parts` leaves: the parts' folders (each holding what its part saved), what
    the parent read at the barrier, and how many interrupts it passed on."""

    folders: list[Path]
    before: T
    signals: int

    def clean(self, saved: Sequence[str]) -> None:
        """The parts' saved files and markers, once merged (each part's log stays)."""
        for folder in self.folders:
            for done in (*saved, READY_FILE, "live.json"):
                (folder / done).unlink(missing_ok=True)
        (self.folders[0].parent / START_FILE).unlink(missing_ok=True)


def run_parts(config: GenConfig, generators: int, part_args: list[str], at_barrier: Callable[[], T], *,
              on_status: OnStatus | None = None) -> PartsRun[T]:
    """Start `generators` parts (`qmemo gen` with `part_args` and its --part K/N), wait until
    every one has signed, call `at_barrier` (the parent's reads before anything is sent), give
    one start, merge their live status each second, and wait for them all. Interrupts are
    passed to each part by its PID; a part that fails raises BenchmarkError."""
    parts_dir = config.out / PARTS_DIR
    parts_dir.mkdir(parents=True, exist_ok=True)
    (parts_dir / START_FILE).unlink(missing_ok=True)
    folders = [parts_dir / f"part-{k}" for k in range(generators)]
    live = config.live is not None or on_status is not None
    children: list[subprocess.Popen[bytes]] = []
    started = False
    signals = 0

    def forward(signum: int, frame: Any) -> None:
        nonlocal signals
        signals += 1
        for child in children:
            if child.poll() is None:
                # Before the start nothing is sent: a part is ended outright. After it, each
                # part takes its own Ctrl-C path (stop sending, drain; a second: stop at once).
                os.kill(child.pid, signal.SIGTERM if started else signal.SIGKILL)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        for k, folder in enumerate(folders):
            folder.mkdir(parents=True, exist_ok=True)
            for stale in folder.iterdir():      # a previous run's saved files and markers
                if stale.is_file() and stale.name != "gen.log":
                    stale.unlink()
            argv = [sys.executable, "-c", "import sys; from qmemo.cli import main; sys.exit(main())", "gen",
                    *part_args, "--part", f"{k}/{generators}", "--out", str(folder), "--quiet",
                    *(["--live", str(folder / "live.json")] if live else [])]
            with (folder / "gen.log").open("wb") as log:
                # Its own session: a terminal's Ctrl-C reaches the parent alone, which passes it on once.
                children.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        while not all((folder / READY_FILE).is_file() for folder in folders):
            _check_alive(children, folders, signals)
            time.sleep(POLL_S * 5)
        before = at_barrier()      # once, for every part
        _check_alive(children, folders, signals)
        # Written whole, then renamed: a part that sees the file reads all of it.
        (parts_dir / (START_FILE + ".tmp")).write_bytes(orjson.dumps({"start_unix": time.time() + START_AHEAD_S}))
        os.replace(parts_dir / (START_FILE + ".tmp"), parts_dir / START_FILE)
        started = True
        next_status = time.monotonic()
        while any(child.poll() is None for child in children):
            if live and time.monotonic() >= next_status:
                _write_live(config, on_status, [_read_live(folder / "live.json") for folder in folders])
                next_status += STATUS_EVERY_S
            time.sleep(POLL_S * 5)
        if live:
            _write_live(config, on_status, [None] * generators)
    finally:
        for child in children:
            if child.poll() is None:
                os.kill(child.pid, signal.SIGKILL)
            child.wait()
        for s, handler in previous.items():
            signal.signal(s, handler)
    failed = [(k, child.returncode) for k, child in enumerate(children) if child.returncode != 0]
    if failed:
        k, code = failed[0]
        raise BenchmarkError(f"generator part {k} of {generators} exited {code}: {_tail(folders[k] / 'gen.log')}",
                             code="fleet_part_failed")
    return PartsRun(folders, before, signals)


def _check_alive(children: list[subprocess.Popen[bytes]], folders: list[Path], signals: int) -> None:
    if signals:
        raise KeyboardInterrupt
    for k, child in enumerate(children):
        if child.poll() is not None:
            raise BenchmarkError(f"generator part {k} exited {child.returncode} before its start: "
                                 f"{_tail(folders[k] / 'gen.log')}", code="fleet_part_failed")


def _tail(log: Path, lines: int = 5) -> str:
    try:
        return " | ".join(log.read_text(errors="replace").strip().splitlines()[-lines:]) or "(no output)"
    except OSError:
        return "(no log)"


def _read_all(nodes: list[str]) -> dict[str, Any]:
    async def read() -> dict[str, Any]:
        async with open_clients(nodes, timeout_s=5) as clients:
            return dict(zip(nodes, await read_metrics(clients)))
    return uvloop.run(read())


def _read_live(path: Path) -> dict[str, Any] | None:
    try:
        return orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None


def _write_live(config: GenConfig, on_status: OnStatus | None, documents: list[dict[str, Any] | None]) -> None:
    document = merge_live(documents)
    if config.live is not None:
        config.live.parent.mkdir(parents=True, exist_ok=True)
        tmp = config.live.with_suffix(".tmp")
        tmp.write_bytes(orjson.dumps(document))
        tmp.replace(config.live)
    if on_status is not None:
        on_status(document)
