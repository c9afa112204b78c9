"""The node API's documents (docs/api.md) as frozen dataclasses: one schema for the node
that writes them and for every reader.

The node builds these values (qmemo.node.reporting: `/status`, `/metrics`; qmemo.node.queries:
a transaction's status) and qmemo.net.wire encodes them: field names are the documents'
keys, byte strings lowercase hex. Readers decode them here with the same classes: the
client (qmemo.net.client) what a node answers, and the tools that keep documents in files
(a scenario's metrics timeline, a run's nodes.json) what they stored. A renamed field then
fails where it is decoded, naming the key, not deep inside a report as a missing
dictionary key.

`/status` and `/metrics` name their format in "schema" ("qmemo-node-status/3"); a
reader refuses another version in one line (qmemo.records.decode) instead of
half-reading it. The other answers are small and checked key by key (a missing or
unknown key is a DecodeError naming its path).

The decoders are strict and fast where it matters: a block summary's transaction ids
(6,000 in a block at 3,000 TPS) are converted in one C-level `map`, never a Python call
per id.

Pure: imports only the records codec, the core's Merkle proof and the errors; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from qmemo.core.merkle import MerkleProof
from qmemo.errors import DecodeError
from qmemo.records import OMIT_NONE, decode, from_json

STATUS_SCHEMA = "qmemo-node-status/3"
METRICS_SCHEMA = "qmemo-node-metrics/3"

# --- GET /status ------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class PeerStatus:
    url: str
    reachable: bool
    height: int | None
    tip_hash: bytes | None
    error: str | None


@dataclass(frozen=True, slots=True)
class ShardFigures:
    """A shard's node (qmemo.core.shards): which shard of how many."""

    index: int
    count: int


@dataclass(frozen=True, slots=True)
class NodeStatus:
    """The `/status` document: who the node is, where its chain is, whom it sees."""

    schema: str
    node: str
    version: str
    chain_id: int
    genesis_hash: bytes
    height: int
    tip_hash: bytes | None
    tip_age_s: float
    final_height: int
    mempool: int
    mempool_held: int
    validator: int | None
    scheme: str
    block_interval_ms: int
    peers: tuple[PeerStatus, ...]
    uptime_s: float
    ready: bool
    shard: ShardFigures | None = field(default=None, metadata=OMIT_NONE)   # None: an unsharded chain


# --- GET /metrics -------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class MempoolFigures:
    count: int
    bytes: int
    held: int


@dataclass(frozen=True, slots=True)
class DoorFigures:
    """The door's bounds on client admission (qmemo.node.door) and what it refused."""

    pool_limit: int                   # pending + held at most: what the next blocks carry
    queue_bytes: int                  # client batch bytes inside admission now
    queue_limit_bytes: int | None     # the admission queue's bound (None: no rate measured yet)
    rate_bytes_s: float | None        # measured admission rate, bytes per busy second
    refused: dict[str, int]           # client requests refused 503 busy, by bound ("pool", "queue", "rate")
    refused_bytes: dict[str, int]
    cap_bytes_s: float | None = None  # the intake cap since a peer's block came late (None: no cap)
    intake_bytes_s: float | None = None     # client bytes admitted per second, smoothed


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


@dataclass(frozen=True, slots=True)
class CacheFigures:
    hits: int
    misses: int
    size: int


@dataclass(frozen=True, slots=True)
class KeyCacheFigures:
    """The fast Falcon verifier's decoded-key cache (all variants this process verified)."""

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
    # Descriptors the process has open (/proc/self/fd); None where there is no /proc to count them in.
    open_fds: int | None = field(default=None, metadata=OMIT_NONE)
    # Which life of the node this is: its process's id, and when the node started in it (Unix s,
    # on the node's clock). A restarted node is a new process; a restarted container may get its
    # old pid back, so a reader tells lives apart by both. None only in documents from nodes
    # that predate them.
    pid: int | None = field(default=None, metadata=OMIT_NONE)
    started_at_s: float | None = field(default=None, metadata=OMIT_NONE)
    # The resident set less its file-backed and shared pages (/proc/self/statm: resident -
    # shared): the heap and stacks. rss_bytes also counts the store's memory-mapped file
    # pages, page cache that grows with what the node reads (at most the map's size);
    # a leak shows here. None where there is no /proc, and from nodes that predate it.
    rss_anon_bytes: int | None = field(default=None, metadata=OMIT_NONE)


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
class StageFigure:
    cpu_s: float              # since start
    share: float | None       # of the process's CPU since start (stages and "other" add up to 1
                              # but for an overrun: then the stages alone add up to more)
    us_per_tx: float | None   # CPU per admitted transaction over the recent window
    txs: int                  # transactions the stage handled since start (0 for "other")


