"""Mempool rules: de-duplication, per-sender nonce order, feasibility, bounds, selection,
and eviction of what a block makes stale - each rejection with its reason code."""

from __future__ import annotations

import pytest

from qmemo.core.codec import U64_MAX
from qmemo.core.mempool import Evicted, Mempool, MempoolLimits
from qmemo.core.state import Account
from qmemo.core.transaction import Transaction
from qmemo.errors import InvalidTransaction, MempoolFull
from tests.unit.chain_kit import Devnet

RICH = Account(balance=1_000, nonce=0)


def tx(sender: int, nonce: int, amount: int = 10, fee: int = 1, payload: bytes = b"") -> Transaction:
    """An (unsigned) transfer from account number `sender`: signatures are not the mempool's business."""
    return Transaction(1, 1, bytes([sender]) * 8, nonce, bytes(32), amount, fee, payload)


def rejected(pool: Mempool, transaction: Transaction, account: Account = RICH) -> str:
    with pytest.raises((InvalidTransaction, MempoolFull)) as error:
        pool.add(transaction, account)
    return error.value.code


def test_added_transaction_is_pending_and_counted():
    pool = Mempool()
    assert pool.add(tx(1, 0), RICH)
    assert tx(1, 0).id in pool and pool.get(tx(1, 0).id) == tx(1, 0)
    assert len(pool) == 1 and pool.size_bytes == tx(1, 0).size and pool.pending_count(tx(1, 0).sender) == 1


def test_duplicate_is_reported_not_added_twice():
    pool = Mempool()
    pool.add(tx(1, 0), RICH)
    assert pool.add(tx(1, 0), RICH) is False and pool.check(tx(1, 0), RICH) is False
    assert len(pool) == 1


def test_check_does_not_add():
    pool = Mempool()
    assert pool.check(tx(1, 0), RICH) and len(pool) == 0


def test_nonces_must_follow_the_account_then_each_other():
    pool = Mempool()
    pool.add(tx(1, 0), RICH)
    pool.add(tx(1, 1), RICH)
    assert rejected(pool, tx(1, 3)) == "nonce_gap"
    assert rejected(pool, tx(1, 1, amount=11)) == "nonce_conflict"
    assert rejected(pool, tx(2, 4), Account(1_000, 5)) == "replayed_nonce"


def test_pending_spending_counts_against_the_balance():
    pool = Mempool()
    account = Account(balance=25, nonce=0)
    pool.add(tx(1, 0, amount=10, fee=1), account)
    pool.add(tx(1, 1, amount=10, fee=1), account)
    assert rejected(pool, tx(1, 2, amount=3, fee=1), account) == "insufficient_balance"
    assert pool.add(tx(1, 2, amount=2, fee=1), account)


def test_pending_cost_is_what_a_senders_pending_transactions_spend_and_drops_with_their_block():
    pool = Mempool()
    first, second = tx(1, 0, amount=10, fee=2), tx(1, 1, amount=5, fee=1)
    pool.add(first, RICH)
    pool.add(second, RICH)
    assert (pool.pending_cost(first.sender), pool.pending_cost(tx(2, 0).sender)) == (18, 0)
    pool.remove_block([first], lambda sender: Account(RICH.balance - 12, 1))
    assert pool.pending_cost(first.sender) == 6


def test_amount_plus_fee_overflow():
    assert rejected(Mempool(), tx(1, 0, amount=U64_MAX, fee=1), Account(U64_MAX, 0)) == "amount_overflow"


def test_per_sender_limit():
    pool = Mempool(MempoolLimits(max_per_sender=2))
    pool.add(tx(1, 0), RICH)
    pool.add(tx(1, 1), RICH)
    assert rejected(pool, tx(1, 2)) == "sender_limit"
    assert pool.add(tx(2, 0), RICH)


def test_count_limit():
    pool = Mempool(MempoolLimits(max_transactions=2))
    pool.add(tx(1, 0), RICH)
    pool.add(tx(2, 0), RICH)
    error_code = rejected(pool, tx(3, 0))
    assert error_code == "mempool_full" and MempoolFull.http_status == 429


