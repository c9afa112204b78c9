"""The node API's documents: what the server writes (qmemo.net.wire) decodes with the
readers' classes (qmemo.api_schema) into the same values, and whatever is not that
document - another version, a renamed or missing key, a value of the wrong type - is
refused in one line naming where."""

from __future__ import annotations

from dataclasses import replace

import orjson
import pytest

from qmemo import api_schema
from qmemo.api_schema import AccountState, Health, TxCounts, TxStatus
from qmemo.core.merkle import merkle_proof, merkle_root, verify_proof
from qmemo.core.state import Account
from qmemo.errors import DecodeError, InvalidTransaction
from qmemo.net import wire
from qmemo.node.answers import ACCEPTED, REJECTED, TxOutcome
from qmemo.records import to_json
from tests.unit.api_documents import metrics_snapshot, node_status
from tests.unit.chain_kit import Devnet


def over_the_wire(value: object) -> object:
    return orjson.loads(wire.dumps(value))


def test_status_and_metrics_read_back_as_the_values_the_node_wrote():
    for value, decode in ((node_status(), api_schema.decode_status), (metrics_snapshot(), api_schema.decode_metrics)):
        assert decode(over_the_wire(value)) == value


def test_process_figures_name_the_process_life_its_open_descriptors_and_its_anonymous_memory():
    process = over_the_wire(metrics_snapshot())["process"]
    assert process == {"cpu_seconds": 0.5, "rss_bytes": 48_574_464, "event_loop": "uvloop", "open_fds": 17,
                       "pid": 41_327, "started_at_s": 1795421438.6, "rss_anon_bytes": 31_457_280}


def test_process_figures_a_node_could_not_measure_read_back_as_none():
    # No /proc: no descriptor count (null in the node's answer, left out of a recorded
    # timeline); a node from before the fields wrote no process life either.
    without = replace(metrics_snapshot(), process=api_schema.ProcessFigures(0.5, 48_574_464, "uvloop"))
    recorded = to_json(without)
    assert recorded["process"] == {"cpu_seconds": 0.5, "rss_bytes": 48_574_464, "event_loop": "uvloop"}
    for document in (over_the_wire(without), recorded):
        assert api_schema.decode_metrics(document) == without


def test_status_and_metrics_name_their_format_first():
    assert list(over_the_wire(node_status()))[:2] == ["schema", "node"]
    assert over_the_wire(metrics_snapshot())["schema"] == "qmemo-node-metrics/3"


def test_another_version_of_a_document_is_refused_in_one_line_naming_both():
    document = over_the_wire(metrics_snapshot())
    document["schema"] = "qmemo-node-metrics/4"
    with pytest.raises(DecodeError, match=r"^/metrics is not a node's /metrics document \(schema "
                                          r"'qmemo-node-metrics/4', expected 'qmemo-node-metrics/3'\).*newer"):
        api_schema.decode_metrics(document)
    without = over_the_wire(node_status())
    del without["schema"]
    with pytest.raises(DecodeError, match=r"schema None, expected 'qmemo-node-status/3'"):
        api_schema.decode_status(without)


@pytest.mark.parametrize("mutate, where", [
    (lambda d: d["tx"].pop("accepted"), r"\$\.tx: missing key 'accepted'"),                      # renamed
    (lambda d: d["tx"].update(admitted=1), r"\$\.tx: unknown key\(s\) admitted"),                # added
    (lambda d: d["verify"].update(threads="1"), r"\$\.verify\.threads: expected int"),           # wrong type
    (lambda d: d.update(tip_hash="zz"), r"\$\.tip_hash: 'zz' is not hex"),                       # bad hex
    (lambda d: d["stages"]["by_stage"]["verify"].pop("txs"), r"by_stage\.verify: missing key 'txs'"),
    (lambda d: d["process"].update(open_fds="17"), r"\$\.process\.open_fds: expected int"),
], ids=["renamed", "added", "wrong-type", "bad-hex", "nested", "wrong-type-optional"])
def test_a_metrics_document_that_is_not_the_schema_is_refused_naming_the_key(mutate, where):
    document = over_the_wire(metrics_snapshot())
    mutate(document)
    with pytest.raises(DecodeError, match=where):
        api_schema.decode_metrics(document, "$")


