"""Blocks: the signed header, its digests, and the block's binary and JSON forms.

Header encoding (little-endian; docs/protocol.md, "Blocks"):

    offset  size  field
    0       1     version            (1)
    1       4     chain_id           u32
    5       8     height             u64 (the genesis is height 0; the first block is 1)
    13      64    previous_hash      the parent's block hash (height 1: the genesis hash)
    77      8     timestamp_ms       u64, Unix milliseconds
    85      2     producer_index     u16, index into the genesis validator list
    87      4     tx_count           u32
    91      64    merkle_root        qmemo.core.merkle.merkle_root of the transaction ids
    ------  end of the unsigned header (155 bytes)
    155     2     signature_length   u16
    157     sl    signature          the producer's, over the signing digest

- signing digest = H(BLOCK_SIGNING, unsigned header)
- block hash     = H(BLOCK_HASH, signed header): it covers the signature, so a block
  is named by exactly the bytes its producer published.

Block encoding: the signed header, then `tx_count` times (u32 length || transaction).

Version 2 (the blocks of a shard in a sharded genesis, qmemo.core.shards) adds three
fields after `merkle_root` - `receipt_count` (u32), `receipts_bytes` (u32) and
`receipts_root` (64 bytes, H(RECEIPTS_SECTION, section)) - and its encoding ends with
the receipts section (`receipts_bytes` bytes: the cross-shard receipts it credits,
qmemo.core.receipts), so the transactions still start right after the header.

This module only builds and parses; whether a block is valid is `qmemo.core.state`'s
business. Pure: no I/O, no clock; signing is a callable passed in.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from qmemo.core.codec import U16_MAX, U32_MAX, U64_MAX, expect_object, hex_field, int_field, parse_hex
from qmemo.core.hashing import DIGEST_BYTES, Domain, blake3_512, split_digests
from qmemo.core.merkle import merkle_root
from qmemo.core.transaction import FIXED_BYTES as TX_FIXED_BYTES
from qmemo.core.transaction import Transaction
from qmemo.errors import DecodeError, Misuse

BLOCK_VERSION = 1
SHARDED_BLOCK_VERSION = 2                     # a shard's blocks: version 1 and the receipts fields
BLOCK_VERSIONS = (BLOCK_VERSION, SHARDED_BLOCK_VERSION)
_HEADER = struct.Struct("<BIQ64sQHI64s")
UNSIGNED_HEADER_BYTES = _HEADER.size          # 155
_RECEIPTS_FIELDS = struct.Struct("<II64s")    # version 2: receipt_count, receipts_bytes, receipts_root
SHARDED_UNSIGNED_HEADER_BYTES = UNSIGNED_HEADER_BYTES + _RECEIPTS_FIELDS.size     # 227
# A version 2 block with no receipts still has a section: its u16 bundle count, 0.
EMPTY_RECEIPTS_SECTION = b"\x00\x00"
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
# The smallest a transaction can be on the wire: its length prefix, fixed part and
# signature length. Bounds tx_count before any allocation.
_MIN_TX_BYTES = _U32.size + TX_FIXED_BYTES + _U16.size


@dataclass(frozen=True, slots=True, repr=False)
class BlockHeader:
    """A block header; `encoded`, `signing_digest` and `hash` are derived on construction."""

    version: int
    chain_id: int
    height: int
    previous_hash: bytes
    timestamp_ms: int
    producer_index: int
    tx_count: int
    merkle_root: bytes
    signature: bytes = b""
    # Version 2 only (zero and empty in version 1): the cross-shard receipts it credits.
    receipt_count: int = 0
    receipts_bytes: int = 0
    receipts_root: bytes = b""
    encoded: bytes = field(init=False, compare=False)
    signing_digest: bytes = field(init=False, compare=False)
    hash: bytes = field(init=False, compare=False)

    def __post_init__(self) -> None:
        for name, maximum in (("version", 0xFF), ("chain_id", U32_MAX), ("height", U64_MAX),
                              ("timestamp_ms", U64_MAX), ("producer_index", U16_MAX), ("tx_count", U32_MAX),
                              ("receipt_count", U32_MAX), ("receipts_bytes", U32_MAX)):
            value = getattr(self, name)
            if type(value) is not int or not 0 <= value <= maximum:
                raise DecodeError(f"header {name} = {value!r} is outside 0..{maximum}", code="out_of_range")
        for name in ("previous_hash", "merkle_root"):
            value = getattr(self, name)
            if type(value) is not bytes or len(value) != DIGEST_BYTES:
                raise DecodeError(f"header {name} must be {DIGEST_BYTES} bytes", code="out_of_range")
        if type(self.signature) is not bytes or len(self.signature) > U16_MAX:
            raise DecodeError(f"header signature must be bytes, at most {U16_MAX}", code="oversized")
        unsigned = _HEADER.pack(self.version, self.chain_id, self.height, self.previous_hash,
                                self.timestamp_ms, self.producer_index, self.tx_count, self.merkle_root)
        if self.version == SHARDED_BLOCK_VERSION:
            if type(self.receipts_root) is not bytes or len(self.receipts_root) != DIGEST_BYTES:
                raise DecodeError(f"header receipts_root must be {DIGEST_BYTES} bytes", code="out_of_range")
            unsigned += _RECEIPTS_FIELDS.pack(self.receipt_count, self.receipts_bytes, self.receipts_root)
        elif self.receipt_count or self.receipts_bytes or self.receipts_root:
            raise DecodeError(f"a version {self.version} header has no receipts", code="malformed")
        encoded = b"".join((unsigned, _U16.pack(len(self.signature)), self.signature))
        object.__setattr__(self, "encoded", encoded)
        object.__setattr__(self, "signing_digest", blake3_512(Domain.BLOCK_SIGNING, unsigned))
        object.__setattr__(self, "hash", blake3_512(Domain.BLOCK_HASH, encoded))

    @classmethod
    def decode_from(cls, data: bytes, offset: int = 0) -> tuple[BlockHeader, int]:
        """Parse a signed header at `offset`; returns it and the offset just past it."""
        if len(data) < offset + 1:
            raise DecodeError("block header truncated: 0 bytes", code="truncated")
        version = data[offset]
        if version not in BLOCK_VERSIONS:
            raise DecodeError(f"block version {version} is not one of {BLOCK_VERSIONS}", code="unsupported_version")
        unsigned = UNSIGNED_HEADER_BYTES + (_RECEIPTS_FIELDS.size if version == SHARDED_BLOCK_VERSION else 0)
        end = offset + unsigned + _U16.size
        if len(data) < end:
            raise DecodeError(f"block header truncated: {len(data) - offset} bytes", code="truncated")
        fields = _HEADER.unpack_from(data, offset)
        receipts = _RECEIPTS_FIELDS.unpack_from(data, offset + UNSIGNED_HEADER_BYTES) \
            if version == SHARDED_BLOCK_VERSION else (0, 0, b"")
        signature_end = end + _U16.unpack_from(data, end - _U16.size)[0]
        if len(data) < signature_end:
            raise DecodeError("block header signature truncated", code="truncated")
        return cls(*fields, signature=bytes(data[end:signature_end]), receipt_count=receipts[0],
                   receipts_bytes=receipts[1], receipts_root=receipts[2]), signature_end

    def to_json(self) -> dict[str, Any]:
        document = {
            "version": self.version, "chain_id": self.chain_id, "height": self.height,
            "previous_hash": self.previous_hash.hex(), "timestamp_ms": self.timestamp_ms,
            "producer_index": self.producer_index, "tx_count": self.tx_count,
            "merkle_root": self.merkle_root.hex(), "signature": self.signature.hex(),
        }
        if self.version == SHARDED_BLOCK_VERSION:
            document.update(receipt_count=self.receipt_count, receipts_bytes=self.receipts_bytes,
                            receipts_root=self.receipts_root.hex())
        return document

    @classmethod
    def from_json(cls, obj: Any) -> BlockHeader:
        what = "header"
        version = obj.get("version") if isinstance(obj, dict) else None
        sharded = version == SHARDED_BLOCK_VERSION
        obj = expect_object(obj, _HEADER_V2_KEYS if sharded else _HEADER_KEYS, what)
        version = int_field(obj, "version", 0xFF, what)
        if version not in BLOCK_VERSIONS:
            raise DecodeError(f"block version {version} is not one of {BLOCK_VERSIONS}", code="unsupported_version")
        return cls(
            version=version,
            chain_id=int_field(obj, "chain_id", U32_MAX, what),
            height=int_field(obj, "height", U64_MAX, what),
            previous_hash=hex_field(obj, "previous_hash", what, length=DIGEST_BYTES),
            timestamp_ms=int_field(obj, "timestamp_ms", U64_MAX, what),
            producer_index=int_field(obj, "producer_index", U16_MAX, what),
            tx_count=int_field(obj, "tx_count", U32_MAX, what),
            merkle_root=hex_field(obj, "merkle_root", what, length=DIGEST_BYTES),
            signature=hex_field(obj, "signature", what),
            receipt_count=int_field(obj, "receipt_count", U32_MAX, what) if sharded else 0,
            receipts_bytes=int_field(obj, "receipts_bytes", U32_MAX, what) if sharded else 0,
            receipts_root=hex_field(obj, "receipts_root", what, length=DIGEST_BYTES) if sharded else b"",
        )

    def signed(self, sign: Callable[[bytes], bytes]) -> BlockHeader:
        """This header with `sign(signing_digest)` as its signature."""
        return replace(self, signature=sign(self.signing_digest))

    def __repr__(self) -> str:
        return (f"BlockHeader(height={self.height}, hash={self.hash.hex()[:16]}.., "
                f"producer={self.producer_index}, txs={self.tx_count}, t={self.timestamp_ms})")


_HEADER_KEYS = frozenset(("version", "chain_id", "height", "previous_hash", "timestamp_ms", "producer_index",
                          "tx_count", "merkle_root", "signature"))
_HEADER_V2_KEYS = _HEADER_KEYS | {"receipt_count", "receipts_bytes", "receipts_root"}


@dataclass(frozen=True, slots=True, repr=False)
class Block:
    """A header and its transactions, in order; a version 2 block also its receipts section
    (its encoding: qmemo.core.receipts decodes it; b"" in version 1)."""

    header: BlockHeader
    transactions: tuple[Transaction, ...]
    receipts_section: bytes = b""
    # The encoding, kept once made (or given by `decode`): a block is encoded to be stored,
    # pushed to every peer and served to each syncing one - ~15 MB for 8,000 Falcon-512
    # transactions, which is not worth rebuilding each time.
    _encoding: bytes | None = field(default=None, init=False, compare=False, repr=False)
    # The Merkle root of the transactions' ids, kept once computed: a peer's block is checked
    # against it before its signatures are verified and again when it is applied (`apply_block`),
    # two BLAKE3-512 hashes per transaction in Python each time.
    _body_root: bytes | None = field(default=None, init=False, compare=False, repr=False)

    @property
    def hash(self) -> bytes:
        return self.header.hash

    @property
    def height(self) -> int:
        return self.header.height

    def body_root(self) -> bytes:
        """The Merkle root of the transactions' ids as they are (not the header's claim, which
        `apply_block` compares with it)."""
        root = self._body_root
        if root is None:
            root = merkle_root([tx.id for tx in self.transactions])
            _set_body_root(self, root)
        return root

    def encode(self) -> bytes:
        """The block encoding: signed header, then each transaction with a u32 length."""
        encoded = self._encoding
        if encoded is None:
            pack = _U32.pack
            parts = [self.header.encoded]
            for tx in self.transactions:
                parts.append(pack(len(tx.encoded)))
                parts.append(tx.encoded)
            parts.append(self.receipts_section)
            encoded = b"".join(parts)
            _set_encoding(self, encoded)
        return encoded

    @classmethod
    def parsed(cls, header: BlockHeader, transactions: tuple[Transaction, ...], data: bytes,
               receipts_section: bytes = b"") -> Block:
        """The block whose header and transactions were each parsed from their place in
        `data` (a caller's own decode, as `decode`'s): `data` is kept as its encoding, so
        a received block is never encoded again. Kept only where it is canonical: the
        header's bytes as it re-encodes them, and no byte more than the transactions hold."""
        block = cls(header, transactions, receipts_section)
        if data.startswith(header.encoded) and data.endswith(receipts_section) and \
                len(data) == len(header.encoded) + len(receipts_section) + sum(
                _U32.size + len(tx.encoded) for tx in transactions):
            _set_encoding(block, data)
        return block

    @classmethod
    def decode(cls, data: bytes) -> Block:
        """Parse a block encoding; DecodeError for anything short, trailing or malformed."""
        if type(data) is not bytes:
            data = bytes(data)
        header, offset = BlockHeader.decode_from(data)
        if header.receipts_bytes > len(data) - offset:
            raise DecodeError(f"block claims a {header.receipts_bytes}-byte receipts section in "
                              f"{len(data) - offset} bytes", code="truncated")
        body_end = len(data) - header.receipts_bytes
        if header.tx_count > (body_end - offset) // _MIN_TX_BYTES:
            raise DecodeError(f"block claims {header.tx_count} transactions in {body_end - offset} bytes",
                              code="truncated")
        transactions = []
        for position in range(header.tx_count):
            if body_end < offset + _U32.size:
                raise DecodeError(f"block truncated before transaction {position}", code="truncated")
            end = offset + _U32.size + _U32.unpack_from(data, offset)[0]
            if body_end < end:
                raise DecodeError(f"block truncated in transaction {position}", code="truncated")
            transactions.append(Transaction.decode(data[offset + _U32.size:end]))
            offset = end
        if offset != body_end:
            raise DecodeError(f"{body_end - offset} bytes after the last transaction", code="trailing_bytes")
        return cls.parsed(header, tuple(transactions), data, data[body_end:])

    def to_json(self) -> dict[str, Any]:
        document = {"header": self.header.to_json(), "transactions": [tx.to_json() for tx in self.transactions]}
        if self.header.version == SHARDED_BLOCK_VERSION:
            document["receipts"] = self.receipts_section.hex()
        return document

    @classmethod
    def from_json(cls, obj: Any) -> Block:
        sharded = isinstance(obj, dict) and "receipts" in obj
        obj = expect_object(obj, _BLOCK_KEYS | {"receipts"} if sharded else _BLOCK_KEYS, "block")
        if not isinstance(obj["transactions"], list):
            raise DecodeError("block.transactions must be a list", code="malformed")
        return cls(BlockHeader.from_json(obj["header"]),
                   tuple(Transaction.from_json(tx) for tx in obj["transactions"]),
                   parse_hex(obj["receipts"], "block.receipts", max_length=U32_MAX) if sharded else b"")

    def __repr__(self) -> str:
        return f"Block({self.header!r})"


