"""DecodedCache.decode_block: the same block as Block.decode, its transactions reused, its
bytes kept as its encoding (a received block is stored and served without re-encoding)."""

from __future__ import annotations

import pytest

from qmemo.core.block import Block
from qmemo.errors import DecodeError
from qmemo.node.block_decode import DecodedCache
from tests.unit.chain_kit import Devnet


@pytest.fixture(scope="module")
def block() -> Block:
    net = Devnet()
    return net.next_block([net.transfer(net.alice, net.bob, 5), net.transfer(net.carol, net.alice, 7)])


def test_decode_block_reuses_decoded_transactions_and_keeps_the_bytes(block):
    cache = DecodedCache()
    first = cache.decode(block.transactions[0].encoded)
    received = bytes(bytearray(block.encode()))
    decoded = cache.decode_block(received)
    assert decoded == block and decoded.transactions[0] is first and cache.reused == 1
    assert decoded.encode() is received


@pytest.mark.parametrize("mutate", [lambda data: data + b"\0", lambda data: data[:-1]], ids=["trailing", "truncated"])
def test_decode_block_refuses_what_block_decode_refuses(block, mutate):
    with pytest.raises(DecodeError) as expected:
        Block.decode(mutate(block.encode()))
    with pytest.raises(DecodeError) as got:
        DecodedCache().decode_block(mutate(block.encode()))
    assert got.value.code == expected.value.code
