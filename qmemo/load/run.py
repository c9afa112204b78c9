"""One load run, end to end: prepare, send open-loop, follow commits, account for everything.

    prepare  - genesis and funded accounts; their next nonces from a node; the schedule;
               the signed workload (built or loaded from the cache)
    run      - the sender, the block follower and the live-status writer, concurrently
    drain    - after the last send, wait for outstanding commits up to a timeout
    report   - summary.json, transactions.csv, manifest.json, latency-*.hgrm/.hlog in the run folder

A fleet's part (`run_part`, started by qmemo.load.fleet) prepares and runs its share and
leaves the nodes' /metrics, the agreement check and the report to its parent (`write_run`).

A sweep repeats the run at growing constant rates, up to its last rate (past the chain's
saturation too), and writes the throughput-vs-latency table.
"""

from __future__ import annotations

import asyncio
import csv
import math
import os
import random
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
import uvloop

from qmemo.api_schema import MetricsSnapshot
from qmemo.errors import ConfigError, NodeApiError
from qmemo.records import to_json
from qmemo.load import schedule as sched
from qmemo.load.agreement import Agreement, check_agreement
from qmemo.load.follower import (FINAL_ON, FollowState, current_height, final_mask, follow_blocks, lost_reasons,
                                 plan_index)
from qmemo.load.hdr_files import write_latency_histograms
from qmemo.load import live_status
from qmemo.load.live_status import OnStatus
from qmemo.load.node_record import NODES_FILE, NODES_SCHEMA, BlockSeen, NodeEnds, RunNodes, scheme_of, tx_sizes, write_nodes
from qmemo.load.latency import ACCEPTED, DUPLICATE, STATUS_NAMES, RunSummary, Timings, summarize
from qmemo.load.node_stages import NODE_STAGES_FILE, NodeStagesFile, costs_file, survival, write_node_stages
from qmemo.load.sender import SendConfig, SendProgress, send_batches
from qmemo.load.summary import (SWEEP_SCHEMA, DoorAnswers, Failover, LoadSummary, Sweep, SweepRow, load_summary,
                                sweep_row, unknown_resolutions, write)
from qmemo.load.workload import PlanShape, Workload, build, funded_accounts
from qmemo.core.genesis import Genesis
from qmemo.crypto.verifier import load_genesis
from qmemo.net.client import NodeClient, open_clients

if TYPE_CHECKING:
    from qmemo.load.fleet import FleetPart

FOLLOW_POLL_S = 0.1
STATUS_EVERY_S = 1.0
LIVE_WINDOW_S = 10.0      # the live status's latency percentiles cover the last 10 s of commits
MAX_PLANNED = 20_000_000  # a plan beyond this is a typo (and would not fit in memory)
NONCES_PER_REQUEST = 1_000   # addresses per POST /accounts (the node takes up to 10,000)


@dataclass(frozen=True, slots=True)
class GenConfig:
    genesis: Path
    accounts: Path
    nodes: list[str]
    out: Path
    tps: float = 1000.0
    duration_s: float = 30.0
    schedule: str | None = None          # "0:500,30:1000,..." (overrides tps)
    ramp: bool = False
    poisson: bool = False
    batch: int = sched.MAX_BATCH
    targeting: str = "round-robin"
    send: SendConfig = field(default_factory=SendConfig)
    warmup_s: float = 2.0
    commit_timeout_s: float | None = None  # default: 5 block intervals
    live: Path | None = None
    cache_dir: Path | None = None
    seed: int = 1
    agreement_from: int = 1              # the first height the end's agreement check compares


@dataclass(frozen=True, slots=True)
class RunResult:
    summary: RunSummary
    target_tps: float
    out: Path
    interrupted: bool
    file_summary: LoadSummary     # what summary.json holds, the saturation verdict included


# --- prepare ---------------------------------------------------------------------------

async def fetch_nonces(nodes: list[str], addresses: list[bytes]) -> dict[bytes, int]:
    """Next nonce (counting pending transactions) of every address, from the first node that answers."""
    last_error = "no node given"
    async with open_clients(nodes, timeout_s=30) as clients:
        for client in clients:
            try:
                nonces: dict[bytes, int] = {}
                for start in range(0, len(addresses), NONCES_PER_REQUEST):
                    for account in await client.accounts(addresses[start:start + NONCES_PER_REQUEST]):
                        nonces[account.address] = account.pending_nonce
                return nonces
            except NodeApiError as exc:
                last_error = str(exc)
    raise ConfigError(f"could not read account nonces from any node ({last_error})")


