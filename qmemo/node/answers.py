"""What the node takes in and answers: the values the HTTP side (qmemo.net.wire) decodes
into and encodes from.

The node decides *what* happened to a transaction or a block; it never builds a JSON
document or picks an HTTP status. A rejection carries its error, and the error carries
its status (qmemo.errors), so nobody re-derives 429 from a list of codes.

Never imports aiohttp or knows about HTTP, and nothing of the node's machinery
(admission, store, verify pool): qmemo.net.wire imports this module, and wire must stay
a pure codec that loads no sqlite3 or asyncio.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

# A transaction's status is a document readers decode too: its class lives with the API's
# schemas, and the node's rooms name it here with the rest of what the node answers.
from qmemo.api_schema import TxStatus
from qmemo.core.transaction import Transaction
from qmemo.errors import DecodeError, Misuse, QmemoError

__all__ = ["ACCEPTED", "DUPLICATE", "REJECTED", "TX_STATUSES", "BlockAnswer", "Item", "TxOutcome", "TxStatus"]

# What a request hands in: raw canonical encodings (binary batches), decoded transactions
# (JSON), or the error a JSON element gave when it was decoded.
Item = bytes | Transaction | DecodeError

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

    def __post_init__(self) -> None:
        # Handlers answer a rejection with `error`'s status and count it by `error.code`:
        # an outcome breaking the rule would answer 200 for a rejection, or crash the count.
        if (self.error is None) is (self.status == REJECTED) or self.status not in TX_STATUSES:
            raise Misuse(f"a {self.status!r} outcome {'without' if self.error is None else 'with'} an error",
                         code="bad_outcome")


class BlockStatus(str, Enum):
    """What happened to a block a peer pushed (the wire carries the value)."""

    ACCEPTED = "accepted"      # applied (a branch switch included)
    KNOWN = "known"            # we hold it already
    KEPT_OURS = "kept_ours"    # valid, on a branch the fork-choice rule does not prefer
    SYNC = "sync"              # we lack what it builds on: we fetch it from the peers
    MISSING = "missing"        # pushed as its ids, and we lack a transaction: send it whole


@dataclass(frozen=True, slots=True)
class BlockAnswer:
    """What happened to a block a peer pushed."""

    status: BlockStatus
    height: int
