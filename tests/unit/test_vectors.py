"""The shared test vectors (tests/vectors/chain_core.json) against the code.

The vectors are written by tests/vectors/make_vectors.py; these tests recompute every
value from the vector's inputs, so a change to an encoding, a domain or the Merkle
construction fails here (and must be deliberate: regenerate, and say why).
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from qmemo.core.block import Block
from qmemo.core.genesis import genesis_encoding, parse_genesis
from qmemo.core.hashing import Domain
from qmemo.core.merkle import EMPTY_LEAF, MerkleProof, merkle_root, verify_proof
from qmemo.core.transaction import Transaction
from qmemo.crypto.verifier import RegistryVerifier, scheme_table
from qmemo.errors import DecodeError

VECTORS = orjson.loads((Path(__file__).parents[1] / "vectors" / "chain_core.json").read_bytes())


def test_domains_are_the_protocols():
    assert VECTORS["domains"] == {domain.name: domain.value for domain in Domain}


@pytest.mark.parametrize("vector", VECTORS["transactions"], ids=lambda v: v["description"][:30])
def test_transaction_vector(vector):
    encoded = bytes.fromhex(vector["encoded"])
    tx = Transaction.decode(encoded)
    assert tx.to_json() == vector["json"]
    assert Transaction.from_json(vector["json"]).encoded == encoded
    assert (tx.signing_digest.hex(), tx.id.hex(), tx.sender.hex()) == \
        (vector["signing_digest"], vector["id"], vector["sender"])
    if tx.signature:
        assert RegistryVerifier().verify(tx.scheme_id, tx.public_key, tx.signing_digest, tx.signature)


@pytest.mark.parametrize("vector", VECTORS["invalid_transactions"], ids=lambda v: v["description"][:30])
def test_invalid_transaction_vector(vector):
    with pytest.raises(DecodeError) as rejected:
        Transaction.decode(bytes.fromhex(vector["encoded"]))
    assert rejected.value.code == vector["error"]


def test_merkle_vectors():
    merkle = VECTORS["merkle"]
    leaf_ids = [bytes.fromhex(i) for i in merkle["leaf_ids"]]
    assert EMPTY_LEAF.hex() == merkle["empty_leaf"]
    assert [merkle_root(leaf_ids[:r["leaf_count"]]).hex() for r in merkle["roots"]] == \
        [r["root"] for r in merkle["roots"]]
    assert len(merkle["roots"]) == 10
    proof = merkle["proof"]
    assert verify_proof(bytes.fromhex(proof["root"]), bytes.fromhex(proof["leaf_id"]),
                        MerkleProof.from_json(proof["proof"]))


def test_genesis_vector():
    genesis = parse_genesis(VECTORS["genesis"]["document"], scheme_table())
    assert genesis_encoding(genesis).hex() == VECTORS["genesis"]["encoding"]
    assert genesis.hash.hex() == VECTORS["genesis"]["hash"]


def test_block_vector():
    vector = VECTORS["block"]
    block = Block.decode(bytes.fromhex(vector["encoded"]))
    assert block == Block.from_json(vector["json"]) and block.to_json() == vector["json"]
    assert block.header.encoded.hex() == vector["header_encoded"]
    assert (block.header.signing_digest.hex(), block.hash.hex()) == (vector["signing_digest"], vector["hash"])
    assert block.header.previous_hash.hex() == VECTORS["genesis"]["hash"]
    validator = VECTORS["genesis"]["document"]["validators"][0]
    assert RegistryVerifier().verify(1, bytes.fromhex(validator["public_key"]), block.header.signing_digest,
                                     block.header.signature)


def test_vectors_file_is_what_the_script_writes():
    from tests.vectors.make_vectors import build, render

    assert render(build(VECTORS, new_keys=False)) == \
        (Path(__file__).parents[1] / "vectors" / "chain_core.json").read_bytes()