@dataclass(frozen=True, slots=True, repr=False)
class BlockIds:
    """A block's signed header and its transactions' ids in order (None: not read).

    Two uses. What a client following the chain asks for (`GET /blocks?txs=ids|none`): a
    stored final block gives it from its header and id list (qmemo.node.store) with no
    transaction decoded - decoding a stored block of 10,000 transactions takes ~120 ms of
    CPU, its header and ids ~1 ms (`python -m qmemo.bench.node_store`). And the form a
    producer pushes its block in (`encode`: protocol.md, "Block ids encoding"): a peer
    holds nearly every transaction already, verified, from the relay, so it rebuilds the
    block from its own pool and takes the whole encoding only when it lacks one - ~0.6 MB
    sent per peer for 10,000 transactions instead of ~13 MB."""

    header: BlockHeader
    tx_ids: tuple[bytes, ...] | None
    # Version 2: the receipts section, pushed whole after the ids (None: not read).
    receipts_section: bytes | None = None

    @property
    def height(self) -> int:
        return self.header.height

    @property
    def hash(self) -> bytes:
        return self.header.hash

    @classmethod
    def of(cls, block: Block, *, with_ids: bool = True) -> BlockIds:
        return cls(block.header, tuple(tx.id for tx in block.transactions) if with_ids else None,
                   block.receipts_section if with_ids and block.header.version == SHARDED_BLOCK_VERSION else None)

    def encode(self) -> bytes:
        """The block ids encoding: the signed header, then `tx_count` 64-byte ids (then, in
        version 2, the receipts section)."""
        if self.tx_ids is None or len(self.tx_ids) != self.header.tx_count:
            raise Misuse(f"block {self.header.height}: {self.header.tx_count} transactions, "
                         f"{'no' if self.tx_ids is None else len(self.tx_ids)} ids", code="ids_not_read")
        section = self.receipts_section or b""
        if len(section) != self.header.receipts_bytes:
            raise Misuse(f"block {self.header.height}: its receipts section was not read", code="ids_not_read")
        return self.header.encoded + b"".join(self.tx_ids) + section

    @staticmethod
    def max_bytes(max_transactions: int, max_receipts_bytes: int = 0) -> int:
        """The longest block ids encoding of a block of at most `max_transactions`: a header
        with the longest signature a u16 length allows, an id per transaction, and the
        receipts section (at most `max_receipts_bytes`)."""
        return UNSIGNED_HEADER_BYTES + _RECEIPTS_FIELDS.size + _U16.size + 0xFFFF + \
            max_transactions * DIGEST_BYTES + max_receipts_bytes

    @classmethod
    def decode(cls, data: bytes) -> BlockIds:
        """Parse a block ids encoding; DecodeError unless exactly `tx_count` ids follow the header."""
        if type(data) is not bytes:
            data = bytes(data)
        header, offset = BlockHeader.decode_from(data)
        ids_end = offset + header.tx_count * DIGEST_BYTES
        expected = ids_end + header.receipts_bytes
        if len(data) != expected:
            raise DecodeError(f"{len(data) - offset} bytes of ids for {header.tx_count} transactions",
                              code="truncated" if len(data) < expected else "trailing_bytes")
        return cls(header, split_digests(data, offset, ids_end),
                   data[ids_end:] if header.version == SHARDED_BLOCK_VERSION else None)

    def __repr__(self) -> str:
        return f"BlockIds({self.header!r})"