@dataclass(frozen=True, slots=True)
class StageFigures:
    """The `/metrics` document's `stages` object (qmemo.node.stages measures them)."""

    process_cpu_s: float
    accounted_cpu_s: float        # the sum of the stages
    overrun_cpu_s: float          # how far the stages exceed the process's CPU (0 unless they double count)
    window_s: float               # the span the per-transaction figures cover
    window_admitted: int          # transactions admitted in it
    us_per_tx: float | None       # the process's CPU per admitted transaction in it
    by_stage: dict[str, StageFigure]   # the node's stages in order, then "other"
    # Of "other"'s cpu_s, the part on the event loop's thread (aiohttp's parsing and socket
    # writes, the peer client, asyncio's scheduling, timers, the import at start); the rest
    # of "other" ran on the other threads (executor hand-offs, thread wake-ups).
    other_on_loop_cpu_s: float | None = None


@dataclass(frozen=True, slots=True)
class ReceiptFigures:
    """A shard's node: the cross-shard receipts it pulled, checked, pooled and credited."""

    bundles_pulled: int
    receipts_pulled: int
    bundles_admitted: int     # valid and new: pooled
    bundles_known: int        # pooled already, or credited already
    rejected: dict[str, int]  # bundles refused, by rule code
    pooled: int               # receipts waiting for a block
    credited: int             # receipts credited by the blocks on its chain
    pull_failures: int


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
    shard: ShardFigures | None = field(default=None, metadata=OMIT_NONE)
    receipts: ReceiptFigures | None = field(default=None, metadata=OMIT_NONE)
    door: DoorFigures | None = field(default=None, metadata=OMIT_NONE)   # None: written before nodes had a door


# --- the smaller answers ------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Health:
    """`GET /health` (200 when ready, 503 while the node starts or stops)."""

    ready: bool
    node: str


@dataclass(frozen=True, slots=True)
class AccountState:
    """`GET /account/{address}`, and each of `POST /accounts`' answers."""

    address: bytes
    balance: int
    nonce: int             # the next nonce the chain accepts (committed state)
    pending_nonce: int     # the next one counting the mempool: what a client signs next


@dataclass(frozen=True, slots=True)
class BlockSummary:
    """One block of `GET /blocks` or `GET /block/{height}` with `txs=ids` or `txs=none`
    (qmemo.net.wire.block_summary builds it from a block)."""

    height: int
    hash: bytes
    previous_hash: bytes
    timestamp_ms: int
    producer: int
    producer_name: str | None
    tx_count: int
    merkle_root: bytes
    # Its depth: blocks on top counting itself, and whether it can no longer be replaced.
    confirmations: int | None = field(default=None, metadata=OMIT_NONE)
    final: bool | None = field(default=None, metadata=OMIT_NONE)
    tx_ids: tuple[bytes, ...] | None = field(default=None, metadata=OMIT_NONE)   # None: asked with txs=none


# Where a transaction is (`TxStatus.status`).
PENDING = "pending"         # in the mempool, or being admitted
HELD = "held"           # held until its sender's earlier nonce arrives
COMMITTED = "committed"     # in a block of the node's chain
EVICTED = "evicted"         # dropped after admission (`reason` says why)
UNKNOWN = "unknown"
TX_STATES = (PENDING, HELD, COMMITTED, EVICTED, UNKNOWN)


@dataclass(frozen=True, slots=True)
class TxStatus:
    """`GET /tx/{id}`: where a transaction is; once committed with where, the inclusion
    proof (not in `POST /txs/status`' answers), its block's confirmations and whether it
    is final; once evicted with the reason. In JSON the id is `id`."""

    tx_id: bytes
    status: str
    height: int | None = field(default=None, metadata=OMIT_NONE)
    position: int | None = field(default=None, metadata=OMIT_NONE)
    block_hash: bytes | None = field(default=None, metadata=OMIT_NONE)
    merkle_root: bytes | None = field(default=None, metadata=OMIT_NONE)
    proof: MerkleProof | None = field(default=None, metadata=OMIT_NONE)
    reason: str | None = field(default=None, metadata=OMIT_NONE)
    confirmations: int | None = field(default=None, metadata=OMIT_NONE)
    final: bool | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True, slots=True)
class TxResult:
    """One transaction's outcome in a `POST /txs` answer, in input order: "accepted",
    "duplicate" or "rejected" with the rule's `code` and a sentence (`id` None: its bytes
    did not even decode)."""

    id: bytes | None
    status: str
    code: str | None = field(default=None, metadata=OMIT_NONE)
    detail: str | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True, slots=True)
class TxCounts:
    """How many of a batch's transactions had each outcome: `POST /peer/txs`' answer and the
    totals of `POST /txs`'."""

    accepted: int
    duplicate: int
    rejected: int


# Where a cross-shard receipt is on its destination shard (`ReceiptStatus.status`).
CREDITED = "credited"       # a block of the node's chain credited it (`final`: a final block)
POOLED = "pooled"           # verified, waiting for a block


