"""Producer locks (qmemo.core.fork_lock): the chain split past saturation.

Three validators' chains built by hand, block by block, in the order an overloaded
devnet delivered them: a late primary's block and a fallback's at one height, a
validator that built on one and then switched to the other. Without the lock that
validator's blocks count toward a majority on both branches and two nodes finalize
different blocks at one height - each then refuses the other's chain for good ("forks
below our final height: not switching"). With it, every node ends on one final branch.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from qmemo.core.block import Block, make_block
from qmemo.core.finality import quorum
from qmemo.core.fork_lock import ProducerLock, binding_locks, lock_expiry_ms, lock_for, still_binding
from qmemo.core.genesis import next_turn_ms
from qmemo.crypto.verifier import signer
from qmemo.node.chain import branch_is_better
from qmemo.node.store import ChainStore
from tests.unit.chain_kit import Devnet, falcon_keys, kernel, node_block, node_chain

NOW_MS = 2_000_000_000_000          # every block's timestamp is in the past of this clock
EXPIRY_MS = lock_expiry_ms(3, 2_000, 2_000)


# --- the pure rule ---------------------------------------------------------------------------


def _hashes(chain: dict[int, bytes]) -> Callable[[int], bytes | None]:
    return chain.get


def test_a_lock_binds_until_the_branch_is_final_above_the_fork():
    lock = lock_for(5, b"ours", 4, now_ms=1_000)
    chain = {5: b"theirs"}
    assert still_binding(lock, final_height=4, hash_at=_hashes(chain), now_ms=1_000, expiry_ms=EXPIRY_MS)
    assert not still_binding(lock, final_height=5, hash_at=_hashes(chain), now_ms=1_000, expiry_ms=EXPIRY_MS)


def test_a_lock_ends_when_our_block_is_back_on_the_chain():
    lock = lock_for(5, b"ours", 4, now_ms=1_000)
    assert not still_binding(lock, final_height=0, hash_at=_hashes({5: b"ours"}), now_ms=1_000, expiry_ms=EXPIRY_MS)


def test_a_lock_expires_after_its_rounds_of_turns():
    assert EXPIRY_MS == 2_000 + 10 * 3 * 2_000
    lock = lock_for(5, b"ours", 4, now_ms=1_000)
    hash_at = _hashes({})
    assert still_binding(lock, final_height=0, hash_at=hash_at, now_ms=1_000 + EXPIRY_MS - 1, expiry_ms=EXPIRY_MS)
    assert not still_binding(lock, final_height=0, hash_at=hash_at, now_ms=1_000 + EXPIRY_MS, expiry_ms=EXPIRY_MS)
    assert binding_locks([lock], final_height=0, hash_at=hash_at, now_ms=1_000 + EXPIRY_MS,
                         expiry_ms=EXPIRY_MS) == []


def test_a_lock_needs_a_fork_below_the_block():
    with pytest.raises(ValueError, match="does not undo"):
        lock_for(5, b"ours", 5, now_ms=0)


# --- three nodes, by hand --------------------------------------------------------------------


class Node:
    """One validator's chain, with the node's fork choice (qmemo.node.intake) and producer
    (qmemo.node.producer) reduced to what decides finality: no mempool, no network."""

    def __init__(self, net: Devnet, store: ChainStore, index: int) -> None:
        self.net = net
        self.index = index
        self.chain = node_chain(store, quorum=quorum(3), validator_index=index, lock_expiry_ms=EXPIRY_MS)

    def produce(self, *, obey_locks: bool = True) -> Block | None:
        """Our block on our tip, stamped in our turn; None if a lock forbids it."""
        chain = self.chain
        if obey_locks and chain.producer_locks(NOW_MS):
            return None
        height = chain.height + 1
        key = falcon_keys()[self.index]
        block = make_block(chain_id=self.net.genesis.chain_id, height=height, previous_hash=chain.tip_hash,
                           timestamp_ms=next_turn_ms(self.net.genesis, self.index, height, chain.tip_timestamp_ms, 0),
                           producer_index=self.index, transactions=(), sign=signer(key.scheme, key.secret_key))
        self._apply([block])
        return block

    def receive(self, branch: list[Block]) -> bool:
        """A branch whose first block's parent we hold: switch to it if the fork rule says so."""
        chain = self.chain
        fork = branch[0].height - 1
        assert chain.hash_at(fork) == branch[0].header.previous_hash
        ours = chain.blocks_above(fork)
        while branch and ours and branch[0].hash == ours[0].hash:
            branch, ours, fork = branch[1:], ours[1:], fork + 1
        if not branch or (ours and not branch_is_better(ours, branch, chain.quorum)):
            return False
        chain.rollback_to(fork, now_ms=NOW_MS)
        self._apply(branch)
        return True

    def _apply(self, blocks: list[Block]) -> None:
        for block in blocks:
            self.chain.apply(node_block(block), self.net.cache, kernel().table, NOW_MS)
        self.chain.made_durable()

    def final_hash(self, height: int) -> bytes | None:
        return self.chain.hash_at(height) if height <= self.chain.final_height else None


