"""`apply_block`, rule by rule: a valid block applies; each mutation is rejected with its code.

In the manner of ethereum/consensus-specs: one helper, `run_block_processing`, and one
tiny test per mutation. A mutated header is signed again by the producer, so each test
isolates the one rule it names (and fails if that rule is removed). Every rejection
must leave the state exactly as it was.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from qmemo.core.block import Block
from qmemo.core.codec import U64_MAX
from qmemo.core.genesis import parse_genesis
from qmemo.core.state import AppliedBlock
from qmemo.errors import DecodeError, InvalidBlock
from qmemo.node.chain import apply_to_ledger
from qmemo.node.ledger import PoolLimits, new_ledger
from tests.unit.chain_kit import INITIAL_BALANCE, Devnet, address_of, genesis_document, kernel, node_block, schemes


def run_block_processing(net: Devnet, block: Block, code: str | None = None,
                         now_ms: int | None = None) -> AppliedBlock | None:
    """Apply `block`; if `code` is given, expect InvalidBlock(code) and an untouched state.
    The node's own path (its native ledger: qmemo.node.chain.apply_to_ledger) gets the
    same block on the same state and must end the same way: the same code and sentence,
    or the same accounts afterwards."""
    native = _node_path(net, block, block.header.timestamp_ms if now_ms is None else now_ms)
    if code is None:
        applied = net.apply(block, now_ms)
        assert native == {a: (acc.balance, acc.nonce) for a, acc in net.state.accounts.items()}, native
        return applied
    before = (dict(net.state.accounts), net.state.height, net.state.tip_hash, net.state.tip_timestamp_ms)
    with pytest.raises(InvalidBlock) as rejected:
        net.apply(block, now_ms)
    assert rejected.value.code == code, rejected.value
    assert rejected.value.http_status == 422
    assert (net.state.accounts, net.state.height, net.state.tip_hash, net.state.tip_timestamp_ms) == before
    if native[0] == "undecodable":
        # A header whose version or count does not match its body never reaches the node's
        # body rules: its decoder refuses the bytes first (400, not 422).
        assert code in ("unsupported_version", "wrong_tx_count"), native
    else:
        assert native == (code, rejected.value.detail), native
    return None


def _node_path(net: Devnet, block: Block, now_ms: int) -> dict | tuple[str, str]:
    """`block` through the node's path on a ledger holding net's state: the accounts
    after it, or the (code, sentence) it was refused with (before anything changed)."""
    ledger = new_ledger(net.genesis, PoolLimits())
    for address, account in net.state.accounts.items():
        ledger.set_account(address, account.balance, account.nonce)
    state = net.state
    try:
        received = node_block(block)
    except DecodeError as exc:
        return "undecodable", exc.code
    try:
        apply_to_ledger(net.genesis, ledger, received, state.height, state.tip_hash, state.tip_timestamp_ms,
                        net.cache, kernel().table, now_ms)
    except InvalidBlock as exc:
        assert {a: (acc.balance, acc.nonce) for a, acc in state.accounts.items()} == _accounts(ledger)
        return exc.code, exc.detail
    return _accounts(ledger)


def _accounts(ledger) -> dict[bytes, tuple[int, int]]:
    packed = ledger.accounts()
    return {packed[i:i + 32]: (int.from_bytes(packed[i + 32:i + 40], "little"),
                               int.from_bytes(packed[i + 40:i + 48], "little")) for i in range(0, len(packed), 48)}


@pytest.fixture
def net() -> Devnet:
    return Devnet()


# --- valid blocks -------------------------------------------------------------------------

def test_valid_block_moves_amounts_bumps_nonces_and_pays_fees_to_producer(net):
    block = net.next_block([net.transfer(net.alice, net.bob, 100, fee=3), net.transfer(net.alice, net.bob, 5, fee=2)])
    applied = run_block_processing(net, block)
    assert net.state.account(address_of(net.alice)).balance == INITIAL_BALANCE - 110
    assert net.state.account(address_of(net.alice)).nonce == 2
    assert net.state.account(address_of(net.bob)).balance == INITIAL_BALANCE + 105
    producer = net.genesis.validators[0].address
    assert net.state.account(producer).balance == 5 and applied.fees == 5
    assert net.state.height == 1 and net.state.tip_hash == block.hash
    assert set(applied.accounts) == {address_of(net.alice), address_of(net.bob), producer}


def test_empty_block_is_valid_and_extends_the_chain(net):
    run_block_processing(net, net.next_block())
    run_block_processing(net, net.next_block())
    assert net.state.height == 2


def test_each_scheduled_validator_in_turn_extends_the_chain(net):
    for height in range(1, 5):
        block = net.next_block([net.transfer(net.carol, net.alice, 1)])
        assert block.header.producer_index == (height - 1) % 3
        run_block_processing(net, block)
    assert net.state.account(address_of(net.carol)).nonce == 4


def test_fallback_producer_may_produce_once_the_primary_missed_its_turn(net):
    run_block_processing(net, net.next_block(producer=1))
    assert net.state.height == 1


def test_self_transfer_costs_only_the_fee(net):
    run_block_processing(net, net.next_block([net.transfer(net.alice, net.alice, 50, fee=4)]))
    assert net.state.account(address_of(net.alice)).balance == INITIAL_BALANCE - 4


def test_total_supply_is_conserved(net):
    run_block_processing(net, net.next_block([net.transfer(net.alice, net.bob, 7, fee=9),
                                              net.transfer(net.carol, net.mallory, 3, fee=1)]))
    assert sum(a.balance for a in net.state.accounts.values()) == 3 * INITIAL_BALANCE


# --- the header -----------------------------------------------------------------------------

def test_wrong_height(net):
    run_block_processing(net, net.next_block(height=2), "wrong_height")


def test_wrong_previous_hash(net):
    run_block_processing(net, net.next_block(previous_hash=b"\x01" * 64), "wrong_previous_hash")


def test_wrong_chain_id_in_header(net):
    run_block_processing(net, net.next_block(chain_id=8), "wrong_chain_id")


def test_unsupported_block_version(net):
    run_block_processing(net, net.next_block(version=3), "unsupported_version")


def test_a_shards_block_version_on_an_unsharded_chain(net):
    run_block_processing(net, net.next_block(version=2, receipts_bytes=0, receipts_root=bytes(64)),
                         "unsupported_version")


def test_timestamp_before_the_slot_opens(net):
    block = net.next_block()
    run_block_processing(net, net.next_block(timestamp_ms=block.header.timestamp_ms - 1), "timestamp_too_early")


def test_timestamp_too_far_ahead_of_now(net):
    block = net.next_block()
    drift = net.genesis.max_clock_drift_ms
    run_block_processing(net, block, "timestamp_in_future", now_ms=block.header.timestamp_ms - drift - 1)
    run_block_processing(net, block, now_ms=block.header.timestamp_ms - drift)


def test_wrong_producer(net):
    # Validator 1, signing honestly, in validator 0's window.
    run_block_processing(net, net.next_block(producer_index=1, signed_by=net.validators[1]), "wrong_producer")


def test_producer_index_beyond_the_validator_list(net):
    run_block_processing(net, net.next_block(producer_index=3), "wrong_producer")


def test_bad_header_signature(net):
    run_block_processing(net, net.next_block(signed_by=net.validators[1]), "bad_header_signature")


def test_header_signature_over_other_contents(net):
    block = net.next_block()
    forged = replace(block.header, timestamp_ms=block.header.timestamp_ms + 1, signature=block.header.signature)
    run_block_processing(net, Block(forged, ()), "bad_header_signature")


# --- the body's commitment ----------------------------------------------------------------

def test_wrong_transaction_count(net):
    block = net.next_block([net.transfer(net.alice, net.bob)], tx_count=2)
    run_block_processing(net, block, "wrong_tx_count")


def test_too_many_transactions():
    net = Devnet(genesis=parse_genesis(genesis_document(max_block_transactions=1), schemes()))
    block = net.next_block([net.transfer(net.alice, net.bob), net.transfer(net.bob, net.alice)])
    run_block_processing(net, block, "too_many_transactions")


def test_wrong_merkle_root(net):
    other = net.transfer(net.bob, net.alice)
    block = net.next_block([net.transfer(net.alice, net.bob)])
    run_block_processing(net, Block(block.header, (other,)), "wrong_merkle_root")


def test_transactions_reordered_change_the_root(net):
    first, second = net.transfer(net.alice, net.bob), net.transfer(net.bob, net.alice)
    block = net.next_block([first, second])
    run_block_processing(net, Block(block.header, (second, first)), "wrong_merkle_root")


def test_duplicate_transaction(net):
    tx = net.transfer(net.alice, net.bob)
    run_block_processing(net, net.next_block([tx, tx]), "duplicate_transaction")


# --- each transaction ----------------------------------------------------------------------

def test_replayed_nonce_within_a_block(net):
    first = net.transfer(net.alice, net.bob, 1, nonce=0)
    run_block_processing(net, net.next_block([first, net.transfer(net.alice, net.bob, 2, nonce=0)]), "replayed_nonce")


def test_replayed_nonce_from_an_earlier_block(net):
    run_block_processing(net, net.next_block([net.transfer(net.alice, net.bob, 1, nonce=0)]))
    run_block_processing(net, net.next_block([net.transfer(net.alice, net.bob, 2, nonce=0)]), "replayed_nonce")


def test_replayed_transaction_from_an_earlier_block(net):
    tx = net.transfer(net.alice, net.bob)
    run_block_processing(net, net.next_block([tx]))
    run_block_processing(net, net.next_block([tx]), "replayed_nonce")


def test_nonce_gap(net):
    run_block_processing(net, net.next_block([net.transfer(net.alice, net.bob, nonce=1)]), "nonce_gap")


def test_insufficient_balance(net):
    run_block_processing(net, net.next_block([net.transfer(net.alice, net.bob, INITIAL_BALANCE, fee=1)]),
                         "insufficient_balance")


def test_balance_spent_by_an_earlier_transaction_in_the_block(net):
    block = net.next_block([net.transfer(net.alice, net.bob, INITIAL_BALANCE - 11, fee=1),
                            net.transfer(net.alice, net.bob, 10, fee=1)])
    run_block_processing(net, block, "insufficient_balance")


def test_fee_below_the_genesis_minimum(net):
    run_block_processing(net, net.next_block([net.transfer(net.alice, net.bob, 10, fee=0)]), "fee_too_low")


def test_whole_balance_may_be_spent(net):
    run_block_processing(net, net.next_block([net.transfer(net.alice, net.bob, INITIAL_BALANCE - 1, fee=1)]))
    assert net.state.account(address_of(net.alice)).balance == 0


def test_amount_plus_fee_overflowing_u64(net):
    run_block_processing(net, net.next_block([net.transfer(net.alice, net.bob, U64_MAX, fee=1)]), "amount_overflow")


def test_signature_by_a_key_that_does_not_match_the_sender(net):
    # Alice's key names the sender; Mallory signs.
    tx = net.transfer(net.alice, net.mallory, 500, signed_by=net.mallory)
    run_block_processing(net, net.next_block([tx]), "bad_signature")


def test_signers_own_key_spends_only_from_the_signers_own_address(net):
    # Mallory's key and signature are consistent, so the sender is Mallory's (empty) account.
    tx = net.transfer(net.mallory, net.mallory, 500)
    assert tx.sender == address_of(net.mallory) != address_of(net.alice)
    run_block_processing(net, net.next_block([tx]), "insufficient_balance")


def test_tampered_amount_breaks_the_signature(net):
    tx = net.transfer(net.alice, net.bob, 1)
    tampered = replace(tx, amount=1000)
    assert tampered.signature == tx.signature
    run_block_processing(net, net.next_block([tampered]), "bad_signature")


def test_signature_longer_than_the_schemes_maximum(net):
    tx = net.transfer(net.alice, net.bob)
    oversized = replace(tx, signature=tx.signature + bytes(753 - len(tx.signature)))
    run_block_processing(net, net.next_block([oversized]), "signature_too_long")


def test_empty_signature(net):
    run_block_processing(net, net.next_block([replace(net.transfer(net.alice, net.bob), signature=b"")]),
                         "bad_signature_length")


def test_public_key_of_the_wrong_length(net):
    tx = net.transfer(net.alice, net.bob)
    run_block_processing(net, net.next_block([replace(tx, public_key=tx.public_key[:-1])]), "bad_public_key_length")


def test_unknown_scheme(net):
    tx = net.transfer(net.alice, net.bob)
    run_block_processing(net, net.next_block([replace(tx, scheme_id=99)]), "unknown_scheme")


def test_scheme_not_allowed_for_transactions():
    net = Devnet(genesis=parse_genesis(genesis_document(tx_schemes=["Falcon-512"]), schemes()))
    run_block_processing(net, net.next_block([net.transfer(net.carol, net.alice)]), "scheme_not_allowed")


def test_transaction_signed_for_another_chain(net):
    run_block_processing(net, net.next_block([net.transfer(net.alice, net.bob, chain_id=8)]), "wrong_chain_id")


def test_signature_is_checked_for_every_transaction_not_only_the_first(net):
    good = net.transfer(net.alice, net.bob)
    bad = net.transfer(net.bob, net.alice, signed_by=net.mallory)
    with pytest.raises(InvalidBlock, match="transaction 1"):
        net.apply(net.next_block([good, bad]))


# --- the signature cache ---------------------------------------------------------------------

def test_transactions_verified_at_admission_are_not_verified_again(net):
    txs = [net.transfer(net.alice, net.bob), net.transfer(net.bob, net.alice)]
    assert all(net.cache.verify_transaction(tx) for tx in txs)
    assert (net.cache.hits, net.cache.misses) == (0, 2)
    run_block_processing(net, net.next_block(txs))
    assert (net.cache.hits, net.cache.misses) == (2, 2)

