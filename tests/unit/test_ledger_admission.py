"""The node's native ledger against the reference admission (qmemo.core.pool) and
apply_block: the same batches, verdicts and blocks, every outcome, code, sentence,
relay, eviction and account compared (tests/unit/ledger_kit.py)."""

from __future__ import annotations

import random

import pytest

from dataclasses import replace

from qmemo.core.block import Block
from qmemo.crypto.verifier import signer
from qmemo.node.ledger import account_of, native

from tests.unit.ledger_kit import CHAIN_ID, SMALL, Twins, address_of, ed_keys, mutate, sign_tx

FUNDED = range(3, 9)


def test_a_valid_batch_is_accepted_journaled_and_relayed_alike():
    twins = Twins()
    alice, bob = ed_keys()[3], ed_keys()[4]
    outcomes = twins.admit([sign_tx(alice, n, address_of(bob)).encoded for n in range(3)])
    assert [o.status for o in outcomes] == ["accepted"] * 3


def test_every_refusal_gives_the_same_code_and_sentence():
    twins = Twins()
    keys = ed_keys()
    alice, bob, broke = keys[3], keys[4], keys[-1]
    to = address_of(bob)
    batch = [
        sign_tx(alice, 0, to).encoded,
        sign_tx(alice, 0, to).encoded,                       # duplicate in the batch
        sign_tx(alice, 0, to, amount=7).encoded,             # another with a pending nonce
        sign_tx(alice, 9, to).encoded,                       # past the held window: gap
        sign_tx(alice, 1, to, fee=0).encoded,                # fee too low
        sign_tx(alice, 1, to, chain_id=CHAIN_ID + 1).encoded,  # another chain
        sign_tx(alice, 1, to, amount=10**6).encoded,         # more than the balance
        sign_tx(alice, 1, to, amount=2**64 - 1, fee=2).encoded,  # overflow
        sign_tx(broke, 0, to).encoded,                       # an unfunded key
        sign_tx(alice, 2, to).encoded,                       # held (after a rejected 1)
        mutate(random.Random(1), sign_tx(bob, 0, to)),
        b"\x01",                                             # not a transaction
    ]
    outcomes = twins.admit(batch)
    assert {o.error.code for o in outcomes if o.error} >= {"nonce_conflict", "nonce_gap", "fee_too_low",
                                                            "wrong_chain_id", "insufficient_balance",
                                                            "amount_overflow", "truncated"}


def test_limits_of_the_pool_and_the_held_queue_alike():
    twins = Twins()
    keys = ed_keys()
    to = address_of(keys[4])
    # per sender: SMALL allows 6 pending and 3 held; the window is 4
    twins.admit([sign_tx(keys[3], n, to).encoded for n in range(8)])
    twins.admit([sign_tx(keys[5], n, to).encoded for n in (2, 3, 4, 5, 6)])
    # the pool: 30 at most
    for k in FUNDED:
        twins.admit([sign_tx(keys[k], n, to, amount=1).encoded for n in range(10, 12)])


def test_two_batches_in_flight_at_once_are_judged_alike():
    twins = Twins()
    keys = ed_keys()
    to = address_of(keys[4])
    first = twins.precheck([sign_tx(keys[3], n, to).encoded for n in range(3)])
    second = twins.precheck([sign_tx(keys[3], n, to).encoded for n in (0, 3, 4)])
    twins.compare_commit(*twins.commit(second, 0.0, True))
    twins.compare_commit(*twins.commit(first, 0.0, True))


def test_blocks_commit_evict_and_release_alike():
    twins = Twins(limits=SMALL)
    keys = ed_keys()
    to = address_of(keys[5])
    twins.admit([sign_tx(keys[3], n, to).encoded for n in (0, 1, 3, 4)])     # 3, 4 held
    block, body = twins.selected_block(1)
    assert twins.apply(block, body) is None
    # another transaction with alice's nonce 1 in a block: her pending 1 goes stale
    other = sign_tx(keys[3], 1, to, amount=6)
    assert twins.apply(twins.block_of([other])) is None
    twins.admit([sign_tx(keys[3], 2, to).encoded])          # fills the gap: 3 and 4 join
    twins.expire(10.0)


def test_a_branch_switch_puts_transactions_back_alike():
    twins = Twins()
    keys = ed_keys()
    to = address_of(keys[6])
    twins.admit([sign_tx(keys[3], n, to).encoded for n in range(4)])
    block, body = twins.selected_block(2)
    assert twins.apply(block, body) is None
    twins.undo_last()


@pytest.mark.parametrize("change, code", [
    ({"tx_count": 1}, "wrong_tx_count"), ({"merkle_root": b"\x00" * 64}, "wrong_merkle_root")])
