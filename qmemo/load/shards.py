"""One load run on a sharded devnet: every shard driven at once, PCT% of transfers cross-shard.

    prepare  - which shard each node runs (its /status); each shard's accounts (the shard
               its address names) and their nonces; each shard's signed workload at TPS/S
               (qmemo.load.shard_workload); every account's balance before the run
    run      - per shard: the sender (failing over among that shard's nodes only) and the
               block follower (qmemo.load.sender, qmemo.load.follower); one credit tracker
               asking each destination shard where the receipts of the transfers final on
               their source are (`POST /receipts/status`), every CREDIT_POLL_S
    drain    - until every accepted transfer is final on its shard and every final
               cross-shard one credited on its destination, or the timeouts
    check    - every shard's balances after the run: the invariants (qmemo.load.shard_summary)
    report   - summary.json (with `cross_shard`, `shards`, `invariants`), transactions.csv,
               manifest.json, latency histograms: as qmemo.load.run's

Credit times are taken when the tracker sees a receipt credited by a final block, so they
carry up to CREDIT_POLL_S of observation delay (stated in the manifest).

`run_sharded` does it all in one process. A fleet (qmemo.load.shard_fleet) runs `prepare_shards`
and `execute_shards` in each of its processes for their own shards, and `state_before`,
`check_run` and `write_sharded` once in its parent, for every shard.
"""

from __future__ import annotations

import asyncio
import math
import os
import signal
import sys
import time
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import uvloop

from qmemo.core.shards import ShardedGenesis
from qmemo.errors import ConfigError, NodeApiError
from qmemo.load import live_status
from qmemo.load import schedule as sched
from qmemo.load.follower import FollowState, current_height, follow_blocks, lost_reasons
from qmemo.load.hdr_files import write_latency_histograms
from qmemo.load.latency import ACCEPTED, DUPLICATE, Timings, summarize
from qmemo.load.live_status import OnStatus
from qmemo.load.node_stages import NODE_STAGES_FILE, costs_file, write_node_stages
from qmemo.load.run import GenConfig, fetch_nonces, offsets_for
from qmemo.load.sender import SendProgress, send_batches
from qmemo.load.shard_parts import ShardPart, cross_figures, intra_p99, merge, shard_counts, transfers, write_csv
from qmemo.load.shard_state import STATUS_IDS, fates_now, read_all_metrics, read_balances, settle, shard_nodes
from qmemo.load.shard_summary import Invariants, invariants
from qmemo.load.shard_workload import build_shard
from qmemo.load.summary import LoadSummary, load_summary, write
from qmemo.load.workload import PlanShape, funded_accounts
from qmemo.net.client import open_clients

FOLLOW_POLL_S = 0.1
CREDIT_POLL_S = 0.25
STATUS_EVERY_S = 1.0
LIVE_WINDOW_S = 10.0             # the live p50/p99 cover what was seen final (or credited) in the last 10 s
CREDIT_TIMEOUT_INTERVALS = 10   # after the last commit, block intervals to wait for the last credits
SETTLE_INTERVALS = 30           # then, block intervals to wait for every shard to be quiet (past saturation: long)
INTRA_P99_INTERVALS = 3         # a sharded run's latency verdict: p99 within a shard ...
CROSS_P99_INTERVALS = 6         # ... and across shards, in block intervals


@dataclass(frozen=True, slots=True)
class ShardedResult:
    file_summary: LoadSummary
    out: Path
    interrupted: bool
    all_accounted: bool


def run_sharded(config: GenConfig, sharded: ShardedGenesis, pct: float, *, quiet: bool = False,
                on_status: OnStatus | None = None) -> ShardedResult:
    """A whole sharded run in this process: prepare, execute, check, write the run folder."""
    offsets, target_tps = sharded_plan(config, sharded, pct)
    interval_s = sharded.views[0].block_interval_ms / 1e3
    started_utc = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    async def whole() -> tuple[list[ShardPart], float | None, Checked]:
        nodes = await shard_nodes(config.nodes, sharded)
        shards = await prepare_shards(config, sharded, nodes, offsets, pct, quiet)
        before = await state_before(nodes, sharded)
        interrupted_at = await execute_shards(config, shards, interval_s)
        return shards, interrupted_at, await check_run(nodes, sharded, shards, before, interval_s)

    shards, interrupted_at, checked = uvloop.run(whole())
    return write_sharded(config, shards, checked, interrupted_at, target_tps=target_tps * sharded.count,
                         interval_s=interval_s, pct=pct, started_utc=started_utc)