def offsets_for(config: GenConfig) -> tuple[list[float], float]:
    """The intended send offsets and the mean target rate they represent."""
    if not (math.isfinite(config.duration_s) and config.duration_s > 0):
        raise ConfigError("--duration must be a positive number of seconds")
    if not (math.isfinite(config.warmup_s) and config.warmup_s >= 0):
        raise ConfigError("--warmup must be zero or more seconds")
    if config.commit_timeout_s is not None and not (math.isfinite(config.commit_timeout_s)
                                                    and config.commit_timeout_s >= 0):
        raise ConfigError("--commit-timeout must be zero or more seconds")
    if not config.schedule and not (math.isfinite(config.tps) and config.tps > 0):
        raise ConfigError("--tps must be a positive number")
    if not config.schedule and config.tps * config.duration_s > MAX_PLANNED:
        raise ConfigError(f"--tps x --duration plans more than {MAX_PLANNED:,} transactions")
    if config.schedule:
        points = sched.parse_schedule(config.schedule)
        offsets = sched.varying_offsets(points, config.duration_s, ramp=config.ramp)
    elif config.poisson:
        offsets = sched.poisson_offsets(config.tps, config.duration_s, random.Random(config.seed))
    else:
        offsets = sched.constant_offsets(config.tps, config.duration_s)
    if not offsets:
        raise ConfigError("the schedule plans no transactions: raise --tps or --duration")
    return offsets, len(offsets) / config.duration_s


def batch_size(config: GenConfig, offsets: list[float]) -> int:
    """--batch, or fewer so one batch spans at most BATCH_WINDOW_S at the mean rate."""
    return sched.batch_size(config.batch, len(offsets) / config.duration_s)


async def prepare(config: GenConfig, offsets: list[float], genesis: Genesis, *, quiet: bool = False,
                  part: FleetPart | None = None) -> Workload:
    """The signed workload, its senders at the nonces a node says come next (a fleet's
    part: its share of the accounts). Signing blocks the event loop it runs on: nothing
    else runs before the sending starts."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from qmemo.crypto.keys import load_keys

    keys = load_keys(config.accounts)
    if not keys:
        raise ConfigError(f"{config.accounts} holds no account keys")
    if part is not None:
        keys = part.share(keys)
    scheme = keys[0].scheme
    scheme_id = genesis.schemes.by_name(scheme).scheme_id
    if scheme_id not in genesis.tx_scheme_ids:
        raise ConfigError(f"the genesis does not allow {scheme} transactions")
    provisional = funded_accounts(keys, scheme_id, {})
    nonces = await fetch_nonces(config.nodes, [a.address for a in provisional])
    accounts = funded_accounts(keys, scheme_id, nonces)
    shape = PlanShape(len(offsets), batch_size(config, offsets), tuple(config.nodes), config.targeting, config.seed)
    with Progress(TextColumn("signing the workload"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  disable=quiet, transient=True) as bar:
        task = bar.add_task("sign", total=len(offsets))
        return build(shape, accounts, scheme=scheme, chain_id=genesis.chain_id, genesis_hash=genesis.hash,
                     fee=genesis.min_fee, cache_dir=config.cache_dir, progress=lambda n: bar.advance(task, n))


# --- run ---------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class RunCounters:
    """The sender's and the follower's own counters over a run: the manifest's "sender"."""

    lost_reasons: dict[str, int]       # why each accepted transaction never showed final (follower.lost_reasons)
    max_in_flight_seen: int
    blocks_seen: int
    follower_node_switches: int
    node_failures: dict[str, int]      # by node URL: tries it did not answer
    failovers: int
    failover_txs: int
    resends: int
    resend_txs: int
    unknown_resends: int               # requests that sent again what a lost answer left unknown
    cpu_s: float                       # the generator's own CPU over the run (sending, following, status)
    offered: int                       # transactions it sent
    door: DoorAnswers                  # what the nodes' doors refused, and the waits they asked for
    committed_late: int = 0            # found final by the end's look-up, after the follower's wait

    def failover(self, unknown_resent: int, unknown_resolved: dict[str, int]) -> Failover:
        return Failover(self.failovers, self.failover_txs, self.node_failures, self.resends, self.resend_txs,
                        unknown_resent, unknown_resolved)


