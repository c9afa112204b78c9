"""A sharded devnet's generator fleet: one process per shard (or N, each taking whole shards).

    share   - part K of N drives the shards K, K+N, ... (`shard_shares`). It signs its shards'
              workloads (every shard's accounts are read, as recipients), sends and follows
              on them, and tracks the credits of its own cross-shard transfers on their
              destination shards, whichever part drives those: a credit is asked of the
              destination's nodes by receipt id, so it needs no word from another part
    start   - qmemo.load.fleet's `run_parts`: every part signs and says it is ready; the
              parent reads every shard's balances and /metrics once and gives one start
    save    - each part saves, per shard, its timings, credit times, ids, destinations and
              what each transaction moves (`save_shards`)
    check   - the parent rebuilds every shard's part (`load_shards`), then reads every
              shard's final state and checks the invariants once, from all of them
              (qmemo.load.shards.check_run), and writes the run folder with the one-process
              writer (`write_sharded`): the same files and schema, the fleet in the manifest

This module never signs or sends a transaction in the parent.
"""

from __future__ import annotations

import math
import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import orjson
import uvloop

from qmemo.core.shards import ShardedGenesis
from qmemo.errors import ConfigError
from qmemo.load.fleet import FleetPart, run_parts, schedule_lag_p99_ms, timings_arrays, timings_from
from qmemo.load.live_status import OnStatus
from qmemo.load.run import GenConfig
from qmemo.load.shard_parts import Moves, ShardPart, merge, moves_of
from qmemo.load.shard_state import shard_nodes
from qmemo.load.shard_workload import ShardWorkload
from qmemo.load.shards import (ShardedResult, execute_shards, prepare_shards, check_run, sharded_plan, state_before,
                               write_sharded)

PART_COUNTERS = "shards.json"       # in a part's folder: its shards' nodes, reasons, interrupt, CPU
SHARD_FILE = "shard-{}.npz"         # in a part's folder: one shard's arrays


def shard_shares(shards: int, generators: int) -> list[list[int]]:
    """Each part's shards: shard k to part k mod N (every shard in one part; ConfigError if
    N parts cannot each have one)."""
    if not 1 <= generators <= shards:
        raise ConfigError(f"--generators {generators} on {shards} shards: each process drives whole shards "
                          f"(1 to {shards})")
    return [list(range(k, shards, generators)) for k in range(generators)]


@dataclass(frozen=True, slots=True)
class LoadedPart:
    """A part's shards as its parent rebuilds them, and what the part measured of itself."""

    index: int
    shards: list[ShardPart]
    interrupted_at: float | None
    cpu_s: float


# --- a part (the child's side) ----------------------------------------------------------

def run_shard_part(config: GenConfig, sharded: ShardedGenesis, pct: float, part: FleetPart) -> None:
    """Part K of a sharded fleet: sign its shards' workloads, wait for the start, send, follow
    and track its credits, then save its shards for the parent."""
    offsets, _ = sharded_plan(config, sharded, pct)
    mine = shard_shares(sharded.count, part.count)[part.index]
    interval_s = sharded.views[0].block_interval_ms / 1e3

    async def run() -> tuple[list[ShardPart], float | None, float]:
        nodes = await shard_nodes(config.nodes, sharded)
        shards = await prepare_shards(config, sharded, nodes, offsets, pct, True, only=mine)
        part.ready()
        # The part's own CPU from its start (sending, following, credits): signing was before.
        cpu: list[float] = []

        def start_at() -> float:
            start = part.wait_for_start()
            cpu.append(time.process_time())
            return start

        interrupted_at = await execute_shards(config, shards, interval_s, start_at=start_at, nodes_by_shard=nodes)
        return shards, interrupted_at, time.process_time() - cpu[0]

    shards, interrupted_at, cpu_s = uvloop.run(run())
    save_shards(part, shards, interrupted_at, cpu_s)