def sharded_plan(config: GenConfig, sharded: ShardedGenesis, pct: float) -> tuple[list[float], float]:
    """Each shard's schedule (the same for every shard: --tps over the shards) and its rate."""
    if config.schedule or config.ramp:
        raise ConfigError("a sharded run takes a constant --tps (or --poisson), not --schedule")
    if not 0 <= pct <= 100:
        raise ConfigError("--cross-shard must be a percentage from 0 to 100")
    return offsets_for(replace(config, tps=config.tps / sharded.count))


@dataclass(frozen=True, slots=True)
class Before:
    """Every shard's state before anything is sent: balances (funded and validators), /metrics."""

    balances: dict[bytes, int]
    metrics: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Checked:
    """Every shard's state after the run, and what the invariants make of it."""

    metrics: dict[str, Any]         # "before" and "after": url -> /metrics
    checks: Invariants
    lost: dict[str, int]            # why the accepted transactions never final were lost


def _addresses(sharded: ShardedGenesis) -> tuple[list[list[bytes]], list[list[bytes]]]:
    """Each shard's funded accounts, and those with its validators (whose fees move them)."""
    funded = [[address for address, _ in view.balances] for view in sharded.views]
    return funded, [f + [v.address for v in view.validators] for f, view in zip(funded, sharded.views)]


async def state_before(nodes: list[list[str]], sharded: ShardedGenesis) -> Before:
    return Before(await read_balances(nodes, _addresses(sharded)[1]), await read_all_metrics(nodes))


async def check_run(nodes: list[list[str]], sharded: ShardedGenesis, shards: list[ShardPart], before: Before,
                    interval_s: float) -> Checked:
    """The invariants from every shard's final state (`shards`: every shard's part, from one
    process or merged from a fleet's)."""
    funded, every = _addresses(sharded)
    # The state is read once every shard is quiet, and each transfer's fate asked of the
    # chain again: one final (or credited) after the follower or tracker stopped looking
    # is still in the balances.
    settled = await settle(nodes, SETTLE_INTERVALS * interval_s)
    late_final, late_credited = await fates_now(shards)
    after = await read_balances(nodes, every)
    metrics_after = await read_all_metrics(nodes)
    lost: dict[str, int] = {}
    for shard in shards:
        ids = [shard.work.ids[i] for i in range(len(shard.timings))
               if shard.timings.status[i] in (ACCEPTED, DUPLICATE) and math.isnan(shard.timings.committed[i])]
        for reason, n in (await lost_reasons(shard.nodes, ids)).items():
            lost[reason] = lost.get(reason, 0) + n
    checks = invariants(before.balances, after, transfers(shards, late_final, late_credited),
                        [a for f in funded for a in f], settled)
    return Checked({"before": before.metrics, "after": metrics_after}, checks, lost)