@dataclass(frozen=True, slots=True)
class Executed:
    """What sending, following and draining measured, beside the timings."""

    interrupted_at: float | None       # when an interrupt came (an offset); None if none came
    node_stages: NodeStagesFile        # the nodes' stage costs over the run
    counters: RunCounters
    verifiers: dict[str, dict[str, Any] | None]    # each node's verifier, which the manifest reports
    nodes: RunNodes                    # the nodes' record: their /metrics before and after, the blocks seen
    outcome_unknown: Any               # per planned transaction: whether a lost answer left it unknown (the sender's)
    agreement: Agreement               # the nodes' final blocks compared, their branch switches during the run
    blocks: tuple[BlockSeen, ...] = ()  # what the follower saw (also in `nodes`: a fleet's part has no `nodes`)


async def execute(config: GenConfig, workload: Workload, timings: Timings, block_interval_s: float,
                  on_status: OnStatus | None = None, part: FleetPart | None = None) -> Executed:
    """Send, follow and drain. A fleet's part (qmemo.load.fleet) starts when its parent says
    and leaves the nodes' /metrics and the agreement check to the parent, which reads them
    once for every part."""
    stop_sending = asyncio.Event()
    stop_draining = asyncio.Event()
    stop_following = asyncio.Event()
    loop = asyncio.get_running_loop()
    interrupted = False
    interrupted_at: float | None = None
    start = time.perf_counter()   # set again once the run is about to begin

    def interrupt() -> None:
        """First Ctrl-C/SIGTERM: stop sending, drain briefly. Second: stop waiting at once."""
        nonlocal interrupted, interrupted_at
        if interrupted:
            stop_draining.set()
        else:
            interrupted_at = time.perf_counter() - start
        interrupted = True
        stop_sending.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, interrupt)
    index_of = plan_index(workload.ids)
    async with open_clients(config.nodes, timeout_s=10) as clients:
        state = FollowState(next_height=await current_height(clients) + 1,
                            tx_bytes=np.array(tx_sizes([(b.first, b.body) for b in workload.batches],
                                                       len(workload.ids)), dtype=np.int64))
        if part is None:
            metrics_before = dict(zip(config.nodes, await read_metrics(clients)))  # at the start: stage costs, record
    progress = SendProgress()
    # The generator's own CPU over the run (sending, following, the live status; every
    # thread of this process), per offered transaction: it shares the machine's cores with
    # the nodes, so what it costs is what they lose. Signing was done before; the end's
    # look-ups are after.
    cpu_started = time.process_time()
    start = time.perf_counter() + 0.2 if part is None else part.wait_for_start()
    follower = asyncio.create_task(follow_blocks(config.nodes, state, index_of, timings, start=start,
                                                 stop=stop_following, poll_s=FOLLOW_POLL_S))
    status = asyncio.create_task(_write_status(config, timings, progress, state, start, stop_following,
                                                 on_status))
    try:
        await send_batches(workload.batches, timings, config.send.for_blocks(block_interval_s),
                           start=start, progress=progress, stop=stop_sending,
                           previous=workload.previous,
                           nodes=config.nodes)
        timeout_s = config.commit_timeout_s if config.commit_timeout_s is not None else 5 * block_interval_s
        deadline = time.perf_counter() + (min(timeout_s, 2.0) if interrupted else timeout_s)
        # A transaction already in a block is final once a majority of validators has built
        # on it (docs/protocol.md, "Finality"), whatever the load: those get the same wait
        # again past the deadline, so a run's last seconds are not counted lost merely for
        # being recent.
        final_deadline = deadline + (0 if interrupted else timeout_s)
        while not stop_draining.is_set():
            waiting = _not_final(timings)
            if not waiting.any():
                break  # every accepted transaction is committed
            now = time.perf_counter()
            if now >= final_deadline or (now >= deadline and
                                         np.isnan(np.frombuffer(timings.included, dtype=np.float64)[waiting]).all()):
                break
            await asyncio.sleep(FOLLOW_POLL_S)
    finally:
        stop_following.set()
        await asyncio.gather(follower, status, return_exceptions=True)
        cpu_s = time.process_time() - cpu_started
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
    blocks = tuple(state.blocks[h] for h in sorted(state.blocks))

    async def counted() -> RunCounters:
        lost = [workload.ids[i] for i in np.flatnonzero(_not_final(timings))]
        late: list[bytes] = []
        reasons = await lost_reasons(config.nodes, lost, final=late)
        if late:
            # Final after the follower stopped waiting: committed late, with the time it was
            # found (an upper bound of its latency), not lost.
            found_s = time.perf_counter() - start
            for tx_id in late:
                timings.mark_committed(index_of[tx_id], found_s)
            reasons = {reason: n for reason, n in reasons.items() if not reason.startswith(FINAL_ON)}
        return RunCounters(reasons, progress.max_in_flight_seen, state.blocks_seen,
                           state.node_switches, dict(progress.node_failures), progress.failovers,
                           progress.failover_txs, progress.resends, progress.resend_txs, progress.unknown_resends,
                           cpu_s, progress.sent,
                           DoorAnswers(progress.door_refusals, progress.door_refused_txs, progress.door_waits,
                                       progress.door_waited_txs, progress.requeues, progress.gap_offers,
                                       progress.catch_ups), len(late))
    if part is not None:
        return Executed(interrupted_at, None, await counted(), {}, None,  # type: ignore[arg-type]
                        progress.outcome_unknown, None, blocks)  # type: ignore[arg-type]
    async with open_clients(config.nodes, timeout_s=5) as clients:
        metrics_after = dict(zip(config.nodes, await read_metrics(clients)))    # one per node serves all three
    ends = tuple(NodeEnds(url, metrics_before[url], metrics_after[url]) for url in config.nodes)
    agreement = await check_agreement(config.nodes, config.agreement_from,
                                      {url: m.blocks.reorgs if m else None for url, m in metrics_before.items()})
    counters = await counted()
    return Executed(interrupted_at, costs_file(config.nodes, metrics_before, metrics_after, os.cpu_count()), counters,
                    {url: node_verifier(metrics_after[url]) for url in config.nodes},
                    RunNodes(NODES_SCHEMA, scheme_of(ends), ends, blocks), progress.outcome_unknown, agreement, blocks)


