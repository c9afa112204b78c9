"""What the node answers: frozen values that the HTTP side (qmemo.net.wire) encodes.

The node decides *what* happened to a transaction or a block; it never builds a JSON
document or picks an HTTP status. A rejection carries its error, and the error carries
its status (qmemo.errors), so nobody re-derives 429 from a list of codes.

Never imports aiohttp or knows about HTTP.
"""

from __future__ import annotations

from dataclasses import dataclass

from qmemo.core.merkle import MerkleProof
from qmemo.errors import QmemoError

ACCEPTED = "accepted"
DUPLICATE = "duplicate"
REJECTED = "rejected"
TX_STATUSES = (ACCEPTED, DUPLICATE, REJECTED)


@dataclass(frozen=True, slots=True)
class TxOutcome:
    """What admission did with one transaction of a batch.

    `tx_id` is None when the bytes did not even decode; `error` is set exactly when
    `status` is REJECTED, and says why (its `code`) and how to answer (`http_status`)."""

    tx_id: bytes | None
    status: str
    error: QmemoError | None = None


@dataclass(frozen=True, slots=True)
class BlockAnswer:
    """What happened to a block a peer pushed."""

    status: str          # "accepted", "known", "kept_ours", "sync" (we fetch what it builds on)
    height: int


@dataclass(frozen=True, slots=True)
class TxStatus:
    """Where a transaction is: "pending", "queued", "committed" (with where, the
    inclusion proof, its block's confirmations and whether it is final), "evicted" (with
    the reason) or "unknown"."""

    tx_id: bytes
    status: str
    height: int | None = None
    position: int | None = None
    block_hash: bytes | None = None
    merkle_root: bytes | None = None
    proof: MerkleProof | None = None
    reason: str | None = None
    confirmations: int | None = None
    final: bool | None = None