def write_sharded(config: GenConfig, shards: list[ShardPart], checked: Checked, interrupted_at: float | None, *,
                  target_tps: float, interval_s: float, pct: float, started_utc: str,
                  manifest_extra: dict[str, Any] | None = None) -> ShardedResult:
    """The run folder of a sharded run from every shard's part (one process's, or a fleet's)."""
    from qmemo.sysinfo import machine_info

    checks, metrics = checked.checks, checked.metrics
    interrupted = interrupted_at is not None
    merged = merge([shard.timings for shard in shards])
    warmup_s = min(config.warmup_s, config.duration_s / 2)
    window_end_s = min(config.duration_s, interrupted_at or math.inf)
    summary = summarize(merged, warmup_s=warmup_s, window_end_s=window_end_s)
    file_summary = load_summary(summary, target_tps=target_tps, interrupted=interrupted,
                                block_interval_s=interval_s)
    cross = cross_figures(shards, warmup_s, window_end_s)
    per_shard = tuple(shard_counts(shard, shards, metrics, warmup_s, window_end_s) for shard in shards)
    intra_p99_ms = intra_p99(shards, warmup_s, window_end_s)
    latency_saturated = not (intra_p99_ms is not None and intra_p99_ms <= INTRA_P99_INTERVALS * interval_s * 1e3) or \
        (cross.planned > 0 and not (cross.p99_ms_intended_to_credited is not None and
                                    cross.p99_ms_intended_to_credited <= CROSS_P99_INTERVALS * interval_s * 1e3))
    why = [reason for reason, holds in (
        ("committed < 90% of target", file_summary.throughput_saturated),
        (f"p99 > {INTRA_P99_INTERVALS} block intervals within a shard or > {CROSS_P99_INTERVALS} across",
         latency_saturated),
        ("generator fell behind", file_summary.generator_fell_behind),
        ("invariants failed", not checks.hold)) if holds]
    file_summary = replace(file_summary, counts=replace(file_summary.counts, lost_reasons=checked.lost),
                           latency_saturated=latency_saturated, why="; ".join(why), cross_shard=cross,
                           shards=per_shard, invariants=checks)
    out = config.out
    out.mkdir(parents=True, exist_ok=True)
    write(out / "summary.json", file_summary)
    write_csv(out / "transactions.csv", shards)
    write_latency_histograms(out, summary)
    urls = [url for shard in shards for url in shard.nodes]
    write_node_stages(out / NODE_STAGES_FILE, costs_file(urls, metrics["before"], metrics["after"], os.cpu_count()))
    (out / "manifest.json").write_bytes(orjson.dumps({
        "config": {key: str(value) if isinstance(value, Path) else value for key, value in asdict(config).items()},
        "cross_shard_pct": pct, "shards": [{"shard": s.index, "chain_id": s.work.chain_id, "nodes": s.nodes,
                                            "workload_from_cache": s.work.from_cache} for s in shards],
        "block_interval_s": interval_s, "started_utc": started_utc, "follower_poll_s": FOLLOW_POLL_S,
        "credit_poll_s": CREDIT_POLL_S,
        "commit_time_note": "committed = first seen final by the block follower (up to one poll late); credited "
                            "= first seen credited by a final block (up to one credit poll late)",
        "machine": machine_info(), **(manifest_extra or {}),
    }, option=orjson.OPT_INDENT_2))
    accounted = file_summary.counts.accounted == file_summary.counts.planned
    return ShardedResult(file_summary, out, interrupted, accounted)