def save_shards(part: FleetPart, shards: Sequence[ShardPart], interrupted_at: float | None, cpu_s: float) -> None:
    part.folder.mkdir(parents=True, exist_ok=True)
    for shard in shards:
        work, moves = shard.work, shard.moves or moves_of(shard.work)
        cross = sorted(work.receipt_ids)
        np.savez(part.folder / SHARD_FILE.format(shard.index), **timings_arrays(shard.timings),
                 credited=np.frombuffer(shard.credited, dtype=np.float64), ids=_rows(work.ids),
                 destinations=np.asarray(work.destinations, dtype=np.int64), cross=np.asarray(cross, dtype=np.int64),
                 receipt_ids=_rows([work.receipt_ids[i] for i in cross]), senders=_rows(moves.senders),
                 recipients=_rows(moves.recipients), amounts=np.asarray(moves.amounts, dtype=np.uint64),
                 fees=np.asarray(moves.fees, dtype=np.uint64))
    (part.folder / PART_COUNTERS).write_bytes(orjson.dumps({
        "index": part.index, "count": part.count, "interrupted_at": interrupted_at, "cpu_s": cpu_s,
        "shards": [{"shard": s.index, "chain_id": s.work.chain_id, "nodes": s.nodes, "from_cache": s.work.from_cache,
                    "reasons": {str(i): r for i, r in s.timings.reasons.items()}} for s in shards]}))


def _rows(items: Sequence[bytes]) -> np.ndarray:
    """Equal-length byte strings as one uint8 array, a row each."""
    width = len(items[0]) if items else 0
    return np.frombuffer(b"".join(items), dtype=np.uint8).reshape(len(items), width)


# --- the parts' shards, rebuilt (the parent's side) -------------------------------------

def load_shards(folder: Path) -> LoadedPart:
    """What `save_shards` left in `folder`, as ShardParts the parent's checks and writer read."""
    document = orjson.loads((folder / PART_COUNTERS).read_bytes())
    shards = []
    for entry in document["shards"]:
        with np.load(folder / SHARD_FILE.format(entry["shard"])) as arrays:
            timings = timings_from(arrays, entry["reasons"])
            ids = [bytes(row) for row in arrays["ids"]]
            cross = arrays["cross"].tolist()
            receipts = dict(zip(cross, (bytes(row) for row in arrays["receipt_ids"])))
            work = ShardWorkload(entry["shard"], entry["chain_id"], ids, [], None, arrays["destinations"].tolist(),
                                 receipts, entry["from_cache"])
            moves = Moves([bytes(r) for r in arrays["senders"]], [bytes(r) for r in arrays["recipients"]],
                          arrays["amounts"].tolist(), arrays["fees"].tolist())
            shards.append(ShardPart(entry["shard"], entry["nodes"], work, timings,
                                    credited=array("d", arrays["credited"].tobytes()), moves=moves))
    return LoadedPart(document["index"], shards, document["interrupted_at"], document["cpu_s"])


def run_sharded_fleet(config: GenConfig, sharded: ShardedGenesis, pct: float, generators: int,
                      part_args: list[str], *, on_status: OnStatus | None = None) -> ShardedResult:
    """Run a sharded load from `generators` processes (each `qmemo gen` with `part_args` and
    its --part) and write its one run folder."""
    offsets, target_tps = sharded_plan(config, sharded, pct)
    shares = shard_shares(sharded.count, generators)
    interval_s = sharded.views[0].block_interval_ms / 1e3
    started_utc = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    nodes = uvloop.run(shard_nodes(config.nodes, sharded))
    ran = run_parts(config, generators, part_args, lambda: uvloop.run(state_before(nodes, sharded)),
                    on_status=on_status)
    parts = [load_shards(folder) for folder in ran.folders]
    shards = sorted((shard for part in parts for shard in part.shards), key=lambda shard: shard.index)
    if [shard.index for shard in shards] != list(range(sharded.count)):
        raise ConfigError("the fleet's parts did not save every shard once")
    interrupts = [part.interrupted_at for part in parts if part.interrupted_at is not None]
    interrupted_at = min(interrupts) if interrupts else None
    checked = uvloop.run(check_run(nodes, sharded, shards, ran.before, interval_s))
    end_s = min(config.duration_s, interrupted_at or math.inf)
    warmup_s = min(config.warmup_s, config.duration_s / 2)
    manifest = {"generators": generators, "parts": [
        {"part": part.index, "shards": shares[part.index], "planned": sum(len(s.timings) for s in part.shards),
         "cpu_s": part.cpu_s,
         "schedule_lag_p99_ms": schedule_lag_p99_ms(merge([s.timings for s in part.shards]), warmup_s, end_s),
         "workload_from_cache": all(s.work.from_cache for s in part.shards)}
        for part in parts]}
    result = write_sharded(config, shards, checked, interrupted_at, target_tps=target_tps * sharded.count,
                           interval_s=interval_s, pct=pct, started_utc=started_utc, manifest_extra=manifest)
    ran.clean([PART_COUNTERS, *(SHARD_FILE.format(k) for k in range(sharded.count))])
    return replace(result, interrupted=result.interrupted or ran.signals > 0)