def test_a_header_that_lies_about_the_body_is_refused_alike(change, code):
    twins = Twins()
    keys = ed_keys()
    twins.admit([sign_tx(keys[3], n, address_of(keys[4])).encoded for n in range(2)])
    block, body = twins.selected_block(2)
    producer = keys[block.header.producer_index]
    header = replace(block.header, **change).signed(signer(producer.scheme, producer.secret_key))
    assert twins.apply(Block(header, block.transactions), body) == code


def test_a_block_with_a_duplicate_or_a_bad_transaction_is_refused_alike():
    twins = Twins()
    keys = ed_keys()
    to = address_of(keys[4])
    tx = sign_tx(keys[3], 0, to)
    assert twins.apply(twins.block_of([tx, tx])) == "duplicate_transaction"
    assert twins.apply(twins.block_of([sign_tx(keys[3], 5, to)])) == "nonce_gap"
    assert twins.apply(twins.block_of([sign_tx(keys[-1], 0, to)])) == "insufficient_balance"
    bad = sign_tx(keys[3], 0, to)
    forged = bad.__class__.decode(bad.encoded[:-1] + bytes([bad.encoded[-1] ^ 1]))
    assert twins.apply(twins.block_of([forged])) == "bad_signature"
    too_many = [sign_tx(keys[3], n, to, amount=1) for n in range(twins.genesis.max_block_transactions + 1)]
    assert twins.apply(twins.block_of(too_many)) == "too_many_transactions"


@pytest.mark.parametrize("seed", range(6))
def test_random_histories_agree(seed):
    """Batches of valid, future, replayed, duplicated and broken transactions, two at a time
    in flight, blocks from the pool and from elsewhere, branch switches and expiries."""
    rng = random.Random(seed)
    twins = Twins()
    keys = ed_keys()
    senders = [keys[k] for k in FUNDED] + [keys[-1]]
    next_nonce = {address_of(k): 0 for k in senders}
    sent: list = []
    now = 0.0
    for _ in range(60):
        now += rng.random()
        action = rng.random()
        if action < 0.55:
            encodings = []
            for _ in range(rng.randrange(1, 12)):
                key = rng.choice(senders)
                address = address_of(key)
                roll = rng.random()
                if roll < 0.5:
                    nonce = next_nonce[address]
                    next_nonce[address] += 1
                elif roll < 0.7:
                    nonce = next_nonce[address] + rng.randrange(1, 7)
                else:
                    nonce = max(0, next_nonce[address] - rng.randrange(1, 3))
                tx = sign_tx(key, nonce, address_of(rng.choice(keys)), amount=rng.choice((1, 5, 50, 400)),
                             fee=rng.choice((0, 1, 2)))
                sent.append(tx)
                encoding = tx.encoded
                if rng.random() < 0.08:
                    encoding = mutate(rng, tx)
                elif sent and rng.random() < 0.1:
                    encoding = rng.choice(sent).encoded
                encodings.append(encoding)
            if rng.random() < 0.3:
                other = twins.precheck(encodings[: len(encodings) // 2])
                mine = twins.precheck(encodings[len(encodings) // 2:])
                twins.compare_commit(*twins.commit(mine, now, rng.random() < 0.5))
                twins.compare_commit(*twins.commit(other, now, True))
            else:
                twins.admit(encodings, now, rng.random() < 0.8)
        elif action < 0.8:
            if rng.random() < 0.7:
                block, body = twins.selected_block(rng.randrange(0, 15))
                twins.apply(block, body)
            elif sent:
                picks = rng.sample(sent, min(len(sent), rng.randrange(1, 4)))
                twins.apply(twins.block_of(picks))
        elif action < 0.9 and twins.undo:
            twins.undo_last()
        else:
            twins.expire(now - rng.uniform(0, 5))


def test_a_balance_past_two_to_the_64_is_an_overflow_not_out_of_memory_and_changes_nothing():
    # The genesis caps the supply below 2^64, so only an inconsistent ledger gets here; it
    # must say so (OverflowError), not claim memory ran out, and leave every account as it was.
    twins = Twins()
    rich = address_of(ed_keys()[3])
    twins.ledger.set_account(rich, 2**64 - 1, 0)
    block = twins.block_of([])
    body = native().decode_body(twins.kernel.table, CHAIN_ID, block.encode()[len(block.header.encoded):], 0)
    producer = twins.genesis.validators[block.header.producer_index].address
    with pytest.raises(OverflowError, match="past 2\\^64"):
        twins.ledger.apply(body, 0, block.header.merkle_root, twins.genesis.max_block_transactions, producer,
                           twins.kernel.table, rich + (1).to_bytes(8, "little"))
    assert account_of(twins.ledger, rich).balance == 2**64 - 1