def _not_final(timings: Timings) -> np.ndarray:
    """True for each planned transaction answered accepted (or duplicate) and not yet seen final."""
    status = np.frombuffer(timings.status, dtype=np.uint8)
    return ((status == ACCEPTED) | (status == DUPLICATE)) & ~final_mask(timings)


async def read_metrics(clients: Sequence[NodeClient]) -> list[MetricsSnapshot | None]:
    """Every node's /metrics, in order (None for a node that did not answer)."""
    async def one(client: NodeClient) -> MetricsSnapshot | None:
        try:
            return await client.metrics()
        except NodeApiError:
            return None
    return list(await asyncio.gather(*map(one, clients)))


def node_verifier(metrics: MetricsSnapshot | None) -> dict[str, Any] | None:
    """Which Falcon verifier the node ran and its key cache at the end of the run (from its
    /metrics document), or None if it did not answer: the manifest says what produced the figures."""
    if metrics is None:
        return None
    return {"verifier": metrics.verify.verifier, "key_cache": to_json(metrics.verify.key_cache)}


async def _write_status(config: GenConfig, timings: Timings, progress: SendProgress, state: FollowState,
                        start: float, stop: asyncio.Event, on_status: OnStatus | None) -> None:
    """Every second, the live status: to live.json (written atomically) for the dashboard,
    and to `on_status` (the progress line)."""
    if config.live is None and on_status is None:
        return
    if config.live is not None:
        config.live.parent.mkdir(parents=True, exist_ok=True)
    while not stop.is_set():
        now = time.perf_counter() - start
        while state.recent and now - state.recent[0][0] > LIVE_WINDOW_S:
            state.recent.popleft()
        document = live_status.status(
            elapsed_s=now, duration_s=config.duration_s, timings=timings, sent=progress.sent,
            answered=progress.answered, in_flight=progress.in_flight, included=state.included_seen,
            committed=state.committed_seen, blocks_seen=state.blocks_seen, failovers=progress.failovers,
            resend_txs=progress.resend_txs,
            node_failures=progress.node_failures,
            recent_latencies_s=np.concatenate([latencies for _, latencies in state.recent]) if state.recent else ())
        if config.live is not None:
            tmp = config.live.with_suffix(".tmp")
            tmp.write_bytes(orjson.dumps(document))
            tmp.replace(config.live)
        if on_status is not None:
            on_status(document)
        try:
            await asyncio.wait_for(stop.wait(), timeout=STATUS_EVERY_S)
        except asyncio.TimeoutError:
            pass
    if config.live is not None:
        config.live.write_bytes(orjson.dumps({"running": False}))


