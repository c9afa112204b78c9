"""Block propagation from the nodes' logs (qmemo.scenario.propagation): the producer's
"produced block" line to each peer's "applied block" line, for full blocks only."""

from __future__ import annotations

import pytest

from qmemo.scenario.propagation import parse_log, propagation_delays, summarize

# The node's own lines (qmemo/node/intake.py), as a scenario run's logs/node-*.log hold them.
LOGS = {
    "node-0": [
        "2026-11-23 17:41:00,959 node-0 INFO qmemo.node: produced block 4 (e7e23431171c299a.., 4000 txs, "
        "validator 0, interval 8.00 s); mempool 160",
        "2026-11-23 17:41:08,100 node-0 INFO qmemo.node: applied block 5 (7feb09ee80c62f5a.., 4000 txs, "
        "validator 1, interval 8.00 s); mempool 300",
        "2026-11-23 17:41:09,000 node-0 WARNING qmemo.node: switched branch at height 38: 1 block(s) of ours undone",
    ],
    "node-1": [
        "2026-11-23 17:41:01,184 node-1 INFO qmemo.node: applied block 4 (e7e23431171c299a.., 4000 txs, "
        "validator 0, interval 8.00 s); mempool 0",
        "2026-11-23 17:41:07,900 node-1 INFO qmemo.node: produced block 5 (7feb09ee80c62f5a.., 4000 txs, "
        "validator 1, interval 8.00 s); mempool 0",
        "2026-11-23 17:41:15,900 node-1 INFO qmemo.node: produced block 6 (aaaaaaaaaaaaaaaa.., 12 txs, "
        "validator 1, interval 8.00 s); mempool 0",
    ],
    "node-2": [
        "2026-11-23 17:41:01,309 node-2 INFO qmemo.node: applied block 4 (e7e23431171c299a.., 4000 txs, "
        "validator 0, interval 8.00 s); mempool 0",
        # applied again after a restart: the first arrival counts
        "2026-11-23 17:45:01,309 node-2 INFO qmemo.node: applied block 4 (e7e23431171c299a.., 4000 txs, "
        "validator 0, interval 8.00 s); mempool 0",
        "2026-11-23 17:41:16,000 node-2 INFO qmemo.node: applied block 6 (aaaaaaaaaaaaaaaa.., 12 txs, "
        "validator 1, interval 8.00 s); mempool 0",
    ],
}


def _events():
    return [event for lines in LOGS.values() for event in parse_log(lines)]


def test_only_produced_and_applied_lines_are_read():
    events = _events()
    assert len(events) == 8
    first = events[0]
    assert (first.node, first.what, first.height, first.hash_prefix, first.transactions) == \
        ("node-0", "produced", 4, "e7e23431171c299a", 4000)


def test_each_full_block_is_timed_from_its_producer_to_every_peer_that_applied_it():
    delays = propagation_delays(_events(), full=4000)
    assert [(h, a, b) for h, a, b, _ in delays] == [(4, "node-0", "node-1"), (4, "node-0", "node-2"),
                                                    (5, "node-1", "node-0")]
    assert [round(s, 3) for *_, s in delays] == [0.225, 0.35, 0.2]


def test_the_summary_gives_median_and_extremes_or_says_it_has_none(tmp_path):
    delays = propagation_delays(_events(), full=4000)
    entry = summarize("lan", {"delay_ms": 0.0}, "relay", delays, tmp_path)
    assert entry["samples"] == 3 and entry["blocks"] == 2
    assert entry["median_s"] == pytest.approx(0.225) and entry["max_s"] == pytest.approx(0.35)
    empty = summarize("lan", {"delay_ms": 0.0}, "relay", [], tmp_path)
    assert empty["samples"] == 0 and "median_s" not in empty
