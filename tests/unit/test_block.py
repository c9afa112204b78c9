"""Block headers and blocks: encoding, digests, JSON form and strict decoding."""

from __future__ import annotations

import struct
from dataclasses import replace

import orjson
import pytest

from qmemo.core.block import UNSIGNED_HEADER_BYTES, Block, BlockHeader, BlockIds, make_block
from qmemo.core.hashing import Domain, blake3_512
from qmemo.core.merkle import merkle_root
from qmemo.errors import DecodeError, Misuse
from tests.unit.chain_kit import Devnet


@pytest.fixture(scope="module")
def block() -> Block:
    net = Devnet()
    return net.next_block([net.transfer(net.alice, net.bob, 5), net.transfer(net.carol, net.alice, 7)])


def test_header_layout_is_little_endian_with_the_documented_offsets(block):
    h = block.header
    assert struct.unpack_from("<BIQ64sQHI64s", h.encoded) == (
        1, h.chain_id, h.height, h.previous_hash, h.timestamp_ms, h.producer_index, h.tx_count, h.merkle_root)
    assert UNSIGNED_HEADER_BYTES == 155
    assert h.encoded[155:157] == len(h.signature).to_bytes(2, "little") and h.encoded[157:] == h.signature


def test_signing_digest_and_hash_are_domain_separated_digests(block):
    h = block.header
    assert h.signing_digest == blake3_512(Domain.BLOCK_SIGNING, h.encoded[:UNSIGNED_HEADER_BYTES])
    assert h.hash == blake3_512(Domain.BLOCK_HASH, h.encoded) == block.hash


def test_block_hash_covers_the_signature(block):
    other = replace(block.header, signature=bytes(len(block.header.signature)))
    assert other.signing_digest == block.header.signing_digest and other.hash != block.hash


def test_make_block_commits_to_count_and_merkle_root(block):
    assert block.header.tx_count == 2
    assert block.header.merkle_root == merkle_root([tx.id for tx in block.transactions])


def test_make_block_signs_the_signing_digest():
    block = make_block(chain_id=1, height=1, previous_hash=bytes(64), timestamp_ms=5, producer_index=0,
                       transactions=(), sign=lambda digest: digest[:10])
    assert block.header.signature == block.header.signing_digest[:10]


def test_block_binary_round_trip(block):
    decoded = Block.decode(block.encode())
    assert decoded == block and decoded.hash == block.hash and decoded.encode() == block.encode()


def test_a_decoded_block_keeps_the_bytes_it_came_from_as_its_encoding(block):
    received = bytes(bytearray(block.encode()))          # a copy, as from the network
    decoded = Block.decode(received)
    assert decoded.encode() is received                  # never encoded again


def test_parsed_keeps_only_canonical_bytes(block):
    data = block.encode()
    longer = Block.parsed(block.header, block.transactions, data + b"x")      # a byte the transactions do not hold
    assert longer.encode() == data
    other_header = replace(block.header, signature=bytes(len(block.header.signature)))
    assert Block.parsed(other_header, block.transactions, data).encode() != data   # the header re-encodes otherwise


def test_a_changed_block_is_encoded_afresh(block):
    block.encode()
    fewer = replace(block, transactions=block.transactions[:1])
    assert fewer.encode() == block.header.encoded + len(block.transactions[0].encoded).to_bytes(4, "little") + \
        block.transactions[0].encoded


def test_the_body_root_is_computed_once_and_afresh_for_a_changed_block(block, monkeypatch):
    # A peer's block is checked against its root before its signatures are verified and
    # again when applied: the second time reads the first's result.
    import qmemo.core.block as block_module
    decoded = Block.decode(block.encode())
    calls = []

    def counted(ids):
        calls.append(len(ids))
        return merkle_root(ids)

    monkeypatch.setattr(block_module, "merkle_root", counted)
    assert decoded.body_root() == decoded.body_root() == block.header.merkle_root and calls == [2]
    swapped = replace(decoded, transactions=decoded.transactions[::-1])   # the header left as it was
    assert swapped.body_root() == merkle_root([tx.id for tx in swapped.transactions]) != block.header.merkle_root
    assert calls == [2, 2]


