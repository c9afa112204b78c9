"""The node's wire formats: what the node returns (frozen values) encoded once, here.

Outcomes carry their error and the error its status, so the answer's code and detail
come from the error itself; status and metrics values encode by field name with bytes
as hex; a JSON batch's bad element is that element's rejection, not the request's."""

from __future__ import annotations

import orjson
import pytest

from qmemo.core.block import BlockIds
from qmemo.errors import DecodeError, InvalidTransaction, MempoolFull, Misuse, TooLarge
from qmemo.frames import decode_frames, encode_frames
from qmemo.net import wire
from qmemo.node.answers import ACCEPTED, DUPLICATE, REJECTED, BlockAnswer, TxOutcome, TxStatus
from qmemo.api_schema import STATUS_SCHEMA, NodeStatus, PeerStatus
from qmemo.node.stages import STAGES, StageCPU, stage_figures
from tests.unit.chain_kit import Devnet


def test_tx_results_keep_input_order_and_say_why_each_rejection_failed():
    outcomes = [TxOutcome(b"\x01" * 64, ACCEPTED), TxOutcome(b"\x02" * 64, DUPLICATE),
                TxOutcome(b"\x03" * 64, REJECTED, InvalidTransaction("nonce 5 skips ahead", code="nonce_gap")),
                TxOutcome(None, REJECTED, DecodeError("3 bytes left over", code="trailing_bytes"))]
    document = orjson.loads(wire.encode_tx_results(outcomes))
    assert document["results"] == [
        {"id": "01" * 64, "status": "accepted"},
        {"id": "02" * 64, "status": "duplicate"},
        {"id": "03" * 64, "status": "rejected", "code": "nonce_gap", "detail": "nonce 5 skips ahead"},
        {"id": None, "status": "rejected", "code": "trailing_bytes", "detail": "3 bytes left over"},
    ]
    assert (document["accepted"], document["duplicate"], document["rejected"]) == (1, 1, 2)
    assert wire.tx_counts(outcomes) == {"accepted": 1, "duplicate": 1, "rejected": 2}


def test_a_rejection_carries_the_status_to_answer_with():
    full = TxOutcome(b"\x01" * 64, REJECTED, MempoolFull("this sender has 256 pending", code="sender_limit"))
    broken = TxOutcome(b"\x02" * 64, REJECTED, InvalidTransaction("bad", code="bad_signature"))
    assert (full.error.http_status, broken.error.http_status) == (429, 422)
    assert wire.tx_result(full)["code"] == "sender_limit"


def test_a_json_batch_element_that_does_not_decode_is_that_elements_rejection():
    net = Devnet()
    tx = net.transfer(net.alice, net.bob)
    body = orjson.dumps({"transactions": [tx.to_json(), {"nonce": "x"}]})
    items = wire.decode_tx_items(body, binary=False, max_count=10)
    assert items[0] == tx and isinstance(items[1], DecodeError)
    # Kept as a value: no traceback holding decode_tx_items' frame, whose `items` holds it.
    assert (items[1].__traceback__, items[1].__context__) == (None, None)


@pytest.mark.parametrize("status, error", [
    (REJECTED, None),                                           # a rejection that cannot say why
    (ACCEPTED, InvalidTransaction("bad", code="bad_signature")),  # an acceptance with a reason to refuse
    (DUPLICATE, MempoolFull("full")),
    ("maybe", None),                                            # no such status
], ids=["rejected-without-error", "accepted-with-error", "duplicate-with-error", "unknown-status"])
def test_an_outcome_has_an_error_exactly_when_rejected(status, error):
    with pytest.raises(Misuse) as misuse:
        TxOutcome(b"\x01" * 64, status, error)
    assert (misuse.value.code, misuse.value.http_status) == ("bad_outcome", 500)


def test_a_batch_over_its_limit_is_too_large_in_either_form():
    net = Devnet()
    txs = [net.transfer(net.alice, net.bob, nonce=n) for n in range(3)]
    with pytest.raises(TooLarge):
        wire.decode_tx_items(orjson.dumps({"transactions": [t.to_json() for t in txs]}), binary=False, max_count=2)
    with pytest.raises(TooLarge):
        wire.decode_tx_items(wire.encode_tx_batch([t.encoded for t in txs]), binary=True, max_count=2)
    assert wire.decode_tx_items(wire.encode_tx_batch([t.encoded for t in txs]), binary=True,
                                max_count=3) == [t.encoded for t in txs]


def test_block_batches_round_trip_and_a_truncated_one_is_refused():
    records = [b"first block", b"", b"third"]
    body = wire.encode_block_batch(records)
    assert wire.decode_block_batch(body, 3) == records == decode_frames(encode_frames(records), 3)
    with pytest.raises(DecodeError) as truncated:
        wire.decode_block_batch(body[:-1], 3)
    assert truncated.value.code == "truncated"


