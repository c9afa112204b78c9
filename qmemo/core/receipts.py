"""Cross-shard receipts: the proof that a source shard debited a transfer for this shard.

A cross-shard transfer is an ordinary transaction on its sender's shard whose recipient
lives in another shard (qmemo.core.shards): the source shard debits amount + fee and
credits nothing. The destination credits it once it holds a *receipt*: the transaction,
its Merkle inclusion proof under a source block's header, and that block's finality -
the signed headers above it, linked by `previous_hash`, up to where a majority of the
source shard's validators (distinct producers, as qmemo.core.finality defines finality)
have built on it; each header signed by a validator of the source shard, checked against
the genesis map. The destination verifies the transaction's signature again (it is
"verified by two shards").

Receipts travel and are credited in *bundles*, one per source block and destination
shard: the headers are checked once per bundle, not per receipt (docs/protocol.md,
"Receipts", has the encodings):

    bundle  = u32 source_chain_id
              u8 header_count, header_count x (u32 length || signed header)   the block, then above it
              u32 entry_count, entry_count x entry
    entry   = u32 length || transaction encoding
              u32 index || u32 leaf_count || u8 sibling_count || siblings (64 bytes each)
    section = u16 bundle_count || bundles          (a version 2 block's receipts section)

    receipt id = H(RECEIPT_ID, u32 source_chain_id || transaction id)

`check_receipts` runs every rule, one refusal code each (qmemo.core.refusals), and
returns the credits; a destination records each receipt id it credits and refuses it
ever after (`receipt_replayed`), so a transfer is credited exactly once.

Pure: no I/O, no clock; signatures are checked by the verifier passed in.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass
from typing import Protocol

from qmemo.core.block import SHARDED_UNSIGNED_HEADER_BYTES, BlockHeader, receipts_root
from qmemo.core.genesis import Genesis
from qmemo.core.hashing import DIGEST_BYTES, Domain, blake3_512
from qmemo.core.merkle import MAX_DEPTH, MerkleProof, merkle_proofs, verify_proof
from qmemo.core.refusals import RECEIPT_OTHER_CHAIN, RECEIPT_UNLINKED, receipt_refusal, receipts_refusal
from qmemo.core.shards import Sharding
from qmemo.core.transaction import FIXED_BYTES as TX_FIXED_BYTES
from qmemo.core.transaction import MAX_PAYLOAD_BYTES, Transaction
from qmemo.errors import DecodeError, InvalidBlock, InvalidReceipt

MAX_PROOF_HEADERS = 64      # the block and the headers above it: finality needs a majority of
                            # producers, a few headers; 64 leaves room for long fallback runs
_U8 = struct.Struct("<B")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_PROOF = struct.Struct("<IIB")
_CHAIN = struct.Struct("<I")


def receipt_id(source_chain_id: int, tx_id: bytes) -> bytes:
    """A receipt's id: what a destination records once it credits the receipt."""
    return blake3_512(Domain.RECEIPT_ID, _CHAIN.pack(source_chain_id), tx_id)


@dataclass(frozen=True, slots=True)
class ReceiptEntry:
    """One cross-shard transfer of a source block: the transaction and its inclusion proof."""

    tx: Transaction
    proof: MerkleProof