def test_block_json_round_trip(block):
    text = orjson.dumps(block.to_json())
    assert Block.from_json(orjson.loads(text)) == block
    assert orjson.dumps(Block.from_json(orjson.loads(text)).to_json()) == text


def test_header_json_round_trip(block):
    assert BlockHeader.from_json(block.header.to_json()) == block.header


def test_block_trailing_bytes(block):
    with pytest.raises(DecodeError) as rejected:
        Block.decode(block.encode() + b"\x00")
    assert rejected.value.code == "trailing_bytes"


@pytest.mark.parametrize("cut", [0, 10, UNSIGNED_HEADER_BYTES + 1, UNSIGNED_HEADER_BYTES + 2, -1, -1000])
def test_block_truncated(block, cut):
    with pytest.raises(DecodeError) as rejected:
        Block.decode(block.encode()[:cut])
    assert rejected.value.code == "truncated"


def test_block_ids_encoding_is_the_header_then_each_id_and_decodes_back(block):
    ids = BlockIds.of(block)
    assert ids.encode() == block.header.encoded + b"".join(tx.id for tx in block.transactions)
    assert BlockIds.decode(ids.encode()) == ids and ids.hash == block.hash and ids.height == block.height
    assert BlockIds.decode(bytearray(ids.encode())) == ids


@pytest.mark.parametrize("change, code", [(lambda data: data[:-1], "truncated"),
                                          (lambda data: data[:-64], "truncated"),
                                          (lambda data: data + bytes(64), "trailing_bytes"),
                                          (lambda data: data[:20], "truncated")])
def test_block_ids_need_exactly_one_id_per_transaction(block, change, code):
    with pytest.raises(DecodeError) as rejected:
        BlockIds.decode(change(BlockIds.of(block).encode()))
    assert rejected.value.code == code


def test_block_ids_read_without_their_ids_do_not_encode(block):
    with pytest.raises(Misuse):
        BlockIds.of(block, with_ids=False).encode()


def test_block_claiming_more_transactions_than_its_bytes_can_hold():
    header = BlockHeader(1, 1, 1, bytes(64), 0, 0, 1_000_000, bytes(64))
    with pytest.raises(DecodeError) as rejected:
        Block.decode(header.encoded + bytes(100))
    assert rejected.value.code == "truncated"


def test_block_with_a_transaction_that_has_trailing_bytes(block):
    data = bytearray(block.encode())
    first_length_at = len(block.header.encoded)
    length = struct.unpack_from("<I", data, first_length_at)[0]
    struct.pack_into("<I", data, first_length_at, length + 1)
    data[first_length_at + 4 + length:first_length_at + 4 + length] = b"\x00"
    with pytest.raises(DecodeError) as rejected:
        Block.decode(bytes(data))
    assert rejected.value.code == "trailing_bytes"


def test_unknown_block_version_is_rejected_when_decoding(block):
    data = bytearray(block.encode())
    data[0] = 9
    with pytest.raises(DecodeError) as rejected:
        Block.decode(bytes(data))
    assert rejected.value.code == "unsupported_version"


@pytest.mark.parametrize("changes", [{"height": -1}, {"producer_index": 1 << 16}, {"previous_hash": bytes(63)},
                                     {"tx_count": 1 << 32}, {"timestamp_ms": 1.5}])
def test_header_fields_out_of_range(block, changes):
    with pytest.raises(DecodeError):
        replace(block.header, **changes)


def test_header_json_with_an_extra_key(block):
    with pytest.raises(DecodeError):
        BlockHeader.from_json({**block.header.to_json(), "hash": block.hash.hex()})