async def prepare_shards(config: GenConfig, sharded: ShardedGenesis, nodes: list[list[str]], offsets: list[float],
                   pct: float, quiet: bool, only: Collection[int] | None = None) -> list[ShardPart]:
    """Every shard's signed part (`only`: these shards'; the accounts of all are read, as
    recipients)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from qmemo.crypto.keys import load_keys

    keys = load_keys(config.accounts)
    if not keys:
        raise ConfigError(f"{config.accounts} holds no account keys")
    scheme = keys[0].scheme
    genesis = sharded.views[0]
    scheme_id = genesis.schemes.by_name(scheme).scheme_id
    provisional = funded_accounts(keys, scheme_id, {})
    by_shard_keys: list[list] = [[] for _ in range(sharded.count)]
    for key, account in zip(keys, provisional):
        by_shard_keys[sharded.sharding.shard_of(account.address)].append(key)
    accounts = []
    for k, shard_keys in enumerate(by_shard_keys):
        if not shard_keys:
            raise ConfigError(f"no funded account lies in shard {k}: make the devnet with more --accounts")
        addresses = [a.address for a in funded_accounts(shard_keys, scheme_id, {})]
        accounts.append(funded_accounts(shard_keys, scheme_id, await fetch_nonces(nodes[k], addresses)))
    batch = sched.batch_size(config.batch, len(offsets) / config.duration_s)
    shards = []
    with Progress(TextColumn("signing the workload"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  disable=quiet, transient=True) as bar:
        chosen = [k for k in range(sharded.count) if only is None or k in only]
        task = bar.add_task("sign", total=len(offsets) * len(chosen))
        for k in chosen:
            view = sharded.views[k]
            shape = PlanShape(len(offsets), batch, tuple(nodes[k]), config.targeting, config.seed)
            work = build_shard(k, view.chain_id, shape, accounts, pct, scheme=scheme, fee=view.min_fee,
                               genesis_hash=view.hash, cache_dir=config.cache_dir,
                               progress=lambda n: bar.advance(task, n))
            shards.append(ShardPart(k, nodes[k], work, Timings(offsets)))
    return shards


async def execute_shards(config: GenConfig, shards: list[ShardPart], interval_s: float,
                   start_at: Callable[[], float] | None = None,
                   nodes_by_shard: list[list[str]] | None = None) -> float | None:
    """Send, follow and track credits on `shards`; drain. When an interrupt came (offset), or
    None. A fleet's part drives some shards only: `start_at` is where it waits for its
    parent's start (a perf_counter time), `nodes_by_shard` every shard's nodes, where its
    transfers' credits are asked."""
    from array import array

    stop_sending, stop_draining, stop_following = asyncio.Event(), asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()
    interrupted_at: list[float] = []
    start = time.perf_counter()

    def interrupt() -> None:
        if interrupted_at:
            stop_draining.set()
        else:
            interrupted_at.append(time.perf_counter() - start)
        stop_sending.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, interrupt)
    pendings = []
    for shard in shards:
        async with open_clients(shard.nodes, timeout_s=10) as clients:
            shard.state = FollowState(next_height=await current_height(clients) + 1)
        shard.progress = SendProgress()
        shard.credited = array("d", [math.nan]) * len(shard.timings)
        shard.uncredited = dict(shard.work.receipt_ids)
        pendings.append({tx_id: i for i, tx_id in enumerate(shard.work.ids)})
    start = time.perf_counter() + 0.2 if start_at is None else start_at()
    tasks = [asyncio.create_task(follow_blocks(shard.nodes, shard.state, pending, shard.timings, start=start,
                                               stop=stop_following, poll_s=FOLLOW_POLL_S))
             for shard, pending in zip(shards, pendings)]
    every = nodes_by_shard if nodes_by_shard is not None else [shard.nodes for shard in shards]   # all in one
    tasks.append(asyncio.create_task(_track_credits(shards, every, start, stop_following), name="the credit tracker"))
    tasks.append(asyncio.create_task(_write_status(config, shards, start, stop_following), name="the live status"))
    for task in tasks[-2:]:
        task.add_done_callback(_said_if_failed)
    try:
        await asyncio.gather(*(send_batches(shard.work.batches, shard.timings, config.send.for_blocks(interval_s),
                                            start=start,
                                            progress=shard.progress, stop=stop_sending, previous=shard.work.previous,
                                            nodes=shard.nodes) for shard in shards))
        commit_s = config.commit_timeout_s if config.commit_timeout_s is not None else 5 * interval_s
        now = time.perf_counter()
        deadline = now + (min(commit_s, 2.0) if interrupted_at else commit_s)
        final_deadline = deadline + (0 if interrupted_at else commit_s)
        credit_deadline = final_deadline + (0 if interrupted_at else CREDIT_TIMEOUT_INTERVALS * interval_s)
        while not stop_draining.is_set():
            # The followers keep only the not yet final in `pendings`, the tracker only the not
            # yet credited in `shard.uncredited`: each pass reads what is left, not the whole plan.
            waiting = [(shard, i) for shard, pending in zip(shards, pendings) for i in pending.values()
                       if shard.timings.status[i] in (ACCEPTED, DUPLICATE)]
            uncredited = [(shard, i) for shard in shards for i in shard.uncredited
                          if not math.isnan(shard.timings.committed[i])]
            if not waiting and not uncredited:
                break
            now = time.perf_counter()
            if waiting and (now >= final_deadline or (now >= deadline and all(
                    math.isnan(shard.timings.included[i]) for shard, i in waiting))):
                waiting = []
            if not waiting and (not uncredited or now >= credit_deadline):
                break
            await asyncio.sleep(FOLLOW_POLL_S)
    finally:
        stop_following.set()
        await asyncio.gather(*tasks, return_exceptions=True)
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
    return interrupted_at[0] if interrupted_at else None


def _said_if_failed(task: asyncio.Task) -> None:
    """Gathered with return_exceptions: without this a task that raised would end unheard
    (credits then found only by the end's look-up, a live status standing still)."""
    if not task.cancelled() and task.exception() is not None:
        print(f"qmemo gen: {task.get_name()} failed: {task.exception()!r}", file=sys.stderr)