@dataclass(frozen=True, slots=True)
class ReceiptStatus:
    """One receipt of `POST /receipts/status`' answer, in input order."""

    id: bytes
    status: str
    final: bool


def decode_receipt_statuses(document: Any, count: int, where: str = "/receipts/status") -> list[ReceiptStatus]:
    items = _list(document, "receipts", where)
    if len(items) != count:
        raise DecodeError(f"{where}: {len(items)} statuses for {count} ids", code="malformed")
    return [from_json(ReceiptStatus, item, f"{where}.receipts[{i}]") for i, item in enumerate(items)]


# --- decoding -------------------------------------------------------------------------------

def decode_status(document: Any, where: str = "/status") -> NodeStatus:
    return decode(NodeStatus, STATUS_SCHEMA, document, where, "a node's /status document")


def decode_metrics(document: Any, where: str = "/metrics") -> MetricsSnapshot:
    return decode(MetricsSnapshot, METRICS_SCHEMA, document, where, "a node's /metrics document")


def decode_health(document: Any, where: str = "/health") -> Health:
    return from_json(Health, document, where)


def decode_accounts(document: Any, where: str = "/accounts") -> list[AccountState]:
    return [from_json(AccountState, entry, f"{where}.accounts[{i}]")
            for i, entry in enumerate(_list(document, "accounts", where))]


def decode_tx_counts(document: Any, where: str = "/txs") -> TxCounts:
    """The totals of a `POST /txs` answer (its `results` are left as they are) or a
    `POST /peer/txs` answer."""
    if not isinstance(document, dict):
        raise DecodeError(f"{where}: expected an object, got {type(document).__name__}")
    return from_json(TxCounts, {key: document.get(key) for key in ("accepted", "duplicate", "rejected")}, where)


def decode_tx_results(document: Any, where: str = "/txs") -> list[TxResult]:
    """The per-transaction results of a `POST /txs` answer (its totals: `decode_tx_counts`)."""
    results = document.get("results") if isinstance(document, dict) else None
    if not isinstance(results, list):
        raise DecodeError(f"{where}: expected an object with a list of results")
    return [from_json(TxResult, entry, f"{where}.results[{i}]") for i, entry in enumerate(results)]


def decode_blocks(document: Any, where: str = "/blocks") -> list[BlockSummary]:
    return [decode_block(entry, f"{where}.blocks[{i}]") for i, entry in enumerate(_list(document, "blocks", where))]


def decode_block(document: Any, where: str = "/block") -> BlockSummary:
    """One block summary; its `tx_ids` converted in one pass of C code."""
    if not isinstance(document, dict):
        raise DecodeError(f"{where}: expected an object, got {type(document).__name__}")
    ids = document.get("tx_ids")
    if ids is None:
        return from_json(BlockSummary, document, where)
    if not isinstance(ids, list):
        raise DecodeError(f"{where}.tx_ids: expected a list, got {type(ids).__name__}")
    summary = from_json(BlockSummary, {**document, "tx_ids": []}, where)
    try:
        tx_ids = tuple(map(bytes.fromhex, ids))
    except (TypeError, ValueError):
        raise DecodeError(f"{where}.tx_ids: not a list of hex strings") from None
    return replace(summary, tx_ids=tx_ids)


def decode_tx_status(document: Any, where: str = "/tx") -> TxStatus:
    if not isinstance(document, dict):
        raise DecodeError(f"{where}: expected an object, got {type(document).__name__}")
    if "id" not in document or "tx_id" in document:
        raise DecodeError(f"{where}: a transaction status has an `id` (and no `tx_id`)")
    fields = {("tx_id" if key == "id" else key): value for key, value in document.items() if key != "proof"}
    status = from_json(TxStatus, fields, where)
    if status.status not in TX_STATES:
        raise DecodeError(f"{where}.status: {status.status!r} is none of {', '.join(TX_STATES)}")
    proof = document.get("proof")
    return status if proof is None else replace(status, proof=MerkleProof.from_json(proof))


def decode_tx_statuses(document: Any, count: int, where: str = "/txs/status") -> list[TxStatus]:
    """`POST /txs/status`' answer for `count` ids: one status each, in order."""
    statuses = _list(document, "statuses", where)
    if len(statuses) != count:
        raise DecodeError(f"{where}: {len(statuses)} statuses for {count} ids")
    return [decode_tx_status(entry, f"{where}.statuses[{i}]") for i, entry in enumerate(statuses)]


def _list(document: Any, key: str, where: str) -> list[Any]:
    """`document[key]`, a list, where the document holds nothing else."""
    if not isinstance(document, dict) or set(document) != {key} or not isinstance(document[key], list):
        raise DecodeError(f"{where}: expected {{\"{key}\": [...]}}")
    return document[key]
