"""Node API documents for tests: whole `qmemo.api_schema` values, as a node would write them,
with the figures a test varies given by name (a reader's test never hand-writes a partial
dictionary the node could not have sent)."""

from __future__ import annotations

from dataclasses import replace

from qmemo import api_schema
from qmemo.api_schema import METRICS_SCHEMA, STATUS_SCHEMA, MetricsSnapshot, NodeStatus, PeerStatus, StageFigure
from qmemo.node.stages import OTHER, STAGES, StageCPU, stage_figures

FAST_KEY_CACHE = api_schema.KeyCacheFigures(1, 4096, 7, 1, 0.875, ("Falcon-512",))


def node_status(**changes: object) -> NodeStatus:
    status = NodeStatus(schema=STATUS_SCHEMA, node="node-0", version="1", chain_id=7, genesis_hash=b"\xab" * 64,
                        height=2, tip_hash=b"\x01" * 64, tip_age_s=0.5, final_height=1, mempool=3, mempool_held=1,
                        validator=None, scheme="Falcon-512", block_interval_ms=2000,
                        peers=(PeerStatus("http://p", False, None, None, "ConnectionRefusedError"),),
                        uptime_s=1.0, ready=True)
    return replace(status, **changes)


def metrics_snapshot(node: str = "node-1", *, height: int = 4, accepted: int = 8, committed: int = 6,
                     verify_count: int = 8, verify_seconds: float = 0.001, cpu_seconds: float = 0.5,
                     latency_us: tuple[float | None, float | None] = (41.5, None), cache: tuple[int, int] = (2, 0),
                     verifier: str = "fast", key_cache: api_schema.KeyCacheFigures | None = FAST_KEY_CACHE,
                     stages_us_per_tx: dict[str, float] | None = None) -> MetricsSnapshot:
    """A snapshot with every kind of value the node writes: nested figures, maps, nulls, a
    tuple. `stages_us_per_tx`: each stage's µs per transaction (the others 0), else the
    figures of a real `stage_figures` call."""
    figures = stage_figures(StageCPU(started_monotonic=0.0, started_process_cpu_s=0.0), [1_000_000] * len(STAGES),
                            [2] * len(STAGES), process_cpu_s=0.05, admitted=10, now=1.0, other_on_loop_ns=5_000)
    if stages_us_per_tx is not None:
        figures = replace(figures, by_stage={name: StageFigure(1.0, 0.1, stages_us_per_tx.get(name, 0.0), 1)
                                             for name in (*STAGES, OTHER)})
    return MetricsSnapshot(
        schema=METRICS_SCHEMA, node=node, chain_id=7, scheme="Falcon-512", version="1", time_s=1795421450.6,
        uptime_s=12, height=height, tip_hash=None, tip_age_s=0.7,
        mempool=api_schema.MempoolFigures(42, 80_000, 1),
        tx=api_schema.TxFigures(accepted + 2, accepted, 1, {"bad_signature": 1}, committed, {}, 0, 0),
        verify=api_schema.VerifyFigures(1, {"admission": verify_count, "block": 0},
                                        {"admission": verify_seconds, "block": 0.0},
                                        {"p50": latency_us[0], "p99": latency_us[1]}, 0.6,
                                        api_schema.CacheFigures(*cache, 8), verifier, key_cache,
                                        {"Falcon-512": key_cache} if key_cache is not None else {}),
        blocks=api_schema.BlockFigures(2, 1, 0, {}, 0, 0, {"ids": 2, "missing": 0, "whole": 0},
                                       api_schema.IntervalFigures(2.0, 2.0, None), {"decode": 1.5, "state": None}),
        process=api_schema.ProcessFigures(cpu_seconds, 48_574_464, "uvloop", 17, 41_327, 1795421438.6, 31_457_280),
        event_loop_lag_ms=api_schema.LagFigures(0.5, 3.2, 4.0),
        net=api_schema.NetFigures(11_433, 17_709),
        stages=figures)
