"""Admission: from a request body to the pool, one path for every batch, per batch in Python.

Every body becomes the admission kernel's records at the edge: a binary batch (POST /txs,
/peer/txs, the journal at start) as it is, a JSON one framed first (`frame_items`). From
there, in clear phases that per-stage timing wraps:

  decode+hash  `decode`: one kernel call frames, decodes and hashes the body (ids, signing
               digests, senders), the GIL released; nothing in the pool changes;
  checks       `Admission.admit` -> the ledger's `precheck`: duplicates (pending, held, in
               flight, recently committed), the chain's form rules, nonce and balance
               feasibility against the tip and the pool; survivors are in flight;
  verify       the survivors' signatures in the verify pool's threads (qmemo.node.verify_pool),
               the GIL released; ids verified before are hits;
  mempool      the ledger's `commit`: in input order each joins the pool, is held for a
               nonce gap, or is refused; the accepted ones' frames (for the journal) and
               the relayed ones' frames come back in one buffer each.

The rules, their order and their codes are qmemo.core.pool's (the reference; the node's
ledger runs them in C: qmemo.node.ledger). A held transaction - its nonce ahead of its
sender's next pending one, within `held_window` - joins the pool when the gap fills, or is
evicted `nonce_gap_timeout` after `held_ttl_s`; an eviction is reported with its reason in
/tx/{id} and the metrics: nothing accepted is dropped silently.

Per transaction this module does nothing in Python: it acts once per batch (its outcomes
are read back as counts, and as objects only for the rare refusals and the JSON routes).
Never imports aiohttp or knows about HTTP.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from qmemo.core.genesis import Genesis
from qmemo.crypto.admit_kernel import AdmitKernel
from qmemo.errors import DecodeError, QmemoError, TooLarge
from qmemo.frames import encode_frames
from qmemo.node.answers import ACCEPTED, DUPLICATE, REJECTED, Item, TxOutcome
from qmemo.node.ledger import PoolLimits, native, outcome_error, reason_name
from qmemo.node.metrics import NodeMetrics
from qmemo.node.stages import DECODE_HASH, MEMPOOL, thread_cpu_ns
from qmemo.node.verify_pool import VerifyPool

# What the kernel's framing codes mean (qmemo_admit.h, enum qmemo_admit_rc).
_FRAME_TRUNCATED_PREFIX, _FRAME_PAST_BODY, _FRAME_TOO_MANY = 1, 2, 3
_STATUS_NAMES = {1: ACCEPTED, 2: DUPLICATE, 3: REJECTED}


@dataclass(slots=True)
class Admitted:
    """A batch's result: the ledger's batch (its outcomes), and the accepted transactions'
    frames for the journal."""

    batch: Any                 # _qmemo_ledger.AdmitBatch
    journal_frames: bytes
    journal_count: int
    genesis: Genesis

    def __len__(self) -> int:
        return self.batch.count

    def counts(self) -> dict[str, int]:
        """How many of each status (POST /peer/txs' answer, the totals of POST /txs')."""
        accepted, duplicate, rejected = self.batch.counts()
        return {ACCEPTED: accepted, DUPLICATE: duplicate, REJECTED: sum(rejected.values())}

    def errors(self) -> dict[int, QmemoError]:
        """The error of each refused transaction, by position."""
        return {position: outcome_error(self.batch, position, code, a, b, self.genesis)
                for position, code, a, b in self.batch.rejections()}

    def answer_json(self) -> bytes:
        """The POST /txs answer (qmemo.net.wire.encode_tx_results's document), built in C;
        only refused transactions' sentences are made here."""
        details = {position: orjson.dumps(error.detail) for position, error in self.errors().items()}
        return self.batch.answer_json(details)

    def outcomes(self) -> list[TxOutcome]:
        """One outcome per transaction, as objects (the JSON routes and tests)."""
        errors = self.errors()
        statuses = self.batch.statuses()
        return [TxOutcome(self.batch.tx_id(i), _STATUS_NAMES[statuses[i]], errors.get(i))
                for i in range(self.batch.count)]


def frame_items(items: Sequence[Item]) -> tuple[bytes, list[int], dict[int, DecodeError]]:
    """A JSON batch's items as a binary body: the framed encodings of its transactions, the
    position each had among the items, and the items that did not even decode."""
    encodings: list[bytes] = []
    positions: list[int] = []
    failed: dict[int, DecodeError] = {}
    for position, item in enumerate(items):
        if isinstance(item, DecodeError):
            failed[position] = item
        else:
            encodings.append(item if isinstance(item, bytes) else item.encoded)
            positions.append(position)
    return encode_frames(encodings), positions, failed


class Admission:
    """The pool side of a node: admits batches into the ledger's pool."""

    def __init__(self, genesis: Genesis, ledger: Any, kernel: AdmitKernel, pool: VerifyPool, metrics: NodeMetrics,
                 limits: PoolLimits, relay: Callable[[bytes, int], None] | None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.genesis = genesis
        self.ledger = ledger
        self.kernel = kernel
        self.verify_pool = pool
        self.metrics = metrics
        self.limits = limits
        self._relay = relay
        self._monotonic = monotonic

    # --- queries ------------------------------------------------------------------------------

    def is_full(self, relayed: bool = False) -> bool:
        """No room for a client's batch, or (`relayed`) for a peer's relay (PoolLimits)."""
        pending, _, pending_bytes, *_ = self.ledger.sizes()
        if relayed:
            return pending >= self.limits.relay_max_txs or pending_bytes >= self.limits.relay_max_bytes
        return pending >= self.limits.max_txs or pending_bytes >= self.limits.max_bytes

    def pending_count(self) -> int:
        """Transactions in the pending pool (held ones not counted)."""
        return self.ledger.sizes()[0]

    def pending_nonce(self, address: bytes) -> int:
        return self.ledger.pending_nonce(address)

    def pending_status(self, tx_id: bytes) -> str | None:
        """"pending", "held" (waiting for a nonce gap), "evicted:<reason>" or None."""
        kind, reason = self.ledger.status(tx_id)
        if kind == 1:
            return "pending"
        if kind == 2:
            return "held"
        return f"evicted:{reason_name(reason)}" if kind == 3 else None

    def unsettled(self) -> tuple[bytes, int]:
        """Accepted but not yet in a block, framed: the pending pool, then the held ones."""
        return self.ledger.unsettled()

    # --- admitting ------------------------------------------------------------------------------

    def decode(self, body: bytes, max_count: int, relayed: bool = False) -> Any:
        """Phase decode+hash: the kernel's records of a binary body (`relayed`: a peer's relay,
        or transactions this node took already; judged against the relay caps). DecodeError /
        TooLarge for a broken framing (as qmemo.frames.decode_frames), before anything is counted."""
        started = thread_cpu_ns()
        try:
            batch = self.ledger.admit(self.kernel.table, body, max_count, relayed)
            self.metrics.stages.lap(DECODE_HASH, started, batch.count)
            return batch
        except native().FramingError as exc:
            self.metrics.stages.lap(DECODE_HASH, started)
            rc, index, detail = exc.args
            if rc == _FRAME_TOO_MANY:
                raise TooLarge(f"more than {max_count} transactions in one batch", code="batch_too_large") from None
            if rc == _FRAME_TRUNCATED_PREFIX:
                raise DecodeError(f"transaction {index}: truncated length prefix", code="truncated") from None
            if rc == _FRAME_PAST_BODY:
                raise DecodeError(f"transaction {index}: length runs {detail} bytes past the body",
                                  code="truncated") from None
            raise ValueError(f"the admission kernel refused its arguments (rc {rc})") from None

    async def admit(self, batch: Any, *, relay: bool) -> Admitted:
        """Check, verify and commit a decoded batch. `relay`: it came from a client, so what
        is accepted goes on to the peers (held ones when they join the pool) - if there are
        peers: a node without (`relay` None at construction) builds no relay buffers."""
        relay = relay and self._relay is not None
        metrics, ledger, stages = self.metrics, self.ledger, self.metrics.stages
        metrics.tx_received += batch.count
        started = thread_cpu_ns()
        ledger.precheck(batch)
        stages.lap(MEMPOOL, started, batch.count)
        try:
            if batch.candidates:
                await self.verify_pool.verify_batch(batch, "admission")
        except BaseException:
            ledger.abandon(batch)
            raise
        started = thread_cpu_ns()
        frames, count, relay_frames, relay_count, evicted = ledger.commit(batch, self._monotonic(), relay)
        accepted, duplicate, rejected = batch.counts()
        metrics.tx_accepted += accepted
        metrics.tx_duplicate += duplicate
        for code, n in rejected.items():
            metrics.tx_rejected[code] += n
        self._count_evictions(evicted)
        stages.lap(MEMPOOL, started)
        if relay_count and self._relay is not None:
            self._relay(relay_frames, relay_count)
        return Admitted(batch, frames, count, self.genesis)

    # --- keeping the pool in step with the chain -----------------------------------------------

    def block_applied(self, body: Any) -> None:
        """A block joined the chain: drop what it committed, evict what it made stale,
        release held transactions whose gap it filled (relayed on if a client sent them)."""
        evicted, relay_frames, relay_count = self.ledger.block_applied(body, self._monotonic())
        self._count_evictions(evicted)
        if relay_count and self._relay is not None:
            self._relay(relay_frames, relay_count)

    def blocks_undone(self, bodies: list[Any]) -> None:
        """A fork switch undid blocks: their transactions are pending again (before the
        pending ones of the same senders, whose nonces follow theirs)."""
        if bodies:
            self._count_evictions(self.ledger.blocks_undone(bodies))

    def expire_held(self) -> None:
        self._count_evictions(self.ledger.expire_held(self._monotonic() - self.limits.held_ttl_s))

    def _count_evictions(self, evicted: list[tuple[bytes, int]]) -> None:
        for _, reason in evicted:
            self.metrics.tx_evicted[reason_name(reason)] += 1
