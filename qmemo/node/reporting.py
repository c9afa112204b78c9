"""Status and metrics reports: frozen values read from a node's counters and chain.

`/status` and `/metrics` (docs/api.md) are the `NodeStatus` and `MetricsSnapshot` this
module fills in, encoded by qmemo.net.wire; their classes are qmemo.api_schema's, which
every reader decodes with too (one schema, writer and readers). qmemo.net.prometheus
renders the same `MetricsSnapshot` as text. Building a report only reads: it changes no counter.

Never imports aiohttp, builds JSON or knows about HTTP.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from qmemo import __version__
from qmemo.api_schema import (METRICS_SCHEMA, STATUS_SCHEMA, BlockFigures, CacheFigures, DoorFigures, IntervalFigures,
                              KeyCacheFigures, LagFigures, MempoolFigures, MetricsSnapshot, NetFigures, NodeStatus,
                              PeerStatus, ProcessFigures, ReceiptFigures, ShardFigures, TxFigures, VerifyFigures)
from qmemo.crypto.schemes import key_cache_stats, key_cache_stats_by_scheme
from qmemo.node.metrics import Distribution, open_fds, process_usage
from qmemo.node.stages import VERIFY, loop_other_ns, stage_figures, thread_cpu_ns

if TYPE_CHECKING:
    from qmemo.crypto.fast_verify import KeyCacheStats
    from qmemo.node.service import Node


@dataclass(frozen=True, slots=True)
class Histograms:
    """The cumulative distributions behind a snapshot (for the Prometheus page)."""

    verify: dict[str, Distribution]        # by path: admission, block
    interval: Distribution
    validation: dict[str, Distribution]    # by stage: decode, signatures, merkle, state, storage
    loop_lag: Distribution


def node_status(node: Node) -> NodeStatus:
    chain = node.chain
    return NodeStatus(
        schema=STATUS_SCHEMA, node=node.name, version=__version__, chain_id=node.genesis.chain_id, genesis_hash=node.genesis.hash,
        height=node.height, tip_hash=chain.hash_at(node.height) if chain else None, tip_age_s=round(node.tip_age_s(), 3),
        final_height=chain.final_height if chain else 0, mempool=len(node.ledger),
        mempool_held=node.ledger.sizes()[1], validator=node.validator_index,
        scheme=node.scheme_name(), block_interval_ms=node.genesis.block_interval_ms,
        peers=tuple(PeerStatus(v.url, v.reachable, v.height, v.tip_hash, v.error) for v in node.peer_views.values()),
        uptime_s=round(node.metrics.uptime_s(), 3), ready=node.ready, shard=_shard(node))


def _shard(node: Node) -> ShardFigures | None:
    sharding = node.genesis.sharding
    return ShardFigures(sharding.index, sharding.count) if sharding is not None else None


def _receipts(node: Node) -> ReceiptFigures | None:
    room = node.receipts
    if room is None:
        return None
    c = room.counters
    return ReceiptFigures(c.bundles_pulled, c.receipts_pulled, c.bundles_admitted, c.bundles_known, dict(c.rejected),
                          room.pooled_receipts, c.credited, c.pull_failures)


def metrics_snapshot(node: Node) -> MetricsSnapshot:
    m, v = node.metrics, node.metrics.verify
    chain = node.chain
    with v.lock:
        verify_count = dict(v.count)
        verify_seconds = dict(v.seconds)
        verify_cpu_ns = sum(v.cpu_ns.values())
        verify_job_count = v.job_count      # the signatures that CPU paid for (not block headers)
    stage_ns, stage_txs = m.stages.totals()
    stage_ns[VERIFY] += verify_cpu_ns
    stage_txs[VERIFY] += verify_job_count
    # After the stages: the loop's and the process's CPU include all they hold.
    on_loop = loop_other_ns(m.stages, thread_cpu_ns(), verify_cpu_ns if node.verify_pool.inline else 0)
    pending, held, pending_bytes, _, verified, *_ = node.ledger.sizes()
    cpu_s, rss, rss_anon = process_usage()
    lag = m.loop_lag.percentiles(0.5, 0.99)
    interval = m.block_interval.percentiles(0.5, 0.99)
    return MetricsSnapshot(
        schema=METRICS_SCHEMA, node=node.name, chain_id=node.genesis.chain_id, scheme=node.scheme_name(),
        version=__version__, time_s=node.clock() / 1000, uptime_s=m.uptime_s(), height=node.height,
        tip_hash=chain.hash_at(node.height) if chain else None, tip_age_s=node.tip_age_s(),
        mempool=MempoolFigures(pending, pending_bytes, held),
        tx=TxFigures(m.tx_received, m.tx_accepted, m.tx_duplicate, dict(m.tx_rejected), m.tx_committed,
                     dict(m.tx_evicted), m.relayed_txs, node.relay.dropped if node.relay else 0),
        verify=VerifyFigures(v.threads, verify_count, verify_seconds, v.latency_us(), v.ops_per_s(),
                             CacheFigures(v.cache_hits, v.cache_misses, verified),
                             node.verify_pool.verifier,
                             *(_key_caches() if node.verify_pool.verifier == "fast" else (None, {}))),
        blocks=BlockFigures(m.blocks_produced, m.blocks_received, sum(m.blocks_rejected.values()),
                            dict(m.blocks_rejected), m.missed_slots, m.reorgs,
                            {kind: m.blocks_pushed[kind] for kind in ("ids", "missing", "whole")},
                            IntervalFigures(m.last_block_interval_s, interval[0], interval[1]),
                            m.mean_validation_ms()),
        process=ProcessFigures(cpu_s, rss, event_loop_name(), open_fds(), os.getpid(), node.started_at_ms / 1000,
                               rss_anon),
        event_loop_lag_ms=LagFigures(_ms(lag[0]), _ms(lag[1]), _ms(m.loop_lag.max_recent())),
        net=NetFigures(m.bytes_in, m.bytes_out),
        stages=stage_figures(m.stages, stage_ns, stage_txs, cpu_s, m.tx_accepted, time.monotonic(), on_loop),
        shard=_shard(node), receipts=_receipts(node), door=_door(node))


def _door(node: Node) -> DoorFigures:
    door = node.door
    return DoorFigures(door.pool_limit, door.queue_bytes, door.queue_limit_bytes, door.rate_bytes_s,
                       dict(door.refused), dict(door.refused_bytes), door.cap_bytes_s, door.intake_bytes_s)


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
