"""The one error hierarchy of qMEMO.

Every error qMEMO raises on purpose derives from `QmemoError`, so a boundary (the CLI,
an HTTP handler) can catch that one class, print or answer one clear line, and let
anything else - a real bug - surface as such.

Like h11's LocalProtocolError/RemoteProtocolError, each error knows the HTTP status a
server should answer with and a short machine-readable `code`, so handlers never
re-derive them. An HTTP error body is `{"error": code, "detail": str(error)}`.

This module must import nothing from qmemo: everything else imports it.
"""

from __future__ import annotations

from typing import Self


class QmemoError(Exception):
    """Base of every error qMEMO raises deliberately."""

    code: str = "error"
    http_status: int = 500

    def __init__(self, detail: str, *, code: str | None = None) -> None:
        super().__init__(detail)
        if code is not None:
            self.code = code

    @property
    def detail(self) -> str:
        return str(self)

    def to_json(self) -> dict[str, str]:
        return {"error": self.code, "detail": self.detail}

    def detached(self) -> Self:
        """This error, without its traceback or the errors it was raised from: for an error
        kept as a value (a rejected transaction's outcome). Its traceback would hold the
        frames that raised it, and their locals - often the very list that holds the
        outcome: a reference cycle that keeps a whole request alive until the cycle
        collector runs. What it keeps (code, detail, status) is all an answer needs."""
        self.__traceback__ = None
        self.__context__ = None
        self.__cause__ = None
        return self


# --- our own mistakes -----------------------------------------------------------------

class Misuse(QmemoError):
    """We called our own code wrongly: a bug on this side, never the client's or the
    peer's fault (h11's LocalProtocolError). A client that meets one gets a 500, not a
    4xx telling it to fix a request that was fine; `code` names the broken precondition."""

    code = "internal_misuse"
    http_status = 500


# --- setup and environment ----------------------------------------------------------

class SetupError(QmemoError):
    """The environment is not ready (a native library missing, a build not done)."""

    code = "setup"
    http_status = 503


class LiboqsNotFound(SetupError):
    """liboqs is not where the setup installs it; we refuse to let liboqs-python fetch it."""

    code = "liboqs_not_found"


class NonConformingVerifier(SetupError):
    """A verifier gives a verdict the standards' known answers do not (qmemo.crypto.conformance)."""

    code = "nonconforming_verifier"


class BenchmarkError(QmemoError):
    """A benchmark could not be built or run to completion (its log says why)."""

    code = "benchmark"
    http_status = 500


# --- cryptography -------------------------------------------------------------------

class CryptoError(QmemoError):
    """Misuse of the signature layer: unknown scheme, malformed key material."""

    code = "crypto"
    http_status = 400


class UnknownScheme(CryptoError):
    code = "unknown_scheme"


class MalformedKey(CryptoError):
    """A key of the wrong length or form was handed to sign/verify."""

    code = "malformed_key"


class KeyFileError(CryptoError):
    """A key file could not be read: missing, unreadable, or not in the documented format."""

    code = "key_file"


# --- input from a peer or a client --------------------------------------------------

class DecodeError(QmemoError):
    """Bytes or JSON that do not decode to a well-formed object (short, trailing, out of range)."""

    code = "malformed"
    http_status = 400


class InvalidTransaction(QmemoError):
    """A well-formed transaction that breaks a rule (bad signature, nonce, balance...)."""

    code = "invalid_transaction"
    http_status = 422


class InvalidBlock(QmemoError):
    """A block that breaks a consensus rule; `code` names the rule."""

    code = "invalid_block"
    http_status = 422


class InvalidReceipt(QmemoError):
    """A cross-shard receipt that breaks a rule (qmemo.core.receipts); `code` names the rule."""

    code = "invalid_receipt"
    http_status = 422


class ConfigError(QmemoError):
    """A configuration, genesis or command-line value that cannot be used."""

    code = "config"
    http_status = 400


class MempoolFull(QmemoError):
    """No room for a transaction now (the pool, or this sender's share of it): retry later.

    `code` says which limit: "mempool_full" (count or bytes) or "sender_limit".
    """

    code = "mempool_full"
    http_status = 429


