"""Cross-shard transfers and their receipts, rule by rule, on a two-shard devnet.

A transfer from shard 0 to shard 1 is debited on shard 0 (nothing credited there); once
its block is final, its receipt credits it on shard 1, once. Each receipt rule has a
mutation refused with its own code (qmemo.core.receipts, qmemo.core.refusals). Every
block goes through both the reference (`apply_block`) and the node's path (the native
ledger: qmemo.node.chain.apply_to_ledger), which must agree on the code and sentence, or
on every account afterwards - as tests/unit/test_apply_block.py does for the other rules.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache

import pytest

from qmemo.core.block import Block, BlockHeader, receipts_root
from qmemo.core.merkle import MerkleProof
from qmemo.core.receipts import (ReceiptBundle, ReceiptEntry, check_receipts, decode_section, encode_section,
                                 receipt_id)
from qmemo.core.shards import parse_sharded_genesis, shard_of
from qmemo.core.state import AppliedBlock
from qmemo.crypto.schemes import get_scheme
from qmemo.crypto.verifier import scheme_table, signer
from qmemo.errors import ConfigError, InvalidBlock, InvalidReceipt
from qmemo.node.chain import apply_to_ledger
from qmemo.node.ledger import PoolLimits, body_of, native, new_ledger
from tests.unit.chain_kit import address_of
from tests.unit.shard_kit import (BALANCE, CHAIN_IDS, ShardChain, account, sharded_genesis,
                                  sharded_genesis_document, total_supply, validators)


@cache
def kernel(chain_id: int):
    from qmemo.crypto.admit_kernel import AdmitKernel
    return AdmitKernel(chain_id, ["Falcon-512"], verifier="fast")


def run_shard_block(chain: ShardChain, block: Block, code: str | None = None) -> AppliedBlock | None:
    """Apply `block` to `chain` by the reference and by the node's path; expect `code`
    (and an untouched state) or the same accounts afterwards."""
    native_result = _node_path(chain, block)
    if code is None:
        applied = chain.apply(block)
        assert native_result == {a: (acc.balance, acc.nonce) for a, acc in chain.state.accounts.items()}
        return applied
    before = (dict(chain.state.accounts), chain.state.height, set(chain.state.credited))
    with pytest.raises(InvalidBlock) as rejected:
        chain.apply(block)
    assert rejected.value.code == code, rejected.value
    assert (chain.state.accounts, chain.state.height, chain.state.credited) == before
    assert native_result == (code, rejected.value.detail)
    return None


def _node_path(chain: ShardChain, block: Block) -> dict | tuple[str, str]:
    genesis, state = chain.genesis, chain.state
    ledger = new_ledger(genesis, PoolLimits())
    for address, acc in state.accounts.items():
        ledger.set_account(address, acc.balance, acc.nonce)
    received = body_of(native(), kernel(genesis.chain_id).table, genesis, block.encode())
    try:
        apply_to_ledger(genesis, ledger, received, state.height, state.tip_hash, state.tip_timestamp_ms,
                        chain.cache, kernel(genesis.chain_id).table, block.header.timestamp_ms,
                        credited=set(state.credited))
    except InvalidBlock as exc:
        return exc.code, exc.detail
    packed = ledger.accounts()
    return {packed[i:i + 32]: (int.from_bytes(packed[i + 32:i + 40], "little"),
                               int.from_bytes(packed[i + 40:i + 48], "little")) for i in range(0, len(packed), 48)}


@pytest.fixture
def shards() -> tuple[ShardChain, ShardChain]:
    return ShardChain(0), ShardChain(1)


def final_transfer(source: ShardChain, amount: int = 25, recipient=None) -> ReceiptBundle:
    """A transfer from shard 0's first account to shard 1's first account (or `recipient`),
    in block 1 of `source`, made final by block 2 (another producer): its bundle for shard 1."""
    tx = source.transfer(account(0), recipient or account(1), amount, fee=2)
    run_shard_block(source, source.next_block([tx]))
    run_shard_block(source, source.next_block())
    return source.bundles_of(1)[1]


def with_entries(bundle: ReceiptBundle, **changes) -> ReceiptBundle:
    return replace(bundle, **changes)


# --- the rule and the genesis ---------------------------------------------------------------

def test_an_address_belongs_to_the_shard_its_first_four_bytes_name():
    assert shard_of(bytes([5, 0, 0, 0]) + bytes(28), 4) == 1
    assert shard_of(bytes([0, 0, 0, 1]) + bytes(28), 3) == (1 << 24) % 3


def test_each_shard_has_its_own_view_and_genesis_hash():
    sharded = sharded_genesis()
    assert [view.chain_id for view in sharded.views] == list(CHAIN_IDS)
    assert sharded.views[0].hash != sharded.views[1].hash
    assert sharded.view(1).sharding.index == 1 and sharded.view(1).sharding.count == 2
    assert sharded.shard_of_validator(validators(1)[2].public_key) == 1
    assert sharded.total_supply == 4 * BALANCE


@pytest.mark.parametrize("mutate, match", [
    (lambda d: d["shards"][0]["accounts"].append(d["shards"][1]["accounts"][0]), "belongs to shard 1"),
    (lambda d: d["shards"][1].update(chain_id=CHAIN_IDS[0]), "share a chain id"),
    (lambda d: d["shards"][1]["validators"].__setitem__(0, d["shards"][0]["validators"][0]), "belongs to shard 0"),
    (lambda d: d.update(shard_rule="address-mod"), "shard_rule"),
    (lambda d: d.update(shards=[]), "shards"),
])
def test_a_sharded_genesis_breaking_a_rule_is_refused(mutate, match):
    document = sharded_genesis_document()
    mutate(document)
    with pytest.raises(ConfigError, match=match):
        parse_sharded_genesis(document, scheme_table())


def test_a_change_in_any_shard_changes_every_shards_genesis_hash():
    document = sharded_genesis_document()
    document["shards"][1]["accounts"][0]["balance"] += 1
    changed = parse_sharded_genesis(document, scheme_table())
    assert all(a.hash != b.hash for a, b in zip(changed.views, sharded_genesis().views))


# --- the source shard -------------------------------------------------------------------------

def test_the_source_debits_a_cross_shard_transfer_and_credits_nothing(shards):
    source, _ = shards
    tx = source.transfer(account(0), account(1), 40, fee=3)
    run_shard_block(source, source.next_block([tx]))
    assert source.state.account(address_of(account(0))).balance == BALANCE - 43
    assert address_of(account(1)) not in source.state.accounts
    assert total_supply([source]) == 2 * BALANCE - 40      # the amount left the shard


def test_a_block_is_not_final_until_another_producer_builds_on_it(shards):
    source, _ = shards
    source.extend([source.transfer(account(0), account(1))])
    with pytest.raises(KeyError):
        source.bundles_of(1)
    source.extend()
    assert [len(b.entries) for b in source.bundles_of(1).values()] == [1]


def test_a_bundle_encodes_and_decodes_back(shards):
    bundle = final_transfer(shards[0])
    assert ReceiptBundle.decode(bundle.encode()).encode() == bundle.encode()
    assert decode_section(encode_section([bundle, bundle]))[1].receipt_ids() == bundle.receipt_ids()


# --- the destination shard --------------------------------------------------------------------

def test_a_receipt_credits_its_recipient_once_and_supply_is_conserved(shards):
    source, destination = shards
    bundle = final_transfer(source, amount=25)
    applied = run_shard_block(destination, destination.next_block(bundles=[bundle]))
    assert applied.credited == (receipt_id(CHAIN_IDS[0], bundle.entries[0].tx.id),)
    assert destination.state.account(address_of(account(1))).balance == BALANCE + 25
    assert total_supply([source, destination]) == 4 * BALANCE
    run_shard_block(destination, destination.next_block(bundles=[bundle]), "receipt_replayed")


def test_the_same_receipt_twice_in_one_block_is_a_replay(shards):
    bundle = final_transfer(shards[0])
    run_shard_block(shards[1], shards[1].next_block(bundles=[bundle, bundle]), "receipt_replayed")


def test_a_receipt_from_a_chain_that_is_no_other_shard(shards):
    bundle = final_transfer(shards[0])
    run_shard_block(shards[1], shards[1].next_block(bundles=[replace(bundle, source_chain_id=999)]),
                    "unknown_source")
    run_shard_block(shards[1], shards[1].next_block(bundles=[replace(bundle, source_chain_id=CHAIN_IDS[1])]),
                    "unknown_source")


def test_a_header_not_signed_by_a_source_validator_is_forged(shards):
    bundle = final_transfer(shards[0])
    impostor = account(0)     # a key, but no validator's
    forged = bundle.header.signed(signer(impostor.scheme, impostor.secret_key))
    run_shard_block(shards[1], shards[1].next_block(bundles=[replace(bundle, header=forged)]), "forged_header")


def test_a_finality_header_signed_by_another_shards_validator_is_forged(shards):
    bundle = final_transfer(shards[0])
    other = validators(1)[1]
    forged = replace(bundle.finality[0]).signed(signer(other.scheme, other.secret_key))
    run_shard_block(shards[1], shards[1].next_block(bundles=[replace(bundle, finality=(forged,))]), "forged_header")


def test_a_producer_index_outside_the_source_validators_is_forged(shards):
    bundle = final_transfer(shards[0])
    key = validators(0)[0]
    forged = replace(bundle.header, producer_index=7).signed(signer(key.scheme, key.secret_key))
    run_shard_block(shards[1], shards[1].next_block(bundles=[replace(bundle, header=forged)]), "forged_header")


def test_a_block_no_majority_built_on_is_not_final(shards):
    bundle = final_transfer(shards[0])
    run_shard_block(shards[1], shards[1].next_block(bundles=[replace(bundle, finality=())]), "receipt_not_final")


def test_finality_headers_that_do_not_link_are_not_final(shards):
    source, destination = shards
    bundle = final_transfer(source)
    key = validators(0)[1]
    unlinked = replace(bundle.finality[0], previous_hash=b"\x07" * 64).signed(signer(key.scheme, key.secret_key))
    run_shard_block(destination, destination.next_block(bundles=[replace(bundle, finality=(unlinked,))]),
                    "receipt_not_final")


def test_a_proof_that_does_not_reach_the_merkle_root_is_wrong(shards):
    bundle = final_transfer(shards[0])
    entry = bundle.entries[0]
    bent = MerkleProof(entry.proof.index, entry.proof.leaf_count + 1, entry.proof.siblings)
    run_shard_block(shards[1], shards[1].next_block(bundles=[replace(bundle, entries=(ReceiptEntry(entry.tx, bent),))]),
                    "wrong_proof")


def test_a_transaction_the_source_block_does_not_hold_has_no_proof(shards):
    source, destination = shards
    bundle = final_transfer(source)
    stranger = source.transfer(account(0, 1), account(1), 99)
    entry = ReceiptEntry(stranger, bundle.entries[0].proof)
    run_shard_block(destination, destination.next_block(bundles=[replace(bundle, entries=(entry,))]), "wrong_proof")


def test_a_receipt_paying_another_shards_account_has_the_wrong_destination(shards):
    source, destination = shards
    tx = source.transfer(account(0), account(0, 1), 5)       # within shard 0
    source.extend([tx])
    source.extend()
    header, finality = source.headers[0], (source.headers[1],)
    bundle = ReceiptBundle(CHAIN_IDS[0], header, finality, (ReceiptEntry(tx, MerkleProof(0, 1, ())),))
    run_shard_block(destination, destination.next_block(bundles=[bundle]), "wrong_destination")


def test_a_transfer_whose_signature_does_not_verify_is_refused_by_the_destination_too(shards):
    source, destination = shards
    # The source's validators signed a block holding a badly signed transfer (a block its own
    # nodes would refuse): the destination verifies the signature again and refuses it.
    tx = source.transfer(account(0), account(1), 5, signed_by=account(0, 1))
    key = validators(0)
    sign = [signer(k.scheme, k.secret_key) for k in key]
    from qmemo.core.block import make_block
    from qmemo.core.genesis import next_turn_ms
    view = source.genesis
    t1 = next_turn_ms(view, 0, 1, view.genesis_time_ms, 0)
    first = make_block(chain_id=view.chain_id, height=1, previous_hash=view.hash, timestamp_ms=t1, producer_index=0,
                       transactions=[tx], sign=sign[0], receipts=(0, b"\x00\x00"))
    second = make_block(chain_id=view.chain_id, height=2, previous_hash=first.hash,
                        timestamp_ms=next_turn_ms(view, 1, 2, t1, 0), producer_index=1, transactions=[],
                        sign=sign[1], receipts=(0, b"\x00\x00"))
    bundle = ReceiptBundle(CHAIN_IDS[0], first.header, (second.header,), (ReceiptEntry(tx, MerkleProof(0, 1, ())),))
    run_shard_block(destination, destination.next_block(bundles=[bundle]), "receipt_bad_signature")


def test_check_receipts_names_the_receipt_at_fault(shards):
    source, destination = shards
    bundle = final_transfer(source)
    with pytest.raises(InvalidReceipt) as refused:
        check_receipts(destination.genesis.sharding, [bundle, bundle], set(), destination.cache)
    assert refused.value.code == "receipt_replayed" and refused.value.position == 1


# --- the section as a whole -------------------------------------------------------------------

def test_a_section_other_than_the_one_the_header_commits_to(shards):
    bundle = final_transfer(shards[0])
    destination = shards[1]
    block = destination.next_block(bundles=[bundle])
    section = block.receipts_section
    swapped = Block(block.header, block.transactions, section[:-1] + bytes([section[-1] ^ 1]))
    run_shard_block(destination, swapped, "wrong_receipts_root")


def test_a_section_that_does_not_decode(shards):
    destination = shards[1]
    section = b"\x01\x00garbage"
    run_shard_block(destination, destination.next_block(section=section), "malformed_receipts")


def test_a_receipt_count_other_than_the_sections(shards):
    bundle = final_transfer(shards[0])
    run_shard_block(shards[1], shards[1].next_block(bundles=[bundle], receipt_count=2), "wrong_receipt_count")


def test_more_receipts_than_a_block_may_credit(shards):
    source, destination = shards
    txs = [source.transfer(account(0), account(1), 1) for _ in range(26)] + \
        [source.transfer(account(0, 1), account(1), 1) for _ in range(26)]
    source.extend(txs[:50])
    source.extend()
    bundle = source.bundles_of(1)[1]
    section = encode_section([bundle, replace(bundle, entries=bundle.entries[:1])])
    block = destination.next_block(section=section, receipt_count=51)
    run_shard_block(destination, block, "too_many_receipts")


def test_a_version_1_block_on_a_shards_chain(shards):
    destination = shards[1]
    block = destination.next_block()
    header = block.header
    old = BlockHeader(1, header.chain_id, header.height, header.previous_hash, header.timestamp_ms,
                      header.producer_index, 0, header.merkle_root)
    key = validators(1)[0]
    block = Block(old.signed(signer(key.scheme, key.secret_key)), ())
    before = destination.state.height
    with pytest.raises(InvalidBlock, match="version 2"):
        destination.apply(block)
    assert destination.state.height == before


def test_a_header_v2_root_is_the_sections_digest(shards):
    block = shards[1].next_block()
    assert block.header.receipts_root == receipts_root(block.receipts_section)
    assert Block.decode(block.encode()).receipts_section == block.receipts_section
    assert Block.from_json(block.to_json()).encode() == block.encode()


def test_the_ledger_finds_a_blocks_cross_shard_transfers_as_the_rule_does(shards):
    source = shards[0]
    txs = [source.transfer(account(0), account(1)), source.transfer(account(0), account(0, 1)),
           source.transfer(account(0), account(1, 1))]
    body = body_of(native(), kernel(CHAIN_IDS[0]).table, source.genesis, source.next_block(txs).encode()).body
    found = [position for (position,) in __import__("struct").iter_unpack("<I", body.outgoing(0, 2))]
    assert found == [i for i, tx in enumerate(txs) if shard_of(tx.recipient, 2) != 0] == [0, 2]