@dataclass(frozen=True, slots=True, repr=False)
class ReceiptBundle:
    """The receipts of one source block for one destination shard, and their evidence."""

    source_chain_id: int
    header: BlockHeader                    # the source block's signed header
    finality: tuple[BlockHeader, ...]      # the headers above it, ascending
    entries: tuple[ReceiptEntry, ...]

    @property
    def key(self) -> tuple[int, bytes]:
        """(source chain id, source block hash): which block's receipts these are."""
        return self.source_chain_id, self.header.hash

    def receipt_ids(self) -> list[bytes]:
        return [receipt_id(self.source_chain_id, entry.tx.id) for entry in self.entries]

    def encode(self) -> bytes:
        headers = (self.header, *self.finality)
        parts = [_CHAIN.pack(self.source_chain_id), _U8.pack(len(headers))]
        for header in headers:
            parts += [_U32.pack(len(header.encoded)), header.encoded]
        parts.append(_U32.pack(len(self.entries)))
        for entry in self.entries:
            proof = entry.proof
            parts += [_U32.pack(len(entry.tx.encoded)), entry.tx.encoded,
                      _PROOF.pack(proof.index, proof.leaf_count, len(proof.siblings)), *proof.siblings]
        return b"".join(parts)

    @classmethod
    def decode_from(cls, data: bytes, offset: int) -> tuple[ReceiptBundle, int]:
        """Parse a bundle at `offset`; returns it and the offset just past it. DecodeError if
        it is short, malformed, or has no header or no entry."""
        source_chain_id = _read(_CHAIN, data, offset, "bundle")[0]
        header_count = _read(_U8, data, offset + 4, "bundle")[0]
        offset += 5
        if not 1 <= header_count <= MAX_PROOF_HEADERS:
            raise DecodeError(f"a bundle carries 1 to {MAX_PROOF_HEADERS} headers, not {header_count}",
                              code="out_of_range")
        headers = []
        for _ in range(header_count):
            chunk, offset = _framed(data, offset, "bundle header")
            header, end = BlockHeader.decode_from(chunk)
            if end != len(chunk):
                raise DecodeError("bytes after a bundle header", code="trailing_bytes")
            headers.append(header)
        entry_count = _read(_U32, data, offset, "bundle")[0]
        offset += 4
        # Each entry takes at least its length, a fixed transaction part and its proof's fixed part.
        if not 1 <= entry_count <= (len(data) - offset) // (4 + TX_FIXED_BYTES + 2 + _PROOF.size):
            raise DecodeError(f"a bundle of {entry_count} entries in {len(data) - offset} bytes", code="truncated")
        entries = []
        for _ in range(entry_count):
            encoded, offset = _framed(data, offset, "receipt transaction")
            index, leaf_count, sibling_count = _read(_PROOF, data, offset, "receipt proof")
            offset += _PROOF.size
            if sibling_count > MAX_DEPTH:
                raise DecodeError(f"a proof of {sibling_count} siblings", code="out_of_range")
            end = offset + sibling_count * DIGEST_BYTES
            if len(data) < end:
                raise DecodeError("receipt proof truncated", code="truncated")
            siblings = tuple(bytes(data[i:i + DIGEST_BYTES]) for i in range(offset, end, DIGEST_BYTES))
            entries.append(ReceiptEntry(Transaction.decode(encoded), MerkleProof(index, leaf_count, siblings)))
            offset = end
        return cls(source_chain_id, headers[0], tuple(headers[1:]), tuple(entries)), offset

    @classmethod
    def decode(cls, data: bytes) -> ReceiptBundle:
        bundle, end = cls.decode_from(data, 0)
        if end != len(data):
            raise DecodeError(f"{len(data) - end} bytes after the bundle", code="trailing_bytes")
        return bundle

    def __repr__(self) -> str:
        return (f"ReceiptBundle(chain {self.source_chain_id}, height {self.header.height}, "
                f"{len(self.entries)} receipts)")


def encode_section(bundles: Sequence[ReceiptBundle]) -> bytes:
    """A version 2 block's receipts section: u16 count, then the bundles."""
    return _U16.pack(len(bundles)) + b"".join(bundle.encode() for bundle in bundles)


def decode_section(data: bytes) -> tuple[ReceiptBundle, ...]:
    """The bundles of a receipts section; DecodeError if it is short, long or malformed."""
    count = _read(_U16, data, 0, "receipts section")[0]
    offset, bundles = 2, []
    for _ in range(count):
        bundle, offset = ReceiptBundle.decode_from(data, offset)
        bundles.append(bundle)
    if offset != len(data):
        raise DecodeError(f"{len(data) - offset} bytes after the last bundle", code="trailing_bytes")
    return tuple(bundles)


def _read(layout: struct.Struct, data: bytes, offset: int, what: str) -> tuple:
    if len(data) < offset + layout.size:
        raise DecodeError(f"{what} truncated", code="truncated")
    return layout.unpack_from(data, offset)


def _framed(data: bytes, offset: int, what: str) -> tuple[bytes, int]:
    length = _read(_U32, data, offset, what)[0]
    end = offset + 4 + length
    if len(data) < end:
        raise DecodeError(f"{what} truncated", code="truncated")
    return bytes(data[offset + 4:end]), end


# --- the rules ----------------------------------------------------------------------------------

class ReceiptVerifier(Protocol):
    """What the receipt rules need: a header's signature, and a batch of transactions'."""

    def verify(self, scheme_id: int, public_key: bytes, message: bytes, signature: bytes) -> bool: ...

    def verify_transactions(self, transactions: Sequence[Transaction]) -> list[bool]: ...


