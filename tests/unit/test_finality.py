"""Finality by a majority of producers (qmemo.core.finality), and the chain that uses it:
an isolated minority never finalizes its own blocks, and a branch a majority built on
wins the fork choice over a longer one that only a minority built on."""

from __future__ import annotations

import pytest

from qmemo.core.block import Block
from qmemo.core.finality import final_height, quorum
from qmemo.errors import StoreError
from qmemo.node.chain import Chain, branch_is_better
from qmemo.node.store import ChainStore
from tests.unit.chain_kit import Devnet, kernel, node_block, node_chain


@pytest.mark.parametrize("validators, needed", [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (32, 17)])
def test_quorum_is_a_strict_majority(validators, needed):
    assert quorum(validators) == needed


def test_quorum_of_no_validators_is_refused():
    with pytest.raises(ValueError, match="at least one validator"):
        quorum(0)


def test_a_block_is_final_once_a_majority_of_producers_sit_at_or_above_it():
    # Heights 5..8 produced by 0, 1, 2, 0: 5 has {0,1,2} above it, 6 {1,2,0}, 7 {2,0}, 8 {0}.
    blocks = [(5, 0), (6, 1), (7, 2), (8, 0)]
    assert final_height(blocks, 2) == 7
    assert final_height(blocks, 3) == 6
    assert final_height(blocks[:1], 2) is None


def test_a_lone_producer_never_finalizes_with_more_than_one_validator():
    alone = [(height, 2) for height in range(10, 60)]
    assert final_height(alone, quorum(3)) is None
    assert final_height(alone, quorum(1)) == 59          # the only validator: final at once


def test_the_blocks_producer_counts_toward_its_own_majority():
    assert final_height([(1, 0), (2, 1)], 2) == 1         # 1's producer and one more


def test_minimum_confirmations_hold_finality_back():
    blocks = [(1, 0), (2, 1), (3, 2), (4, 0)]
    assert final_height(blocks, 2, min_confirmations=1) == 3
    assert final_height(blocks, 2, min_confirmations=3) == 2
    assert final_height(blocks, 2, min_confirmations=5) is None
    assert final_height([], 1) is None


# --- the node's chain ----------------------------------------------------------------------


def _extend(net: Devnet, chain: Chain, producers: list[int]) -> list[Block]:
    """Blocks by `producers` in turn (each at its own turn or fallback window), applied to
    `net` and to `chain`, then made durable as the node does after each branch."""
    blocks = []
    for producer in producers:
        block = net.next_block(producer=producer)
        net.apply(block)
        chain.apply(node_block(block), net.cache, kernel().table, block.header.timestamp_ms)
        chain.made_durable()
        blocks.append(block)
    return blocks


@pytest.fixture
def chain(tmp_path):
    net = Devnet()
    store = ChainStore(tmp_path / "chain.sqlite", net.genesis)
    yield net, node_chain(store, quorum=quorum(len(net.genesis.validators)))
    store.close()


def test_an_isolated_validator_finalizes_none_of_its_own_blocks(chain):
    net, node = chain
    _extend(net, node, [2, 2, 2, 2, 2, 2])
    assert node.height == 6 and node.final_height == 0
    assert node.depth(1) == (6, False)                   # confirmations stay a depth
    assert node.rollback_to(0)                            # nothing final: all undoable


def test_blocks_become_final_when_a_second_producer_builds_on_them(chain):
    net, node = chain
    _extend(net, node, [0, 0, 0])
    assert node.final_height == 0
    _extend(net, node, [1])
    assert node.final_height == 3 and node.depth(3) == (2, True) and node.depth(4) == (1, False)
    with pytest.raises(StoreError, match="final height 3"):
        node.rollback_to(2)


def test_a_branch_a_majority_built_on_beats_a_longer_minority_branch():
    net = Devnet()
    minority = [net.next_block(producer=2)]
    net.apply(minority[0])
    for _ in range(4):
        block = net.next_block(producer=2)
        net.apply(block)
        minority.append(block)
    majority_net = Devnet()
    majority = []
    for producer in (0, 1, 0):
        block = majority_net.next_block(producer=producer)
        majority_net.apply(block)
        majority.append(block)
    assert branch_is_better(minority, majority, quorum(3))
    assert not branch_is_better(majority, minority, quorum(3))
    # Without a majority on either side the longer branch wins, as before.
    assert branch_is_better(majority[:1], minority, quorum(3))
    assert not branch_is_better(minority, majority[:1], quorum(3))
