"""A batch's bookkeeping (qmemo.load.latency ranges, qmemo.load.sender.record_answer): the
slice writes the sending path uses give exactly what marking each transaction gives, and
an answer that is not "all accepted" still goes transaction by transaction."""

from __future__ import annotations

import math

import orjson

from qmemo.load.latency import ACCEPTED, DUPLICATE, FAILED, REJECTED, Timings
from qmemo.load.answers import RESEND_CODES, record_answer


def same(a: Timings, b: Timings) -> bool:
    def arr(x):
        return [None if math.isnan(v) else v for v in x]
    return (all(arr(getattr(a, name)) == arr(getattr(b, name)) for name in ("sent", "due", "accepted"))
            and a.status == b.status and a.reasons == b.reasons)


def test_range_marks_equal_marking_each_transaction():
    for status, reason in ((ACCEPTED, None), (DUPLICATE, None), (FAILED, "transport:x"), (REJECTED, "malformed")):
        one, ranged = Timings([0.1 * i for i in range(8)]), Timings([0.1 * i for i in range(8)])
        for i in range(2, 6):
            one.mark_sent(i, 1.5, 0.5)
            one.mark_answer(i, 2.5, status, reason)
        ranged.mark_sent_range(2, 6, 1.5, 0.5)
        ranged.mark_answer_range(2, 6, 2.5, status, reason)
        assert same(one, ranged), status
        assert math.isnan(ranged.sent[1]) and math.isnan(ranged.sent[6]) and ranged.status[6] == 0


def answer(results: list, **counts) -> bytes:
    return orjson.dumps({"results": results, **counts})


def test_an_all_accepted_answer_marks_the_batch_accepted():
    timings = Timings([0.0] * 5)
    record_answer(range(1, 4), timings, 0.7, 200,
                   answer([{"id": "aa", "status": "accepted"}] * 3, accepted=3, duplicate=0, rejected=0))
    assert list(timings.status) == [0, ACCEPTED, ACCEPTED, ACCEPTED, 0]
    assert [timings.accepted[i] for i in (1, 2, 3)] == [0.7] * 3 and not timings.reasons


def test_a_mixed_or_inconsistent_answer_is_read_result_by_result():
    timings = Timings([0.0] * 3)
    results = [{"id": "aa", "status": "accepted"}, {"id": "bb", "status": "duplicate"},
               {"id": None, "status": "rejected", "code": "bad_signature"}]
    record_answer(range(0, 3), timings, 0.2, 200, answer(results, accepted=1, duplicate=1, rejected=1))
    assert list(timings.status) == [ACCEPTED, DUPLICATE, REJECTED] and timings.reasons == {2: "bad_signature"}
    # A count that claims all accepted does not hide a result that says otherwise.
    timings = Timings([0.0] * 2)
    record_answer(range(0, 2), timings, 0.2, 200,
                   answer([{"id": "aa", "status": "accepted"}, "garbage"], accepted=2))
    assert list(timings.status) == [ACCEPTED, FAILED] and timings.reasons == {1: "unreadable_result"}


def test_a_whole_request_error_applies_to_every_transaction():
    timings = Timings([0.0] * 2)
    record_answer(range(0, 2), timings, 0.3, 413, orjson.dumps({"error": "batch_too_large"}))
    assert list(timings.status) == [REJECTED, REJECTED] and timings.reasons == {0: "batch_too_large",
                                                                                 1: "batch_too_large"}
    record_answer(range(0, 2), timings, 0.3, 500, b"not json")
    assert list(timings.status) == [FAILED, FAILED] and timings.reasons == {0: "http_500", 1: "http_500"}


def test_a_refusal_for_now_is_left_open_and_handed_back_to_send_again():
    timings = Timings([0.0] * 6)
    results = [{"status": "accepted"}, {"status": "rejected", "code": "held_full"},
               {"status": "rejected", "code": "bad_signature"}, {"status": "rejected", "code": "nonce_gap"}]
    indices = [5, 1, 3, 0]          # a resend's plan indices need not be a range
    again = record_answer(indices, timings, 0.4, 200, answer(results, accepted=1, rejected=3),
                           resend=lambda i, code: code in RESEND_CODES)
    assert again == [1, 3]                                   # positions in `indices`: plan txs 1 and 0
    assert list(timings.status) == [0, 0, 0, REJECTED, 0, ACCEPTED] and timings.reasons == {3: "bad_signature"}
    # On the last try nothing is handed back: the refusal is the final answer.
    assert record_answer([1, 0], timings, 0.9, 200, answer(results[1:2] * 2, rejected=2)) == []
    assert timings.status[0] == timings.status[1] == REJECTED and timings.reasons[1] == "held_full"


def test_a_request_refused_whole_for_now_is_handed_back_whole():
    timings = Timings([0.0] * 3)
    refused = orjson.dumps({"error": "mempool_full", "detail": "the mempool is full"})
    assert record_answer(range(0, 3), timings, 0.5, 429, refused,
                          resend=lambda i, code: code in RESEND_CODES) == [0, 1, 2]
    assert list(timings.status) == [0, 0, 0]
    # Only what may be resent is handed back; the rest is refused now.
    assert record_answer(range(0, 3), timings, 0.5, 429, refused, resend=lambda i, code: i != 1) == [0, 2]
    assert list(timings.status) == [0, REJECTED, 0] and timings.reasons == {1: "mempool_full"}
    # On the last try (no `resend`), the refusal is final for all.
    record_answer(range(0, 3), timings, 0.9, 429, refused)
    assert list(timings.status) == [REJECTED] * 3
