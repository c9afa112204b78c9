"""BLAKE3-512: every digest in qMEMO, each under its own named domain.

Why domains: a transaction id, a Merkle leaf, a Merkle inner node and a block header
are all 64-byte digests. If they were hashed the same way, a value valid in one role
could be replayed in another (the classic leaf/node confusion in Merkle trees). Each
use therefore hashes with BLAKE3's derive_key mode under its own context string -
the mechanism BLAKE3 defines for domain separation - so equal inputs in two roles
give unrelated digests.

Why 64 bytes: BLAKE3 is an extendable-output function; 512 bits keeps collision
resistance at 256 bits against a quantum adversary (BHT), matching the post-quantum
signatures the chain carries.

This module is pure: no I/O, no state, nothing but the blake3 package (a pure hash, no
native signature library). It lives in the core, not in `qmemo.crypto`, because the
core hashes everything and must not load the scheme registry to do so;
`qmemo.crypto` re-exports its names for callers that sign and hash together.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum

from blake3 import blake3

from qmemo.errors import CryptoError

DIGEST_BYTES = 64


class Domain(Enum):
    """One BLAKE3 derive_key context per use; the strings are part of the protocol."""

    TX_SIGNING = "qMEMO v1 transaction signing digest"
    TX_ID = "qMEMO v1 transaction id"
    ADDRESS = "qMEMO v1 account address"
    MERKLE_LEAF = "qMEMO v1 merkle leaf"
    MERKLE_NODE = "qMEMO v1 merkle node"
    MERKLE_EMPTY = "qMEMO v1 merkle empty leaf"
    BLOCK_SIGNING = "qMEMO v1 block header signing digest"
    BLOCK_HASH = "qMEMO v1 block hash"
    GENESIS = "qMEMO v1 genesis"
    # The Merkle root mixes the leaf count into the top of the padded tree.
    MERKLE_ROOT = "qMEMO v1 merkle root"
    # Sharding (qmemo.core.shards, qmemo.core.receipts): a shard's genesis in a sharded
    # genesis, a cross-shard receipt's id, and a block's receipts section.
    GENESIS_SHARDED = "qMEMO v2 sharded genesis"
    RECEIPT_ID = "qMEMO v2 cross-shard receipt id"
    RECEIPTS_SECTION = "qMEMO v2 block receipts section"
    # Benchmarks and self-tests sign these; never a valid chain object.
    SELF_TEST = "qMEMO v1 self test"


# One keyed prototype per domain: copying it skips re-deriving the context key on every
# call, which halves the cost of the short digests the chain computes per transaction.
_PROTOTYPES = {domain: blake3(derive_key_context=domain.value) for domain in Domain}


def blake3_512(domain: Domain, *parts: bytes) -> bytes:
    """The 64-byte BLAKE3 digest of the concatenated `parts` under `domain`."""
    hasher = _PROTOTYPES[domain].copy()
    for part in parts:
        hasher.update(part)
    return hasher.digest(DIGEST_BYTES)


def split_digests(packed: bytes, start: int = 0, end: int | None = None) -> tuple[bytes, ...]:
    """The 64-byte digests laid end to end in `packed[start:end]` (a block's id list, as
    stored and as pushed), in order; the caller has checked the span is a whole number of them."""
    stop = len(packed) if end is None else end
    return tuple(packed[i:i + DIGEST_BYTES] for i in range(start, stop, DIGEST_BYTES))


def hasher_factory(domain: Domain) -> Callable[[], blake3]:
    """A function returning a fresh hasher under `domain`, for hot loops.

    `hasher_factory(d)()` followed by `update(...)` and `digest(DIGEST_BYTES)` gives the
    same bytes as `blake3_512(d, ...)`, without the per-call domain lookup.
    """
    return _PROTOTYPES[domain].copy


def blake3_xof(data: bytes, length: int, *, key: bytes | None = None,
               context: str | None = None) -> bytes:
    """Plain BLAKE3 in any of its three modes with any output length.

    Exposed so the tests can check our use of the library against the official BLAKE3
    test vectors (which cover hash, keyed_hash and derive_key with extended output).
    """
    if key is not None and context is not None:
        raise CryptoError("BLAKE3 takes a key or a derive_key context, not both", code="bad_hash_mode")
    if key is not None:
        hasher = blake3(data, key=key)
    elif context is not None:
        hasher = blake3(data, derive_key_context=context)
    else:
        hasher = blake3(data)
    return hasher.digest(length=length)
