"""Status and metrics reports: frozen values read from a node's counters and chain.

`/status` and `/metrics` (docs/api.md) are these values encoded by qmemo.net.wire, whose
field names are the documents' keys; qmemo.net.prometheus renders the same
`MetricsSnapshot` as text. Building a report only reads: it changes no counter.

Never imports aiohttp, builds JSON or knows about HTTP.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from qmemo import __version__
from qmemo.crypto.schemes import key_cache_stats, key_cache_stats_by_scheme
from qmemo.node.metrics import Distribution, process_usage
from qmemo.node.stages import VERIFY, StageFigures, loop_other_ns, stage_figures, thread_cpu_ns

if TYPE_CHECKING:
    from qmemo.crypto.fast_verify import KeyCacheStats
    from qmemo.node.service import Node

METRICS_SCHEMA = "qmemo-node-metrics/1"


@dataclass(frozen=True, slots=True)
class PeerStatus:
    url: str
    reachable: bool
    height: int | None
    tip_hash: bytes | None
    error: str | None


@dataclass(frozen=True, slots=True)
class NodeStatus:
    """The `/status` document: who the node is, where its chain is, whom it sees."""

    node: str
    version: str
    chain_id: int
    genesis_hash: bytes
    height: int
    tip_hash: bytes | None
    tip_age_s: float
    final_height: int
    mempool: int
    mempool_queued: int
    validator: int | None
    scheme: str
    block_interval_ms: int
    peers: tuple[PeerStatus, ...]
    uptime_s: float
    ready: bool


@dataclass(frozen=True, slots=True)
class MempoolFigures:
    count: int
    bytes: int
    queued: int


@dataclass(frozen=True, slots=True)
class TxFigures:
    received: int
    accepted: int
    duplicate: int
    rejected: dict[str, int]
    committed: int
    evicted: dict[str, int]
    relayed: int
    relay_dropped: int
    decodes_reused: int


@dataclass(frozen=True, slots=True)
class CacheFigures:
    hits: int
    misses: int
    size: int


@dataclass(frozen=True, slots=True)
class KeyCacheFigures:
    """A fast verifier's key cache (Falcon: decoded keys; ML-DSA: expanded keys), or the sum
    of the caches `schemes` names."""

    size: int
    capacity: int
    hits: int
    misses: int
    hit_rate: float | None
    schemes: tuple[str, ...]     # the variants whose caches these figures sum (one cache each)


@dataclass(frozen=True, slots=True)
class VerifyFigures:
    threads: int
    count: dict[str, int]
    seconds: dict[str, float]
    latency_us: dict[str, float | None]
    ops_per_s: float
    cache: CacheFigures
    verifier: str                       # Falcon's and ML-DSA's verifier: "fast" or "liboqs"
    key_cache: KeyCacheFigures | None   # the caches in use; None: no fast verifier has run in this process
    key_caches: dict[str, KeyCacheFigures]  # each fast verifier's cache looked up, by scheme ({} with liboqs)


@dataclass(frozen=True, slots=True)
class IntervalFigures:
    last: float | None
    p50: float | None
    p99: float | None


@dataclass(frozen=True, slots=True)
class BlockFigures:
    produced: int
    received: int
    rejected: int
    rejected_by_reason: dict[str, int]
    missed_slots: int
    reorgs: int
    pushed: dict[str, int]          # our blocks pushed to peers: "ids", "missing" (of those), "whole"
    interval_s: IntervalFigures
    validation_ms: dict[str, float | None]


@dataclass(frozen=True, slots=True)
class ProcessFigures:
    cpu_seconds: float
    rss_bytes: int
    event_loop: str     # the loop running the node: "uvloop" or "asyncio" (its class says, not the config)


@dataclass(frozen=True, slots=True)
class LagFigures:
    p50: float | None
    p99: float | None
    max: float | None


@dataclass(frozen=True, slots=True)
class NetFigures:
    bytes_in: int
    bytes_out: int


@dataclass(frozen=True, slots=True)
class MetricsSnapshot:
    """The `/metrics` document: counters since start, percentiles of the recent samples."""

    schema: str
    node: str
    chain_id: int
    scheme: str
    version: str
    time_s: float
    uptime_s: float
    height: int
    tip_hash: bytes | None
    tip_age_s: float
    mempool: MempoolFigures
    tx: TxFigures
    verify: VerifyFigures
    blocks: BlockFigures
    process: ProcessFigures
    event_loop_lag_ms: LagFigures
    net: NetFigures
    stages: StageFigures


@dataclass(frozen=True, slots=True)
class Histograms:
    """The cumulative distributions behind a snapshot (for the Prometheus page)."""

    verify: dict[str, Distribution]        # by path: admission, block
    interval: Distribution
    validation: dict[str, Distribution]    # by stage: decode, signatures, merkle, state, storage
    loop_lag: Distribution


def node_status(node: Node) -> NodeStatus:
    chain, admission = node.chain, node.admission
    return NodeStatus(
        node=node.name, version=__version__, chain_id=node.genesis.chain_id, genesis_hash=node.genesis.hash,
        height=node.height, tip_hash=chain.hash_at(node.height) if chain else None, tip_age_s=round(node.tip_age_s(), 3),
        final_height=chain.final_height if chain else 0, mempool=len(node.mempool),
        mempool_queued=len(admission.future) if admission else 0, validator=node.validator_index,
        scheme=node.scheme_name(), block_interval_ms=node.genesis.block_interval_ms,
        peers=tuple(PeerStatus(v.url, v.reachable, v.height, v.tip_hash, v.error) for v in node.peer_views.values()),
        uptime_s=round(node.metrics.uptime_s(), 3), ready=node.ready)


def metrics_snapshot(node: Node) -> MetricsSnapshot:
    m, v = node.metrics, node.metrics.verify
    chain, admission = node.chain, node.admission
    with v.lock:
        verify_count = dict(v.count)
        verify_seconds = dict(v.seconds)
        verify_cpu_ns = sum(v.cpu_ns.values())
        verify_job_count = v.job_count      # the signatures that CPU paid for (not block headers)
    stage_ns, stage_txs = m.stages.totals()
    stage_ns[VERIFY] += verify_cpu_ns
    stage_txs[VERIFY] += verify_job_count
    # After the stages: the loop's and the process's CPU include all they hold.
    on_loop = loop_other_ns(m.stages, thread_cpu_ns(), verify_cpu_ns if node.pool.inline else 0)
    cpu_s, rss = process_usage()
    lag = m.loop_lag.percentiles(0.5, 0.99)
    interval = m.block_interval.percentiles(0.5, 0.99)
    return MetricsSnapshot(
        schema=METRICS_SCHEMA, node=node.name, chain_id=node.genesis.chain_id, scheme=node.scheme_name(),
        version=__version__, time_s=node.clock() / 1000, uptime_s=m.uptime_s(), height=node.height,
        tip_hash=chain.hash_at(node.height) if chain else None, tip_age_s=node.tip_age_s(),
        mempool=MempoolFigures(len(node.mempool), node.mempool.size_bytes, len(admission.future) if admission else 0),
        tx=TxFigures(m.tx_received, m.tx_accepted, m.tx_duplicate, dict(m.tx_rejected), m.tx_committed,
                     dict(m.tx_evicted), m.relayed_txs, node.relay.dropped if node.relay else 0,
                     node.decoded.reused),
        verify=VerifyFigures(v.threads, verify_count, verify_seconds, v.latency_us(), v.ops_per_s(),
                             CacheFigures(v.cache_hits, v.cache_misses, len(node.pool.cache)),
                             node.pool.verifier.verifier,
                             *(_key_caches() if node.pool.verifier.verifier == "fast" else (None, {}))),
        blocks=BlockFigures(m.blocks_produced, m.blocks_received, sum(m.blocks_rejected.values()),
                            dict(m.blocks_rejected), m.missed_slots, m.reorgs,
                            {kind: m.blocks_pushed[kind] for kind in ("ids", "missing", "whole")},
                            IntervalFigures(m.last_block_interval_s, interval[0], interval[1]),
                            m.mean_validation_ms()),
        process=ProcessFigures(cpu_s, rss, event_loop_name()),
        event_loop_lag_ms=LagFigures(_ms(lag[0]), _ms(lag[1]), _ms(m.loop_lag.max_recent())),
        net=NetFigures(m.bytes_in, m.bytes_out),
        stages=stage_figures(m.stages, stage_ns, stage_txs, cpu_s, m.tx_accepted, time.monotonic(), on_loop))


def event_loop_name() -> str:
    """"uvloop" or "asyncio": which loop runs the caller (a test's node runs on pytest's)."""
    return "uvloop" if type(asyncio.get_running_loop()).__module__.startswith("uvloop") else "asyncio"


def _key_caches() -> tuple[KeyCacheFigures | None, dict[str, KeyCacheFigures]]:
    """The fast verifiers' caches in use (one family's: a node verifies one scheme), and each by scheme."""
    def figures(stats: KeyCacheStats) -> KeyCacheFigures:
        return KeyCacheFigures(stats.size, stats.capacity, stats.hits, stats.misses, stats.hit_rate, stats.schemes)

    in_use = key_cache_stats(family=None)
    return (figures(in_use) if in_use else None,
            {name: figures(stats) for name, stats in sorted(key_cache_stats_by_scheme().items())
             if stats.hits + stats.misses})


def histograms(node: Node) -> Histograms:
    m = node.metrics
    return Histograms(m.verify.latency, m.block_interval, m.validation, m.loop_lag)


def _ms(value_s: float | None) -> float | None:
    return value_s * 1e3 if value_s is not None else None