@pytest.fixture
def nodes(tmp_path):
    net = Devnet()
    stores = [ChainStore(tmp_path / f"node-{i}.sqlite", net.genesis) for i in range(3)]
    made = [Node(net, store, i) for i, store in enumerate(stores)]
    # Blocks 1 (validator 0) and 2 (validator 1) everywhere: 1 is final on every node.
    for index in (0, 1):
        block = made[index].produce()
        for node in made:
            node.receive([block])
    assert [node.chain.final_height for node in made] == [1, 1, 1]
    yield made
    for store in stores:
        store.close()


def _overloaded_height_3(nodes: list[Node], *, obey_locks: bool) -> tuple[Block, Block, Block]:
    """Height 3 is validator 2's primary slot. Its block A is late: validator 0 takes its
    fallback turn and makes A'; node-1 hears A' first and builds B' on it in its own
    fallback turn (A' is final on node-1: validators 0 and 1 built on it); then node-0
    hears A, stamped earlier, and the fork rule moves it there (equal length, no final
    block on either side: the earlier timestamp wins)."""
    n0, n1, n2 = nodes
    a = n2.produce()
    a_prime = n0.produce()
    assert a.header.timestamp_ms < a_prime.header.timestamp_ms
    n1.receive([a_prime])
    b_prime = n1.produce(obey_locks=obey_locks)
    assert n1.final_hash(3) == a_prime.hash
    assert n0.receive([a])          # node-0 leaves its own A' for A
    return a, a_prime, b_prime


def test_without_the_lock_a_switched_validator_finalizes_a_second_block_at_one_height(nodes):
    n0, n1, n2 = nodes
    a, a_prime, _ = _overloaded_height_3(nodes, obey_locks=False)
    n0.produce(obey_locks=False)     # validator 0 builds on A, having built A'
    assert n0.final_hash(3) == a.hash and n1.final_hash(3) == a_prime.hash      # the split


def test_with_the_lock_every_node_ends_on_one_final_branch(nodes):
    n0, n1, n2 = nodes
    a, a_prime, b_prime = _overloaded_height_3(nodes, obey_locks=True)
    assert n0.chain.producer_locks(NOW_MS) == [ProducerLock(3, a_prime.hash, 2, NOW_MS)]
    assert n0.produce() is None                       # its turn passes: A gets no second producer
    assert n0.final_hash(3) is None                    # A: validator 2 alone
    # node-1's branch reaches the others: a final block above the fork beats one without.
    for node in (n0, n2):
        assert node.receive([a_prime, b_prime])
    assert n0.chain.producer_locks(NOW_MS) == []      # its own A' is back on its chain
    assert n2.chain.locks and n2.chain.producer_locks(NOW_MS) == []   # A undone, but this branch is final above it
    assert {node.final_hash(3) for node in nodes} == {a_prime.hash}
    # And the chain goes on: validator 2 builds on it, everyone follows, nothing final changes.
    block = n2.produce()
    for node in (n0, n1):
        assert node.receive([block])
    assert {node.chain.tip_hash for node in nodes} == {block.hash}
    assert {node.final_hash(3) for node in nodes} == {a_prime.hash}


def test_a_switch_to_a_branch_final_above_the_fork_does_not_lock(nodes):
    n0, n1, n2 = nodes
    a = n2.produce()                      # validator 2's block at 3, on node-2 only
    a_prime = n0.produce()
    n1.receive([a_prime])
    b_prime = n1.produce()                # A' final on node-1
    assert n2.receive([a_prime, b_prime])
    assert n2.chain.producer_locks(NOW_MS) == [] and n2.produce() is not None
    assert n2.chain.hash_at(3) == a_prime.hash and a.hash != a_prime.hash


def test_a_restarted_validator_keeps_the_lock_its_switch_set(nodes):
    # Locks lived in memory only: validator 0, restarted right after leaving its A' for A,
    # would build on A at once - the split the lock exists to prevent.
    n0, _, _ = nodes
    a, a_prime, _ = _overloaded_height_3(nodes, obey_locks=True)
    chain, store = n0.chain, n0.chain.store
    # What the node's make_durable writes after that switch: the branch and its locks, at once.
    store.keep_branch(0, [(block.height, block.hash, block.encode()) for block in chain.blocks_above(0)],
                      list(chain.locks))
    restarted = Node(n0.net, store, 0)
    restarted._apply([Block.decode(data) for data in store.recent_blocks()])
    assert restarted.chain.hash_at(3) == a.hash
    assert restarted.chain.producer_locks(NOW_MS) == [ProducerLock(3, a_prime.hash, 2, NOW_MS)]
    assert restarted.produce() is None
    assert restarted.chain.producer_locks(NOW_MS + EXPIRY_MS) == []        # and it still expires
    assert node_chain(store, quorum=quorum(3)).locks == []                     # an observer has none


def test_a_branch_stored_without_locks_keeps_the_stored_ones(nodes):
    n0, _, _ = nodes
    store = n0.chain.store
    lock = ProducerLock(3, bytes(range(64)), 2, NOW_MS)
    store.keep_branch(0, [], [lock])
    store.keep_branch(0, [])
    assert store.producer_locks() == [lock]
    store.keep_branch(0, [], [])
    assert store.producer_locks() == []