def test_block_summaries_read_back_with_their_ids_or_without():
    net = Devnet()
    txs = [net.transfer(net.alice, net.bob, nonce=n) for n in range(3)]
    block = net.next_block(txs)
    names = ["validator-0"]
    with_ids = api_schema.decode_block(over_the_wire(wire.block_json(block, names, tx_ids_only=True, depth=(2, True))))
    assert with_ids == wire.block_summary(block, names, depth=(2, True), with_ids=True)
    assert (with_ids.hash, with_ids.tx_ids, with_ids.confirmations, with_ids.final) == \
        (block.hash, tuple(tx.id for tx in txs), 2, True)
    alone = api_schema.decode_blocks(over_the_wire({"blocks": [wire.block_json(block, names, tx_ids_only=False,
                                                                                summary_only=True)]}))
    assert alone == [replace(with_ids, tx_ids=None, confirmations=None, final=None)]


@pytest.mark.parametrize("ids, why", [(["zz"], "not a list of hex"), ([7], "not a list of hex"),
                                      ("ab", "expected a list")])
def test_block_ids_that_are_not_hex_strings_are_refused(ids, why):
    net = Devnet()
    document = over_the_wire(wire.block_json(net.next_block([]), [], tx_ids_only=True))
    document["tx_ids"] = ids
    with pytest.raises(DecodeError, match=why):
        api_schema.decode_block(document)


def test_a_committed_transaction_status_reads_back_with_a_proof_that_verifies():
    ids = [bytes([i]) * 64 for i in range(3)]
    root = merkle_root(ids)
    committed = TxStatus(ids[1], api_schema.COMMITTED, 5, 1, b"\x09" * 64, root, merkle_proof(ids, 1),
                         confirmations=2, final=False)
    decoded = api_schema.decode_tx_status(over_the_wire(wire.tx_status_json(committed)))
    assert decoded == committed and verify_proof(decoded.merkle_root, decoded.tx_id, decoded.proof)
    evicted = TxStatus(ids[0], api_schema.EVICTED, reason="nonce_gap_timeout")
    answer = {"statuses": [wire.tx_status_json(evicted), wire.tx_status_json(replace(committed, proof=None))]}
    assert api_schema.decode_tx_statuses(over_the_wire(answer), 2) == [evicted, replace(committed, proof=None)]


@pytest.mark.parametrize("document, why", [
    ({"id": "01", "status": "lost"}, "is none of pending"),
    ({"tx_id": "01", "status": "pending"}, "has an `id`"),
    ({"id": "01", "status": "pending", "where": 1}, "unknown key"),
], ids=["unknown-state", "tx_id-key", "unknown-key"])
def test_a_transaction_status_that_is_not_the_schema_is_refused(document, why):
    with pytest.raises(DecodeError, match=why):
        api_schema.decode_tx_status(document)


def test_statuses_for_another_count_of_ids_are_refused():
    answer = {"statuses": [{"id": "01", "status": "unknown"}]}
    with pytest.raises(DecodeError, match="1 statuses for 2 ids"):
        api_schema.decode_tx_statuses(answer, 2)


def test_accounts_health_and_batch_totals_read_back():
    accounts = [(b"\x01" * 32, Account(10, 2), 3)]
    assert api_schema.decode_accounts(over_the_wire(wire.accounts_json(accounts))) == \
        [AccountState(b"\x01" * 32, 10, 2, 3)]
    assert api_schema.decode_health(over_the_wire(wire.health_json(False, "node-2"))) == Health(False, "node-2")
    outcomes = [TxOutcome(b"\x01" * 64, ACCEPTED), TxOutcome(None, REJECTED, InvalidTransaction("x", code="c"))]
    assert api_schema.decode_tx_counts(orjson.loads(wire.encode_tx_results(outcomes))) == TxCounts(1, 0, 1)
    with pytest.raises(DecodeError, match=r"accepted: expected int"):
        api_schema.decode_tx_counts({"results": []})


def test_a_list_answer_with_anything_beside_its_list_is_refused():
    with pytest.raises(DecodeError, match=r'expected \{"blocks": \[...\]\}'):
        api_schema.decode_blocks({"blocks": [], "more": True})