def test_byte_limit():
    pool = Mempool(MempoolLimits(max_bytes=2 * tx(1, 0).size + 10))
    pool.add(tx(1, 0), RICH)
    pool.add(tx(2, 0), RICH)
    assert rejected(pool, tx(3, 0)) == "mempool_full"


def test_rule_violations_are_reported_before_a_full_pool():
    pool = Mempool(MempoolLimits(max_transactions=1))
    pool.add(tx(1, 0), RICH)
    assert rejected(pool, tx(2, 5)) == "nonce_gap"


def test_select_takes_the_first_n_in_arrival_order():
    pool = Mempool()
    arrivals = [tx(1, 0), tx(2, 0), tx(1, 1), tx(3, 0), tx(2, 1)]
    for t in arrivals:
        pool.add(t, RICH)
    assert pool.select(3) == arrivals[:3]
    assert pool.select(100) == arrivals


def test_block_removes_what_it_committed_silently():
    pool = Mempool()
    for t in (tx(1, 0), tx(1, 1), tx(2, 0)):
        pool.add(t, RICH)
    evicted = pool.remove_block([tx(1, 0)], lambda sender: Account(989, 1))
    assert evicted == [] and len(pool) == 2 and tx(1, 0).id not in pool
    assert pool.size_bytes == 2 * tx(1, 0).size


def test_block_using_a_pending_nonce_with_another_transaction_evicts_it_as_stale():
    pool = Mempool()
    pool.add(tx(1, 0, amount=10), RICH)
    pool.add(tx(1, 1), RICH)
    other = tx(1, 0, amount=20)   # same nonce, committed elsewhere
    evicted = pool.remove_block([other], lambda sender: Account(979, 1))
    assert evicted == [Evicted(tx(1, 0, amount=10), "nonce_stale")]
    assert pool.select(10) == [tx(1, 1)]


def test_block_that_drains_the_balance_evicts_the_unpayable_and_everything_after():
    pool = Mempool()
    for nonce in range(4):
        pool.add(tx(1, nonce, amount=100), RICH)
    committed = tx(1, 0, amount=100)
    # After the block the sender has 150 left (it also spent elsewhere): nonce 1 fits, nonce 2 does not.
    evicted = pool.remove_block([committed], lambda sender: Account(150, 1))
    assert [(e.tx.nonce, e.reason) for e in evicted] == [(2, "insufficient_balance"), (3, "nonce_gap")]
    assert pool.select(10) == [tx(1, 1, amount=100)]
    assert pool.pending_count(committed.sender) == 1


def test_sender_left_with_nothing_pending_is_forgotten():
    pool = Mempool(MempoolLimits(max_per_sender=1))
    pool.add(tx(1, 0), RICH)
    pool.remove_block([tx(1, 0)], lambda sender: Account(989, 1))
    assert pool.pending_count(tx(1, 0).sender) == 0
    assert pool.add(tx(1, 1), Account(989, 1))


def test_after_a_block_the_pool_admits_the_next_nonces_against_the_new_balance():
    pool = Mempool()
    pool.add(tx(1, 0, amount=500), Account(1_000, 0))
    pool.remove_block([tx(1, 0, amount=500)], lambda sender: Account(499, 1))
    assert rejected(pool, tx(1, 1, amount=499), Account(499, 1)) == "insufficient_balance"
    assert pool.add(tx(1, 1, amount=498), Account(499, 1))


def test_a_block_selected_from_the_pool_is_valid():
    net = Devnet()
    pool = Mempool()
    for sender in (net.alice, net.bob, net.carol):
        for _ in range(3):
            t = net.transfer(sender, net.alice, 5)
            pool.add(t, net.state.account(t.sender))
    block = net.next_block(pool.select(6))
    net.apply(block)
    assert pool.remove_block(block.transactions, net.state.account) == []
    assert len(pool) == 3
    net.apply(net.next_block(pool.select(10)))
    assert net.state.height == 2