def run_load(config: GenConfig, *, quiet: bool = False, genesis: Genesis | None = None,
             on_status: OnStatus | None = None) -> RunResult:
    """A whole run: prepare, execute, write the run folder. `on_status` gets the live
    status every second (qmemo.load.live_status)."""
    offsets, target_tps = offsets_for(config)
    genesis = genesis or load_genesis(config.genesis)
    timings = Timings(offsets)
    started_utc = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    async def prepare_and_execute() -> tuple[Workload, Executed]:
        workload = await prepare(config, offsets, genesis, quiet=quiet)
        return workload, await execute(config, workload, timings, genesis.block_interval_ms / 1e3, on_status)

    # One event loop for the whole run, uvloop as the nodes': the load's sending and following
    # take less of the generator's CPU than on asyncio's own loop (docs/methodology.md
    # section 12), CPU the nodes share the machine with.
    workload, executed = uvloop.run(prepare_and_execute())
    return write_run(config, genesis, timings, workload.ids, executed, target_tps=target_tps,
                     batch=batch_size(config, offsets), started_utc=started_utc, from_cache=workload.from_cache)


def run_part(config: GenConfig, part: FleetPart, *, quiet: bool = False) -> None:
    """One part of a fleet (qmemo.load.fleet): its share of the schedule and of the accounts,
    signed, then sent from the moment its parent gives; its timings and counters go to the
    parent, which writes the run folder."""
    offsets = part.share(offsets_for(config)[0])
    genesis = load_genesis(config.genesis)
    timings = Timings(offsets)

    async def prepare_and_execute() -> tuple[Workload, Executed]:
        workload = await prepare(config, offsets, genesis, quiet=quiet, part=part)
        part.ready()
        return workload, await execute(config, workload, timings, genesis.block_interval_ms / 1e3, part=part)

    workload, executed = uvloop.run(prepare_and_execute())
    part.save(timings, workload, executed, batch_size(config, offsets))


def write_run(config: GenConfig, genesis: Genesis, timings: Timings, ids: list[bytes], executed: Executed, *,
              target_tps: float, batch: int, started_utc: str, from_cache: bool,
              manifest_extra: dict[str, Any] | None = None) -> RunResult:
    """The run folder from what a run measured (one process's, or a fleet's merged)."""
    from qmemo.sysinfo import machine_info

    interrupted_at, node_stages, counters = executed.interrupted_at, executed.node_stages, executed.counters
    interrupted = interrupted_at is not None
    # A warm-up longer than half the run would leave nothing to measure: it is halved.
    summary = summarize(timings, warmup_s=min(config.warmup_s, config.duration_s / 2),
                        window_end_s=min(config.duration_s, interrupted_at or math.inf))
    file_summary = load_summary(summary, target_tps=target_tps, interrupted=interrupted,
                                block_interval_s=genesis.block_interval_ms / 1e3,
                                failover=counters.failover(executed.outcome_unknown.count(1),
                                                           unknown_resolutions(executed.outcome_unknown, timings)))
    file_summary = replace(file_summary, counts=replace(file_summary.counts, lost_reasons=counters.lost_reasons,
                                                        committed_late=counters.committed_late or None),
                           survival=survival(node_stages, summary.committed_tps),
                           generator_cpu_s=counters.cpu_s, agreement=executed.agreement, door=counters.door,
                           generator_cpu_us_per_tx=counters.cpu_s * 1e6 / counters.offered if counters.offered
                           else None)
    config.out.mkdir(parents=True, exist_ok=True)
    write(config.out / "summary.json", file_summary)
    write_node_stages(config.out / NODE_STAGES_FILE, node_stages)
    write_nodes(config.out / NODES_FILE, executed.nodes)
    write_transactions_csv(config.out / "transactions.csv", timings, ids)
    write_latency_histograms(config.out, summary)
    (config.out / "manifest.json").write_bytes(orjson.dumps({
        "config": _config_document(config), "genesis_hash": genesis.hash.hex(), "chain_id": genesis.chain_id,
        "block_interval_s": genesis.block_interval_ms / 1e3, "started_utc": started_utc,
        "workload_from_cache": from_cache, "follower_poll_s": FOLLOW_POLL_S,
        "batch_size": batch, "batch_window_s": sched.BATCH_WINDOW_S,
        "sender": to_json(counters), "node_verifiers": executed.verifiers,
        "commit_time_note": "committed = first seen by the block follower (up to one poll interval late)",
        "machine": machine_info(), **(manifest_extra or {}),
    }, option=orjson.OPT_INDENT_2))
    return RunResult(summary, target_tps, config.out, interrupted, file_summary)