@dataclass(frozen=True, slots=True)
class Credit:
    """What a valid receipt does on its destination: `amount` to `recipient`, once."""

    receipt_id: bytes
    recipient: bytes
    amount: int


def check_bundle_evidence(sharding: Sharding, bundle: ReceiptBundle,
                          verify_header: Callable[[int, bytes, bytes, bytes], bool]) -> None:
    """The rules on a bundle's headers: a source that is another shard of this genesis
    (`unknown_source`), every header signed by a validator of that shard (`forged_header`),
    linked one above the other and built on by a majority of its validators
    (`receipt_not_final`). InvalidReceipt otherwise."""
    source = sharding.by_chain_id(bundle.source_chain_id)
    if source is None or source.index == sharding.index:  # another shard of this genesis
        raise receipt_refusal("unknown_source", bundle.source_chain_id)
    for header in (bundle.header, *bundle.finality):
        if header.chain_id != source.chain_id or header.producer_index >= len(source.validators):
            raise receipt_refusal("forged_header", header.height, header.producer_index)
        producer = source.validators[header.producer_index]
        if not verify_header(producer.scheme_id, producer.public_key, header.signing_digest, header.signature):
            raise receipt_refusal("forged_header", header.height, header.producer_index)   # signed by a validator
    below = bundle.header
    for header in bundle.finality:      # each built on the one before: one branch of the source chain
        if header.height != below.height + 1 or header.previous_hash != below.hash:
            raise receipt_refusal(RECEIPT_UNLINKED, header.height)
        below = header
    producers = {header.producer_index for header in (bundle.header, *bundle.finality)}
    if len(producers) < source.quorum:  # a majority of the source's validators built on it: final
        raise receipt_refusal("receipt_not_final", len(producers), source.quorum)


def check_receipts(sharding: Sharding, bundles: Sequence[ReceiptBundle], credited: Container[bytes],
                   verifier: ReceiptVerifier) -> list[Credit]:
    """Every receipt rule, in order - per bundle its evidence, then per entry its source
    chain and proof (`wrong_proof`), its destination (`wrong_destination`) and whether it
    was credited before, in `credited` or earlier here (`receipt_replayed`); then every
    transaction's signature (`receipt_bad_signature`). The credits, in order; InvalidReceipt
    (whose `position` attribute says which receipt, counting across bundles) otherwise."""
    credits: list[Credit] = []
    seen: set[bytes] = set()
    transactions: list[Transaction] = []
    position = 0
    for bundle in bundles:
        try:
            check_bundle_evidence(sharding, bundle, verifier.verify)
        except InvalidReceipt as exc:
            raise _at(exc, position) from None
        for entry in bundle.entries:
            tx = entry.tx
            if tx.chain_id != bundle.source_chain_id:   # a transaction of the source chain
                raise _at(receipt_refusal(RECEIPT_OTHER_CHAIN, tx.chain_id, bundle.source_chain_id, tx.id), position)
            if entry.proof.leaf_count != bundle.header.tx_count or \
                    not verify_proof(bundle.header.merkle_root, tx.id, entry.proof):  # in the source block
                raise _at(receipt_refusal("wrong_proof", tx_id=tx.id), position)
            destination = sharding.shard_of(tx.recipient)
            if destination != sharding.index:           # it pays an account of this shard
                raise _at(receipt_refusal("wrong_destination", destination, sharding.index, tx.id), position)
            rid = receipt_id(bundle.source_chain_id, tx.id)
            if rid in seen or rid in credited:          # credited once, never again
                raise _at(receipt_refusal("receipt_replayed", tx_id=tx.id), position)
            seen.add(rid)
            credits.append(Credit(rid, tx.recipient, tx.amount))
            transactions.append(tx)
            position += 1
    for at, valid in enumerate(verifier.verify_transactions(transactions)):
        if not valid:   # the destination verifies the transfer's signature again
            raise _at(receipt_refusal("receipt_bad_signature", tx_id=transactions[at].id), at)
    return credits


def _at(error: InvalidReceipt, position: int) -> InvalidReceipt:
    error.position = position       # type: ignore[attr-defined]
    return error