class StoreError(QmemoError):
    """The chain store cannot be used: another chain's data, an unknown format, damage."""

    code = "store"
    http_status = 503


# --- the node's HTTP boundary ----------------------------------------------------------

class TooLarge(DecodeError):
    """A request body, or a batch inside it, over the documented limit."""

    code = "too_large"
    http_status = 413


class SlowBody(DecodeError):
    """A request body that did not arrive within the node's `body_timeout_s` (the answer
    closes the connection: the rest of the body may still be on its way)."""

    code = "body_timeout"
    http_status = 408


class NotFound(QmemoError):
    """Asked for a block, transaction or route the node does not have."""

    code = "not_found"
    http_status = 404


class NodeNotReady(QmemoError):
    """The node cannot serve this yet (starting up, or shutting down)."""

    code = "not_ready"
    http_status = 503


class NodeBehind(NodeNotReady):
    """The node knows its chain is behind its peers' (a peer showed a final height above
    ours by more than a few blocks, or the node was paused and has not heard its peers
    since): it refuses client transactions rather than judge them against a stale state
    (a `nonce_gap` that is only ours). A client retries on another node."""

    code = "behind"
    http_status = 503


class NodeBusy(NodeNotReady):
    """The node's door is full (qmemo.node.door): a client batch it would take past what its
    next blocks carry, or past what it admits in a moment at its measured rate. Refused
    before its body was read; `retry_after_ms` says when to send it again, unchanged."""

    code = "busy"
    http_status = 503

    def __init__(self, detail: str, retry_after_ms: int) -> None:
        super().__init__(detail)
        self.retry_after_ms = retry_after_ms

    def to_json(self) -> dict[str, str]:
        return {**super().to_json(), "retry_after_ms": self.retry_after_ms}   # type: ignore[dict-item]


class PeerError(QmemoError):
    """A peer did not answer, or answered something we cannot use: the peer's side
    (h11's RemoteProtocolError), never a rule we broke."""

    code = "peer"
    http_status = 502


class PeerRefused(PeerError):
    """A peer answered and refused what we sent (our block): its complaint, in its words.

    Kept apart from `InvalidBlock`/`DecodeError`, which mean *we* were handed something
    bad and answer 422/400: a peer's verdict on our block is news from the peer, not a
    rule this node saw broken. `code` stays ours ("peer_refused", and the 502 of every
    peer failure), so whoever catches it sees one kind of error; the peer's own words are
    kept apart: `peer_code` (its error code, e.g. "wrong_producer") and `peer_status`.
    """

    code = "peer_refused"

    def __init__(self, detail: str, *, peer_code: str, peer_status: int) -> None:
        super().__init__(detail)
        self.peer_code = peer_code
        self.peer_status = peer_status


# --- a node's API, as its clients see it ---------------------------------------------------

class NodeApiError(QmemoError):
    """A node did not answer as docs/api.md says (qmemo.net.client): its side, or the path
    between us, never a rule the caller broke. The message names the node and the route.
    `code` "unreadable": it answered 200 with a body that is not the documented document
    (another version of qMEMO: the message names the schema it found)."""

    code = "node_api"
    http_status = 502


class NodeUnreachable(NodeApiError):
    """No answer: connection refused or reset, or no answer in time (a node that is down,
    paused, or behind a cut link). `transport` names the transport's own error class;
    `request_left` says whether the request may have reached the node (False: the
    connection was never made, so the node cannot have acted on it)."""

    code = "unreachable"

    def __init__(self, detail: str, *, transport: str, request_left: bool = True) -> None:
        super().__init__(detail)
        self.transport = transport
        self.request_left = request_left


class NodeRefused(NodeApiError):
    """The node answered with an error status: its own `{"error", "detail"}` kept apart
    (`node_code`, `node_status`), as `PeerRefused` keeps a peer's."""

    code = "refused"

    def __init__(self, detail: str, *, node_code: str, node_status: int) -> None:
        super().__init__(detail)
        self.node_code = node_code
        self.node_status = node_status
