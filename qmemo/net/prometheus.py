"""The node's metrics in Prometheus's text exposition format (version 0.0.4).

Rendered from the same `MetricsSnapshot` as the JSON `/metrics` document, plus the
cumulative buckets of the node's histograms (qmemo.node.reporting). Naming follows Prometheus's conventions: a `qmemo_`
prefix, base units (seconds, bytes) in the name, `_total` on counters, labels for
the split (path, stage, reason), and the standard `process_*` names for the process.

Hand-written rather than via prometheus-client: the node's counters are plain integers
bumped on the hot path, and a second set of client-library objects would double the
bookkeeping for a page polled every few seconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from qmemo.api_schema import MetricsSnapshot
from qmemo.node.metrics import Distribution
from qmemo.node.reporting import Histograms
from qmemo.node.stages import OTHER

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _escape(value: Any) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: Mapping[str, Any]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{key}="{_escape(value)}"' for key, value in labels.items()) + "}"


def _number(value: float | int | None) -> str:
    if value is None:
        return "NaN"
    if value == float("inf"):
        return "+Inf"
    return repr(float(value)) if isinstance(value, float) else str(value)


class Exposition:
    """Collects metric families and renders them, each with its HELP and TYPE once."""

    def __init__(self) -> None:
        self._lines: list[str] = []

    def family(self, name: str, kind: str, help_text: str,
               samples: Iterable[tuple[Mapping[str, Any], float | int | None]]) -> None:
        self._lines.append(f"# HELP {name} {help_text}")
        self._lines.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            self._lines.append(f"{name}{_labels(labels)} {_number(value)}")

    def scalar(self, name: str, kind: str, help_text: str, value: float | int | None) -> None:
        self.family(name, kind, help_text, [({}, value)])

    def by_label(self, name: str, kind: str, help_text: str, label: str, values: Mapping[str, Any]) -> None:
        self.family(name, kind, help_text, [({label: key}, value) for key, value in sorted(values.items())])

    def histogram(self, name: str, help_text: str, series: Iterable[tuple[Mapping[str, Any], Distribution]]) -> None:
        self._lines.append(f"# HELP {name} {help_text}")
        self._lines.append(f"# TYPE {name} histogram")
        for labels, distribution in series:
            for bound, count in distribution.cumulative():
                bucket_labels = {**labels, "le": _number(bound)}
                self._lines.append(f"{name}_bucket{_labels(bucket_labels)} {count}")
            self._lines.append(f"{name}_sum{_labels(labels)} {_number(distribution.total)}")
            self._lines.append(f"{name}_count{_labels(labels)} {distribution.count}")

    def render(self) -> str:
        return "\n".join(self._lines) + "\n"


def render(snapshot: MetricsSnapshot, histograms: Histograms) -> str:
    """The text page from a /metrics snapshot and the node's histograms."""
    out = Exposition()
    tx, verify, blocks = snapshot.tx, snapshot.verify, snapshot.blocks
    out.family("qmemo_node_info", "gauge", "Constant 1, labelled with the node's identity.",
               [({"node": snapshot.node, "chain_id": snapshot.chain_id, "scheme": snapshot.scheme,
                  "version": snapshot.version}, 1)])
    out.scalar("qmemo_uptime_seconds", "gauge", "Seconds since the node started.", snapshot.uptime_s)
    out.scalar("qmemo_chain_height", "gauge", "Height of the node's tip.", snapshot.height)
    out.scalar("qmemo_tip_age_seconds", "gauge", "Seconds since the tip's timestamp.", snapshot.tip_age_s)
    out.scalar("qmemo_mempool_transactions", "gauge", "Transactions pending in the mempool.",
               snapshot.mempool.count)
    out.scalar("qmemo_mempool_bytes", "gauge", "Bytes of the pending transactions' encodings.",
               snapshot.mempool.bytes)
    out.scalar("qmemo_mempool_held_transactions", "gauge",
               "Verified transactions held until an earlier nonce of their sender arrives.",
               snapshot.mempool.held)
    if snapshot.door is not None:
        door = snapshot.door
        out.scalar("qmemo_door_pool_limit_transactions", "gauge",
                   "Pending and held transactions past which client batches are refused busy.", door.pool_limit)
        out.scalar("qmemo_door_queue_bytes", "gauge", "Client batch bytes inside admission now.", door.queue_bytes)
        if door.queue_limit_bytes is not None:
            out.scalar("qmemo_door_queue_limit_bytes", "gauge",
                       "Client batch bytes in admission past which batches are refused busy.", door.queue_limit_bytes)
        out.by_label("qmemo_door_refused_total", "counter", "Client requests refused 503 busy, by bound.",
                     "bound", door.refused)
    out.scalar("qmemo_transactions_received_total", "counter", "Transactions received (clients and peers).",
               tx.received)
    out.scalar("qmemo_transactions_accepted_total", "counter", "Transactions admitted.", tx.accepted)
    out.scalar("qmemo_transactions_duplicate_total", "counter", "Transactions already known when received.",
               tx.duplicate)
    out.by_label("qmemo_transactions_rejected_total", "counter", "Transactions rejected, by reason.",
                 "reason", tx.rejected)
    out.scalar("qmemo_transactions_committed", "gauge",
               "Transactions in the blocks of the node's chain (drops if a fork switch undoes blocks).",
               tx.committed)
    out.by_label("qmemo_transactions_evicted_total", "counter", "Admitted transactions evicted, by reason.",
                 "reason", tx.evicted)
    out.scalar("qmemo_transactions_relayed_total", "counter", "Transactions relayed to peers (per peer).",
               tx.relayed)
    out.scalar("qmemo_verify_threads", "gauge", "Threads in the signature verification pool.", verify.threads)
    out.histogram("qmemo_signature_verify_duration_seconds",
                  "Duration of each signature verification, by path (admission, block).",
                  [({"path": path}, distribution) for path, distribution in sorted(histograms.verify.items())])
    out.scalar("qmemo_signature_verify_ops_per_second", "gauge",
               "Signature verifications per second over the last 10 s.", verify.ops_per_s)
    out.scalar("qmemo_signature_cache_hits_total", "counter",
               "Block transactions whose signature was already verified (at admission).", verify.cache.hits)
    out.scalar("qmemo_signature_cache_misses_total", "counter",
               "Block transactions whose signature had to be verified.", verify.cache.misses)
    out.family("qmemo_signature_verifier_info", "gauge",
               "Constant 1, labelled with the Falcon and ML-DSA verifier that runs (fast or liboqs).",
               [({"verifier": verify.verifier}, 1)])
    caches = sorted(verify.key_caches.items())
    out.family("qmemo_key_cache_keys", "gauge",
               "Public keys a fast verifier holds prepared (Falcon: decoded; ML-DSA: expanded), by scheme.",
               [({"scheme": name}, cache.size) for name, cache in caches])
    out.family("qmemo_key_cache_capacity_keys", "gauge", "How many keys a fast verifier's cache may hold, by scheme.",
               [({"scheme": name}, cache.capacity) for name, cache in caches])
    out.family("qmemo_key_cache_hits_total", "counter",
               "Fast verifies whose public key was already prepared, by scheme.",
               [({"scheme": name}, cache.hits) for name, cache in caches])
    out.family("qmemo_key_cache_misses_total", "counter", "Fast verifies that prepared their public key, by scheme.",
               [({"scheme": name}, cache.misses) for name, cache in caches])
    out.scalar("qmemo_blocks_produced_total", "counter", "Blocks this node produced.", blocks.produced)
    out.scalar("qmemo_blocks_received_total", "counter", "Blocks from peers applied.", blocks.received)
    out.by_label("qmemo_blocks_rejected_total", "counter", "Blocks from peers rejected, by rule.",
                 "reason", blocks.rejected_by_reason)
    out.by_label("qmemo_blocks_pushed_total", "counter",
                 "Our blocks' pushes to peers (attempted), by form: ids (rebuilt from the peer's pool) or whole.",
                 "form", {form: blocks.pushed[form] for form in ("ids", "whole")})
    out.scalar("qmemo_block_ids_missing_total", "counter",
               "Our blocks pushed as ids that the peer could not rebuild (it lacked a transaction, or "
               "answered 404: an earlier version); then sent whole.",
               blocks.pushed["missing"])
    out.scalar("qmemo_missed_slots_total", "counter",
               "Producer turns missed (a fallback validator produced instead).", blocks.missed_slots)
    out.scalar("qmemo_reorgs_total", "counter", "Switches to a better branch.", blocks.reorgs)
    out.histogram("qmemo_block_interval_seconds", "Time between a block's timestamp and its parent's.",
                  [({}, histograms.interval)])
    out.histogram("qmemo_block_validation_seconds",
                  "Time to validate a received block, by stage (decode, signatures, merkle, state, storage).",
                  [({"stage": stage}, distribution) for stage, distribution in histograms.validation.items()])
    out.histogram("qmemo_event_loop_lag_seconds", "How late a 50 ms timer on the event loop fires.",
                  [({}, histograms.loop_lag)])
    stages = [(name, figure) for name, figure in snapshot.stages.by_stage.items() if name != OTHER]
    # "other" is not a series: process_cpu_seconds_total minus the stages' sum is, and a
    # difference of two counters read a moment apart is no counter (it may step back).
    out.family("qmemo_stage_cpu_seconds_total", "counter",
               "CPU time spent in each stage of the node's pipeline (docs/api.md, stage costs).",
               [({"stage": name}, figure.cpu_s) for name, figure in stages])
    out.family("qmemo_stage_transactions_total", "counter", "Transactions each stage handled.",
               [({"stage": name}, figure.txs) for name, figure in stages])
    out.scalar("process_cpu_seconds_total", "counter", "User and system CPU time of the node process.",
               snapshot.process.cpu_seconds)
    out.scalar("process_resident_memory_bytes", "gauge", "Resident memory of the node process.",
               snapshot.process.rss_bytes)
    if snapshot.process.open_fds is not None:         # no /proc to count them in: no series, not a NaN
        out.scalar("process_open_fds", "gauge", "Open file descriptors of the node process.",
                   snapshot.process.open_fds)
    out.family("qmemo_event_loop_info", "gauge", "Constant 1, labelled with the event loop that runs the node "
               "(uvloop or asyncio).", [({"loop": snapshot.process.event_loop}, 1)])
    out.scalar("qmemo_network_received_bytes_total", "counter", "HTTP body bytes received (clients and peers).",
               snapshot.net.bytes_in)
    out.scalar("qmemo_network_transmitted_bytes_total", "counter", "HTTP body bytes sent (clients and peers).",
               snapshot.net.bytes_out)
    return out.render()
