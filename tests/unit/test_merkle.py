"""The Merkle tree: domain separation, padding without duplication, the committed leaf
count, and inclusion proofs that verify for their leaf and root only."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from qmemo.core.hashing import Domain, blake3_512
from qmemo.core.merkle import (EMPTY_LEAF, EMPTY_SUBTREE, MerkleProof, leaf_hash, merkle_proof, merkle_root,
                               node_hash, tree_depth, verify_proof)
from qmemo.errors import DecodeError, Misuse

ids = st.binary(min_size=64, max_size=64)
id_lists = st.lists(ids, min_size=1, max_size=40)


def tx_ids(count: int) -> list[bytes]:
    return [blake3_512(Domain.SELF_TEST, bytes([i])) for i in range(count)]


def test_construction_by_hand_for_three_leaves():
    a, b, c = tx_ids(3)
    top = node_hash(node_hash(leaf_hash(a), leaf_hash(b)), node_hash(leaf_hash(c), EMPTY_LEAF))
    assert merkle_root([a, b, c]) == blake3_512(Domain.MERKLE_ROOT, (3).to_bytes(4, "little"), top)


def test_leaf_node_and_empty_values_are_domain_separated():
    a, b = tx_ids(2)
    assert leaf_hash(a) == blake3_512(Domain.MERKLE_LEAF, a)
    assert node_hash(a, b) == blake3_512(Domain.MERKLE_NODE, a + b)
    assert EMPTY_LEAF == blake3_512(Domain.MERKLE_EMPTY)
    assert leaf_hash(a + b) != node_hash(a, b)


def test_empty_tree_root_commits_to_zero_leaves():
    assert merkle_root([]) == blake3_512(Domain.MERKLE_ROOT, bytes(4), EMPTY_LEAF)


def test_empty_subtrees_are_trees_of_empty_leaves():
    assert EMPTY_SUBTREE[2] == node_hash(node_hash(EMPTY_LEAF, EMPTY_LEAF), node_hash(EMPTY_LEAF, EMPTY_LEAF))


def test_duplicating_the_last_leaf_changes_the_root_cve_2012_2459():
    a, b, c = tx_ids(3)
    assert merkle_root([a, b, c]) != merkle_root([a, b, c, c])
    assert merkle_root([a, b, c, c, a, b, c, c]) != merkle_root([a, b, c, c, a, b, c])


def test_leaf_count_is_committed_in_the_root():
    # Trees of three and four leaves have the same depth: only the count tells them apart.
    ids3 = tx_ids(3)
    proof = merkle_proof(ids3, 0)
    assert verify_proof(merkle_root(ids3), ids3[0], proof)
    assert not verify_proof(merkle_root(ids3), ids3[0], replace(proof, leaf_count=4))


def test_an_inner_node_cannot_pose_as_a_leaf():
    a, b, c, d = tx_ids(4)
    root = merkle_root([a, b, c, d])
    inner = node_hash(leaf_hash(a), leaf_hash(b))
    upper = node_hash(leaf_hash(c), leaf_hash(d))
    assert not verify_proof(root, inner, MerkleProof(0, 2, (upper,)))
    assert not verify_proof(root, inner, MerkleProof(0, 4, (upper,)))


@given(id_lists, id_lists)
def test_different_lists_have_different_roots(first, second):
    assume(first != second)
    assert merkle_root(first) != merkle_root(second)


@given(id_lists, st.data())
def test_a_proof_verifies_for_its_leaf_and_root(leaves, data):
    index = data.draw(st.integers(0, len(leaves) - 1))
    proof = merkle_proof(leaves, index)
    assert len(proof.siblings) == tree_depth(len(leaves))
    assert verify_proof(merkle_root(leaves), leaves[index], proof)


@given(id_lists, st.data(), ids)
def test_a_proof_fails_for_any_other_leaf(leaves, data, other):
    index = data.draw(st.integers(0, len(leaves) - 1))
    assume(other != leaves[index])
    assert not verify_proof(merkle_root(leaves), other, merkle_proof(leaves, index))


@given(id_lists, st.data(), ids)
def test_a_proof_fails_against_any_other_root(leaves, data, other_root):
    index = data.draw(st.integers(0, len(leaves) - 1))
    assume(other_root != merkle_root(leaves))
    assert not verify_proof(other_root, leaves[index], merkle_proof(leaves, index))


@given(id_lists, st.data())
def test_a_proof_fails_at_another_index(leaves, data):
    index = data.draw(st.integers(0, len(leaves) - 1))
    other = data.draw(st.integers(0, len(leaves) - 1))
    assume(leaves[other] != leaves[index])
    moved = replace(merkle_proof(leaves, index), index=other)
    assert not verify_proof(merkle_root(leaves), leaves[index], moved)


def test_proofs_of_index_out_of_range_or_wrong_length_fail():
    leaves = tx_ids(5)
    root, proof = merkle_root(leaves), merkle_proof(leaves, 4)
    assert not verify_proof(root, leaves[4], replace(proof, index=5))
    # Index bits above the tree's depth would otherwise be ignored: 8 would pass for 0.
    assert not verify_proof(root, leaves[0], replace(merkle_proof(leaves, 0), index=8))
    assert not verify_proof(root, leaves[4], replace(proof, siblings=proof.siblings[:-1]))
    assert not verify_proof(root, leaves[4], replace(proof, siblings=proof.siblings + (EMPTY_LEAF,)))
    with pytest.raises(Misuse) as misuse:      # the caller found no leaf 5: our bug, a 500
        merkle_proof(leaves, 5)
    assert (misuse.value.code, misuse.value.http_status) == ("no_such_leaf", 500)


class _Huge(list):
    """A list that claims 2^32 leaves (one more than a u32 leaf count holds)."""

    def __len__(self) -> int:
        return 2**32


def test_a_tree_over_a_u32_of_leaves_is_our_misuse_not_an_invalid_block():
    # No decoded block can hold that many (it counts them in a u32): the caller has a bug.
    with pytest.raises(Misuse) as misuse:
        merkle_root(_Huge())
    assert (misuse.value.code, misuse.value.http_status) == ("too_many_leaves", 500)


@given(id_lists, st.data())
def test_proof_json_round_trips(leaves, data):
    proof = merkle_proof(leaves, data.draw(st.integers(0, len(leaves) - 1)))
    assert MerkleProof.from_json(proof.to_json()) == proof


def test_proof_json_rejects_a_short_sibling():
    document = merkle_proof(tx_ids(2), 0).to_json()
    document["siblings"][0] = document["siblings"][0][:-2]
    with pytest.raises(DecodeError):
        MerkleProof.from_json(document)