async def _track_credits(shards: list[ShardPart], nodes_by_shard: list[list[str]], start: float,
                         stop: asyncio.Event) -> None:
    """Every CREDIT_POLL_S: ask each destination shard (whoever drives it) about the receipts
    of `shards`' cross-shard transfers final on their source and not yet seen credited by a
    final block."""
    clients_by_shard = {}
    async with open_clients([url for nodes in nodes_by_shard for url in nodes], timeout_s=10) as clients:
        by_url = {client.url: client for client in clients}
        for k, nodes in enumerate(nodes_by_shard):
            clients_by_shard[k] = [by_url[url] for url in nodes]
        turn = 0
        while not stop.is_set():
            asking: dict[int, list[tuple[ShardPart, int, bytes]]] = {}
            for shard in shards:
                for i, rid in shard.uncredited.items():
                    if not math.isnan(shard.timings.committed[i]):
                        asking.setdefault(shard.work.destinations[i], []).append((shard, i, rid))
            for destination, items in asking.items():
                nodes = clients_by_shard[destination]
                client = nodes[turn % len(nodes)]
                for first in range(0, len(items), STATUS_IDS):
                    chunk = items[first:first + STATUS_IDS]
                    try:
                        statuses = await client.receipt_statuses([rid for _, _, rid in chunk])
                    except NodeApiError:
                        turn += 1
                        break
                    seen_at = time.perf_counter() - start
                    for (shard, i, _), status in zip(chunk, statuses):
                        if status.status == "credited" and status.final:
                            shard.credited[i] = seen_at
                            del shard.uncredited[i]
            try:
                await asyncio.wait_for(stop.wait(), timeout=CREDIT_POLL_S)
            except asyncio.TimeoutError:
                pass


async def _write_status(config: GenConfig, shards: list[ShardPart], start: float, stop: asyncio.Event) -> None:
    """The live status every second (live.json for the dashboard), all of `shards` together:
    each shard's own status (its schedule is in order, its send lag its own) summed as a
    fleet's parts are, with the latencies of all pooled, and the shards it covers named."""
    from qmemo.load.fleet import merge_live

    if config.live is None:
        return
    config.live.parent.mkdir(parents=True, exist_ok=True)
    while not stop.is_set():
        now = time.perf_counter() - start
        for shard in shards:        # the follower appends each block's latencies; the window keeps 10 s
            while shard.state.recent and now - shard.state.recent[0][0] > LIVE_WINDOW_S:
                shard.state.recent.popleft()
        blocks = [block for shard in shards for _, block in shard.state.recent]
        recent = np.concatenate(blocks) if blocks else np.empty(0)
        document = merge_live([live_status.status(
            elapsed_s=now, duration_s=config.duration_s, timings=s.timings, sent=s.progress.sent,
            answered=s.progress.answered, in_flight=s.progress.in_flight, included=s.state.included_seen,
            committed=s.state.committed_seen, blocks_seen=s.state.blocks_seen, failovers=s.progress.failovers,
            node_failures=dict(s.progress.node_failures), recent_latencies_s=[], resend_txs=s.progress.resend_txs)
            for s in shards])
        del document["generators"]          # these are shards of one process, not parts of a fleet
        document["blocks_seen"] = sum(s.state.blocks_seen for s in shards)     # each shard's chain its own
        p50, p99 = live_status.percentiles(recent, 50, 99) if len(recent) else (None, None)
        document["p50_ms"] = p50 * 1e3 if p50 is not None else None
        document["p99_ms"] = p99 * 1e3 if p99 is not None else None
        document["shards"] = [s.index for s in shards]
        credits = [s.credited[i] - s.timings.intended[i] for s in shards for i in s.work.receipt_ids
                   if not math.isnan(s.credited[i]) and now - s.credited[i] <= LIVE_WINDOW_S]
        c50, c99 = live_status.percentiles(credits, 50, 99) if credits else (None, None)
        document["cross_shard"] = {
            "planned": sum(len(s.work.receipt_ids) for s in shards),
            "credited": sum(1 for s in shards for i in s.work.receipt_ids if not math.isnan(s.credited[i])),
            "p50_ms": c50 * 1e3 if c50 is not None else None, "p99_ms": c99 * 1e3 if c99 is not None else None}
        tmp = config.live.with_suffix(".tmp")
        tmp.write_bytes(orjson.dumps(document))
        tmp.replace(config.live)
        try:
            await asyncio.wait_for(stop.wait(), timeout=STATUS_EVERY_S)
        except asyncio.TimeoutError:
            pass
    config.live.write_bytes(orjson.dumps({"running": False}))
