"""Load-run bookkeeping: every transaction accounted for, and coordinated omission corrected."""

import math

import pytest

from qmemo.load.latency import ACCEPTED, FAILED, REJECTED, Timings, summarize, summarize_latencies
from qmemo.load.schedule import constant_offsets


def simulate(intended, service_s, stall_at=None, stall_s=0.0, window=1):
    """A closed window of `window` requests against a server that takes `service_s` per
    request and stalls for `stall_s` once at `stall_at`. Returns the Timings, with commit
    taken as the moment the answer arrives."""
    timings = Timings(intended)
    free_at = [0.0] * window  # when each in-flight slot frees up
    stalled = False
    for i, t in enumerate(intended):
        slot = min(range(window), key=free_at.__getitem__)
        sent = max(t, free_at[slot])
        busy = service_s
        if stall_at is not None and not stalled and sent >= stall_at:
            busy += stall_s
            stalled = True
        done = sent + busy
        free_at[slot] = done
        timings.mark_sent(i, sent)
        timings.mark_answer(i, done, ACCEPTED)
        timings.mark_committed(i, done)
    return timings


def test_a_stalled_server_raises_the_intended_to_committed_tail():
    intended = constant_offsets(100, 10)
    calm = summarize(simulate(intended, 0.001), warmup_s=0)
    stalled = summarize(simulate(intended, 0.001, stall_at=5, stall_s=2.0), warmup_s=0)
    # Every request queued behind the 2 s stall waited for it: ~200 of 1,000 intended
    # sends see between 0 and 2 s of extra latency, so p90 and p99 must show it ...
    assert stalled.intended_to_committed.percentiles_ms["p99"] > 1500
    assert stalled.intended_to_committed.percentiles_ms["p90"] > 500
    # ... while the closed-loop view (from the actual send) sees a single slow request.
    assert stalled.sent_to_committed.percentiles_ms["p99"] < 10
    assert calm.intended_to_committed.percentiles_ms["p99"] < 10
    assert stalled.generator_fell_behind and not calm.generator_fell_behind


def test_latency_order_holds_for_every_transaction():
    timings = simulate(constant_offsets(200, 2), 0.004, window=2)
    summary = summarize(timings, warmup_s=0)
    for name in ("p50", "p99"):
        assert (summary.intended_to_committed.percentiles_ms[name]
                >= summary.sent_to_committed.percentiles_ms[name]
                >= summary.sent_to_accepted.percentiles_ms[name])


def test_every_planned_transaction_lands_in_exactly_one_outcome():
    timings = Timings([0.0, 0.1, 0.2, 0.3, 0.4, 0.5])
    for i in range(5):
        timings.mark_sent(i, timings.intended[i])
    timings.mark_answer(0, 0.05, ACCEPTED)
    timings.mark_committed(0, 1.0)
    timings.mark_answer(1, 0.15, ACCEPTED)                     # lost: never committed
    timings.mark_answer(2, 0.25, REJECTED, "bad_signature")
    timings.mark_answer(3, 0.35, REJECTED, "nonce_gap")
    timings.mark_answer(4, 0.45, FAILED, "timeout")
    counts = summarize(timings, warmup_s=0).counts
    assert (counts.committed, counts.lost, counts.failed, counts.unsent) == (1, 1, 1, 1)
    assert counts.rejected == {"bad_signature": 1, "nonce_gap": 1}
    assert counts.accounted == counts.planned == 6
    assert counts.sent == 5


def test_a_transaction_that_failed_to_answer_but_was_committed_counts_as_committed():
    timings = Timings([0.0])
    timings.mark_sent(0, 0.0)
    timings.mark_answer(0, 5.0, FAILED, "timeout")
    timings.mark_committed(0, 2.0)
    counts = summarize(timings, warmup_s=0).counts
    assert (counts.committed, counts.failed, counts.accounted) == (1, 0, 1)


def test_warmup_transactions_are_counted_but_not_in_the_percentiles():
    intended = constant_offsets(10, 4)
    timings = simulate(intended, 0.001)
    for i, t in enumerate(intended):
        if t < 1:
            timings.committed[i] = t + 100.0  # absurd latencies inside the warm-up
    summary = summarize(timings, warmup_s=1.0)
    assert summary.counts.committed == 40
    assert summary.intended_to_committed.count == 30
    assert summary.intended_to_committed.max_ms < 10


def test_first_commit_time_is_kept():
    timings = Timings([0.0])
    timings.mark_committed(0, 1.0)
    timings.mark_committed(0, 2.0)
    assert timings.committed[0] == 1.0


def test_percentiles_of_known_values():
    summary = summarize_latencies([i / 1000 for i in range(1, 1001)])  # 1..1000 ms
    assert summary.percentiles_ms["p50"] == pytest.approx(500, rel=0.002)
    assert summary.percentiles_ms["p99"] == pytest.approx(990, rel=0.002)
    assert summary.max_ms == pytest.approx(1000, rel=0.002)


def test_no_values_give_nan_percentiles():
    summary = summarize_latencies([])
    assert summary.count == 0 and math.isnan(summary.percentiles_ms["p99"])


def test_committed_tps_of_an_interrupted_run_is_over_the_time_it_ran():
    intended = constant_offsets(10, 10)            # planned: 10 s at 10 TPS
    timings = Timings(intended)
    for i, t in enumerate(intended):
        if t < 5:                                  # interrupted at 5 s: the rest never sent
            timings.mark_sent(i, t)
            timings.mark_answer(i, t + 0.01, ACCEPTED)
            timings.mark_committed(i, t + 1.0)
    summary = summarize(timings, warmup_s=0, window_end_s=5.0)
    assert summary.committed_tps == pytest.approx(10)
    assert summary.counts.unsent == 50 and summary.counts.accounted == 100
    assert summarize(timings, warmup_s=0, window_end_s=10.0).committed_tps == pytest.approx(5)