def check_section(genesis: Genesis, header: BlockHeader, section: bytes) -> tuple[ReceiptBundle, ...]:
    """A version 2 block's receipts section against its header: the root it commits to
    (`wrong_receipts_root`), a section that decodes (`malformed_receipts`), the count it
    declares (`wrong_receipt_count`) and the limit (`too_many_receipts`: the genesis's
    `max_block_transactions`). The bundles; InvalidBlock otherwise."""
    if len(section) != header.receipts_bytes or receipts_root(section) != header.receipts_root:
        raise receipts_refusal("wrong_receipts_root")    # the section the header commits to
    try:
        bundles = decode_section(section)
    except DecodeError:
        raise receipts_refusal("malformed_receipts") from None   # a section that decodes
    count = sum(len(bundle.entries) for bundle in bundles)
    if count != header.receipt_count:                     # the count the header commits to
        raise receipts_refusal("wrong_receipt_count", header.receipt_count, count)
    if count > genesis.max_block_transactions:            # within the limit
        raise receipts_refusal("too_many_receipts", count, genesis.max_block_transactions)
    return bundles


def block_receipts(genesis: Genesis, header: BlockHeader, section: bytes, credited: Container[bytes],
                   verifier: ReceiptVerifier) -> list[Credit]:
    """A version 2 block's receipts: the section's commitment, then every receipt rule
    (`check_receipts`); the credits. InvalidBlock (the receipt's code) otherwise."""
    bundles = check_section(genesis, header, section)
    try:
        return check_receipts(genesis.sharding, bundles, credited, verifier)
    except InvalidReceipt as exc:
        position = getattr(exc, "position", -1)
        raise InvalidBlock(f"receipt {position}: {exc.detail}", code=exc.code) from None


def max_section_bytes(genesis: Genesis, receipt_count: int) -> int:
    """The longest receipts section `receipt_count` receipts can take in this genesis: each
    receipt alone in its bundle with the most headers, the longest transaction and proof."""
    sharding = genesis.sharding
    largest_signature = max((genesis.schemes.get(v.scheme_id).max_signature_bytes for shard in sharding.shards
                             for v in shard.validators), default=0) if sharding is not None else 0
    header = 4 + SHARDED_UNSIGNED_HEADER_BYTES + 2 + largest_signature
    tx = 4 + TX_FIXED_BYTES + 2 + MAX_PAYLOAD_BYTES + max(
        (rules.public_key_bytes + rules.max_signature_bytes for rules in
         (genesis.schemes.get(scheme_id) for scheme_id in genesis.tx_scheme_ids) if rules is not None), default=0)
    bundle = 4 + 1 + MAX_PROOF_HEADERS * header + 4 + tx + _PROOF.size + MAX_DEPTH * DIGEST_BYTES
    return 2 + receipt_count * bundle


# --- the source side ------------------------------------------------------------------------------

def finality_headers(header: BlockHeader, above: Sequence[BlockHeader], quorum: int) -> tuple[BlockHeader, ...] | None:
    """The fewest headers of `above` (the chain's next headers, ascending) that show
    `header` final: with it, `quorum` distinct producers. None if they do not (yet)."""
    producers = {header.producer_index}
    taken: list[BlockHeader] = []
    for next_header in above:
        if len(producers) >= quorum or len(taken) + 1 >= MAX_PROOF_HEADERS:
            break
        taken.append(next_header)
        producers.add(next_header.producer_index)
    return tuple(taken) if len(producers) >= quorum else None


def make_bundles(sharding: Sharding, header: BlockHeader, finality: tuple[BlockHeader, ...], tx_ids: Sequence[bytes],
                 outgoing: Sequence[tuple[int, Transaction]]) -> dict[int, ReceiptBundle]:
    """The bundles of a final block of this shard (`header`, shown final by `finality`),
    one per destination shard: `outgoing` are its cross-shard transfers (position in the
    block, transaction), `tx_ids` all of its ids, in order (the proofs' tree)."""
    proofs = merkle_proofs(tx_ids, [position for position, _ in outgoing])
    by_destination: dict[int, list[ReceiptEntry]] = {}
    for (_, tx), proof in zip(outgoing, proofs):
        by_destination.setdefault(sharding.shard_of(tx.recipient), []).append(ReceiptEntry(tx, proof))
    return {destination: ReceiptBundle(header.chain_id, header, finality, tuple(entries))
            for destination, entries in sorted(by_destination.items()) if destination != sharding.index}
