"""The OpenAPI document the node serves: built from the operations table and the API's
dataclasses, its schemas accept the documents the node writes and refuse a renamed key;
the hand-written core shapes hold to `to_json`'s keys."""

from __future__ import annotations


import jsonschema_rs
import orjson
import pytest

from qmemo import api_schema
from qmemo.core.merkle import merkle_proof, merkle_root
from qmemo.core.state import Account
from qmemo.errors import InvalidTransaction
from qmemo.net import wire
from qmemo.net.handlers import Handlers
from qmemo.net.openapi import HEADER, OPERATIONS, SHARDED_HEADER_KEYS, TRANSACTION, openapi_document
from qmemo.node.answers import ACCEPTED, REJECTED, TxOutcome
from tests.unit.api_documents import metrics_snapshot, node_status
from tests.unit.chain_kit import Devnet


def validator(component: str):
    document = openapi_document()
    return jsonschema_rs.validator_for({"$ref": f"#/components/schemas/{component}",
                                        "components": document["components"]})


def on_the_wire(value: object) -> object:
    return orjson.loads(wire.dumps(value))


def test_every_operation_names_a_handler_and_is_in_the_document_once():
    paths = openapi_document()["paths"]
    assert sum(len(methods) for methods in paths.values()) == len(OPERATIONS)
    for op in OPERATIONS:
        assert callable(getattr(Handlers, op.handler)), op.handler
        assert op.method.lower() in paths[op.path]


@pytest.mark.parametrize("component, document", [
    ("NodeStatus", node_status()),
    ("NodeStatus", node_status(shard=api_schema.ShardFigures(1, 4))),
    ("MetricsSnapshot", metrics_snapshot()),
    ("MetricsSnapshot", metrics_snapshot(key_cache=None)),
], ids=["status", "status-sharded", "metrics", "metrics-no-key-cache"])
def test_the_node_s_documents_match_their_schema_and_a_renamed_key_does_not(component, document):
    check = validator(component)
    written = on_the_wire(document)
    check.validate(written)
    renamed = dict(written)
    renamed["heights"] = renamed.pop("height")
    assert not check.is_valid(renamed)


def test_a_committed_transaction_s_status_with_its_proof_matches_its_schema():
    leaves = [bytes([i]) * 64 for i in range(5)]
    status = api_schema.TxStatus(leaves[2], api_schema.COMMITTED, height=3, position=2, block_hash=b"\x01" * 64,
                                 merkle_root=merkle_root(leaves), proof=merkle_proof(leaves, 2),
                                 confirmations=2, final=False)
    written = wire.tx_status_json(status)
    validator("TxStatus").validate(orjson.loads(wire.dumps(written)))
    assert not validator("TxStatus").is_valid({**written, "tx_id": written["id"]})


def test_the_transaction_and_header_shapes_are_the_core_s_json_forms():
    devnet = Devnet()
    tx = devnet.transfer(devnet.alice, devnet.bob, 5)
    assert set(TRANSACTION["required"]) == set(TRANSACTION["properties"]) == set(tx.to_json())
    validator("Transaction").validate(tx.to_json())
    block = devnet.next_block([tx])
    header = block.header.to_json()
    assert set(HEADER["required"]) == set(header)
    assert set(HEADER["properties"]) == set(header) | set(SHARDED_HEADER_KEYS)
    validator("BlockHeader").validate(header)
    summary = wire.block_json(block, ["v0", "v1", "v2"], tx_ids_only=False, depth=(1, False))
    validator("Block").validate(orjson.loads(wire.dumps(summary)))
    assert not validator("Block").is_valid({**summary, "transaction": []})


def test_every_envelope_the_node_writes_matches_its_schema():
    devnet = Devnet()
    tx = devnet.transfer(devnet.alice, devnet.bob, 5)
    accepted = TxOutcome(tx.id, ACCEPTED, None)
    rejected = TxOutcome(tx.id, REJECTED, InvalidTransaction("no such funds", code="insufficient_balance"))
    address = b"\x07" * 32
    written = {
        "TxsAnswer": orjson.loads(wire.encode_tx_results([accepted, rejected])),
        "TxResult": wire.tx_answer(accepted),
        "TxRejection": wire.tx_answer(rejected),
        "ErrorBody": wire.error_json("malformed", "a sentence"),
        "Accounts": wire.accounts_json([(address, Account(5, 1), 2)]),
        "AccountState": wire.account_json(address, Account(5, 1), 2),
        "ReceiptStatuses": wire.receipt_statuses_json([b"\x01" * 64], [(api_schema.CREDITED, True)]),
        "Health": wire.health_json(True, "node-0"),
        "TxStatuses": {"statuses": [wire.tx_status_json(api_schema.TxStatus(tx.id, api_schema.PENDING))]},
        "Blocks": orjson.loads(wire.dumps(wire.blocks_json([devnet.next_block([tx])], ["v0", "v1", "v2"],
                                                          tx_ids_only=True))),
    }
    for component, document in written.items():
        check = validator(component)
        check.validate(document)
        assert not check.is_valid({**document, "unexpected": 1}), component