_BLOCK_KEYS = frozenset(("header", "transactions"))
# The slot's own setter: fills the cache of a frozen block (as Transaction's `_set_*`).
_set_encoding = Block.__dict__["_encoding"].__set__
_set_body_root = Block.__dict__["_body_root"].__set__


def receipts_root(section: bytes) -> bytes:
    """What a version 2 header commits its receipts section to: every byte of it."""
    return blake3_512(Domain.RECEIPTS_SECTION, section)


def make_block(*, chain_id: int, height: int, previous_hash: bytes, timestamp_ms: int, producer_index: int,
               transactions: Sequence[Transaction], sign: Callable[[bytes], bytes],
               receipts: tuple[int, bytes] | None = None) -> Block:
    """Assemble and sign a block: what a producer does once it has chosen the transactions.
    `receipts` (receipt count, section encoding) makes a version 2 block (a shard's)."""
    transactions = tuple(transactions)
    root = merkle_root([tx.id for tx in transactions])
    count, section = receipts if receipts is not None else (0, b"")
    header = BlockHeader(
        version=BLOCK_VERSION if receipts is None else SHARDED_BLOCK_VERSION, chain_id=chain_id, height=height,
        previous_hash=previous_hash, timestamp_ms=timestamp_ms, producer_index=producer_index,
        tx_count=len(transactions), merkle_root=root, receipt_count=count, receipts_bytes=len(section),
        receipts_root=receipts_root(section) if receipts is not None else b"",
    )
    block = Block(header.signed(sign), transactions, section)
    _set_body_root(block, root)
    return block