def _config_document(config: GenConfig) -> dict[str, Any]:
    document = asdict(config)
    return {key: str(value) if isinstance(value, Path) else value for key, value in document.items()}


def write_transactions_csv(path: Path, timings: Timings, ids: list[bytes]) -> None:
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["index", "id", "intended_s", "sent_s", "accepted_s", "committed_s", "status", "reason"])
        for i in range(len(timings)):
            writer.writerow([i, ids[i].hex(), *(_cell(v[i]) for v in (timings.intended, timings.sent,
                                                                        timings.accepted, timings.committed)),
                             STATUS_NAMES[timings.status[i]], timings.reasons.get(i, "")])


def _cell(value: float) -> str:
    return "" if math.isnan(value) else f"{value:.6f}"


# --- sweep -------------------------------------------------------------------------------

def run_sweep(config: GenConfig, rates: list[float], stage_s: float, *, quiet: bool = False,
              on_stage: Callable[[str], None] | None = None, on_status: OnStatus | None = None,
              run_stage: Callable[[GenConfig], RunResult] | None = None) -> list[SweepRow]:
    """Constant-rate stages at every rate, past saturation too (what overload does is the
    point of the stages above it); writes sweep.json and sweep.csv. It stops early only on
    an interrupt, or when a stage's run raises (no summary): the rows so far are written,
    then the error goes on. `on_stage` gets each stage's label ("stage 1,500 TPS (2 of 4)")
    before it starts. `run_stage` runs one stage's config (default: this process's
    run_load; a generator fleet passes its own)."""
    genesis = load_genesis(config.genesis)
    rows: list[SweepRow] = []
    compared_to = config.agreement_from - 1
    try:
        for number, rate in enumerate(rates, 1):
            # Each stage compares the heights the stages before it did not.
            stage = replace(config, tps=rate, duration_s=stage_s, schedule=None, poisson=False,
                            out=config.out / f"stage-{rate:g}tps", agreement_from=compared_to + 1)
            if on_stage is not None:
                on_stage(f"stage {rate:,.0f} TPS ({number} of {len(rates)})")
            result = run_stage(stage) if run_stage is not None else \
                run_load(stage, quiet=quiet, genesis=genesis, on_status=on_status)
            rows.append(sweep_row(result.file_summary, result.out))
            if result.file_summary.agreement is not None:
                compared_to = max(compared_to, result.file_summary.agreement.to_height)
            if result.interrupted:
                break
    finally:
        config.out.mkdir(parents=True, exist_ok=True)
        write(config.out / "sweep.json", Sweep(SWEEP_SCHEMA, tuple(rows)))
        write_sweep_csv(config.out / "sweep.csv", rows)
    return rows


def write_sweep_csv(path: Path, rows: list[SweepRow]) -> None:
    """sweep.json's rows as a table. A latency nothing was measured for is null in JSON
    and "nan" in the CSV, as it always was (a spreadsheet reads it as not-a-number)."""
    with path.open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(SweepRow.__dataclass_fields__))
        writer.writeheader()
        writer.writerows({k: "nan" if v is None else v for k, v in to_json(row).items()} for row in rows)