def test_node_values_encode_by_field_name_with_bytes_as_hex():
    status = NodeStatus(schema=STATUS_SCHEMA, node="node-0", version="1", chain_id=7, genesis_hash=b"\xab" * 4, height=2,
                        tip_hash=None, tip_age_s=0.5, final_height=0, mempool=3, mempool_held=0, validator=0,
                        scheme="Falcon-512", block_interval_ms=2000,
                        peers=(PeerStatus("http://p", True, 2, b"\x01\x02", None),), uptime_s=1.0, ready=True)
    document = orjson.loads(wire.dumps(status))
    assert document["genesis_hash"] == "abababab" and document["tip_hash"] is None
    assert document["peers"] == [{"url": "http://p", "reachable": True, "height": 2, "tip_hash": "0102",
                                  "error": None}]
    assert list(document)[:3] == ["schema", "node", "version"]
    assert orjson.loads(wire.dumps(BlockAnswer("kept_ours", 4))) == {"status": "kept_ours", "height": 4}


def test_stage_figures_encode_as_the_documented_stages_object():
    stages = StageCPU(started_monotonic=0.0, started_process_cpu_s=0.0)
    cpu_ns = [0] * len(STAGES)
    cpu_ns[STAGES.index("verify")] = 2_000_000
    figures = stage_figures(stages, cpu_ns, [1] * len(STAGES), process_cpu_s=0.01, admitted=100, now=1.0)
    document = orjson.loads(wire.dumps(figures))
    assert list(document) == ["process_cpu_s", "accounted_cpu_s", "overrun_cpu_s", "window_s", "window_admitted", "us_per_tx",
                              "by_stage", "other_on_loop_cpu_s"]
    assert list(document["by_stage"]) == [*STAGES, "other"]
    assert document["by_stage"]["verify"] == {"cpu_s": 0.002, "share": 0.2, "us_per_tx": 20.0, "txs": 1}
    assert document["by_stage"]["other"]["us_per_tx"] == 80.0 and document["us_per_tx"] == 100.0


def test_transaction_status_names_only_what_its_state_has():
    assert wire.tx_status_json(TxStatus(b"\x01", "pending")) == {"id": "01", "status": "pending"}
    assert wire.tx_status_json(TxStatus(b"\x01", "evicted", reason="nonce_gap_timeout")) == \
        {"id": "01", "status": "evicted", "reason": "nonce_gap_timeout"}


def test_something_outside_the_wire_format_is_refused_not_stringified():
    with pytest.raises(TypeError):
        wire.dumps({"when": object()})


def test_a_single_transaction_answer_names_the_error_only_when_rejected():
    rejected = TxOutcome(b"\x03" * 64, REJECTED, MempoolFull("this sender has 256 pending", code="sender_limit"))
    assert wire.tx_answer(rejected) == {"id": "03" * 64, "status": "rejected", "code": "sender_limit",
                                        "detail": "this sender has 256 pending", "error": "sender_limit"}
    assert wire.tx_answer(TxOutcome(b"\x01" * 64, ACCEPTED)) == {"id": "01" * 64, "status": "accepted"}


def test_list_answers_wrap_their_entries_as_the_single_answers_do():
    net = Devnet()
    block = net.next_block([net.transfer(net.alice, net.bob)])
    names = ["validator-0", "validator-1", "validator-2"]
    assert wire.blocks_json([block], names, tx_ids_only=True) == {
        "blocks": [wire.block_json(block, names, tx_ids_only=True)]}
    # txs=none: the summary with its depth, and neither ids nor transactions.
    summary = wire.block_json(block, names, tx_ids_only=True, depth=(2, True), summary_only=True)
    assert "tx_ids" not in summary and "transactions" not in summary and "header" not in summary
    assert summary["final"] is True and summary["hash"] == block.header.hash.hex()
    assert summary == {k: v for k, v in wire.block_json(block, names, tx_ids_only=True, depth=(2, True)).items()
                       if k != "tx_ids"}
    # A block's header and ids (a stored block read without decoding) answer the same documents.
    for summary_only in (False, True):
        assert wire.block_json(BlockIds.of(block), names, tx_ids_only=True, depth=(2, True),
                               summary_only=summary_only) == \
            wire.block_json(block, names, tx_ids_only=True, depth=(2, True), summary_only=summary_only)
    assert wire.block_json(BlockIds.of(block, with_ids=False), names, tx_ids_only=True, summary_only=True) == \
        wire.block_json(block, names, tx_ids_only=True, summary_only=True)
    for ids, tx_ids_only in ((BlockIds.of(block, with_ids=False), True), (BlockIds.of(block), False)):
        with pytest.raises(Misuse):     # ids not read, or transactions asked of ids: our bug, not the client's
            wire.block_json(ids, names, tx_ids_only=tx_ids_only)
    account = net.state.account(bytes(32))
    assert wire.accounts_json([(bytes(32), account, 3)]) == {"accounts": [wire.account_json(bytes(32), account, 3)]}
    assert wire.health_json(False, "node-0") == {"ready": False, "node": "node-0"}
