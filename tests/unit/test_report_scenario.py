"""The report's scenario section, from a run folder's files: the per-second timeline
(committed per second, p99 of each second's transactions), perturbations from the
timeline with floods from their schedule, node rates from counters, and the propagation
model the measurement is set against."""

from __future__ import annotations

import orjson
import pytest

from qmemo.analysis.report_scenario import _binned, _node_rate_runs, _node_rates, model_propagation_s
from qmemo.analysis.scenario_run import NodeSample, Second, per_second, read_events


def test_each_second_counts_its_commits_and_the_p99_of_the_transactions_intended_in_it():
    rows = [(0.25, 1.25), (0.5, 2.5), (0.75, None), (1.25, 2.25), (3.0, None)]
    seconds = per_second(rows)
    assert seconds == (Second(0, 0, 2000.0, 3), Second(1, 1, 1000.0, 1), Second(2, 2, None, 0),
                       Second(3, 0, None, 1))


def test_p99_is_the_nearest_rank_of_a_hundred_latencies():
    rows = [(0.0, ms / 1000.0) for ms in range(1, 101)]
    assert per_second(rows)[0].p99_ms == pytest.approx(99.0)


def test_perturbations_come_from_the_timeline_and_floods_from_their_schedule(tmp_path):
    t0 = 1_000.0
    lines = [{"t_s": None, "time_s": 990.0, "what": "nodes healthy"},
             {"t_s": -0.2, "time_s": t0 - 0.2, "what": "load started", "tps": 500.0},
             {"t_s": 0.1, "time_s": t0 + 0.1, "what": "flood scheduled", "kind": "invalid-signature",
              "rate": 2000.0, "at_s": 15.0, "for_s": 30.0},
             {"t_s": 20.4, "time_s": t0 + 20.4, "what": "kill -9", "nodes": [0, 1, 2], "restart_at_s": 25.0},
             {"t_s": 25.1, "time_s": t0 + 25.1, "what": "restart", "nodes": [0, 1, 2]},
             {"t_s": 28.0, "time_s": t0 + 28.0, "what": "link profile", "zones": ["eu", "us"],
              "profile": "intercontinental"},
             {"t_s": 46.0, "time_s": t0 + 46.0, "what": "flood finished", "kind": "invalid-signature"},
             {"t_s": 61.0, "time_s": t0 + 61.0, "what": "load finished"},
             {"t_s": 70.0, "time_s": t0 + 70.0, "what": "mempools drained"}]
    path = tmp_path / "timeline.jsonl"
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    events, start = read_events(path)
    assert start == pytest.approx(t0)
    assert [(e.t_s, e.label) for e in events] == [
        (15.0, "flood invalid-signature 2000/s"), (20.4, "kill -9 nodes 0,1,2"), (25.1, "restart nodes 0,1,2"),
        (28.0, "link profile eu/us -> intercontinental"), (45.0, "flood ends")]


def test_node_rates_skip_failed_samples_and_counter_restarts():
    samples = (NodeSample(0.0, True, 0, 1, 0), NodeSample(1.0, True, 500, 2, 1), NodeSample(2.0, False, None, None, None),
               NodeSample(3.0, True, 100, 3, 2), NodeSample(5.0, True, 1100, 4, 3), NodeSample(6.0, True, 900, 4, 3))
    assert _node_rates(samples) == [(1.0, 500.0), (5.0, 500.0)]


def test_a_single_node_is_named_and_a_partition_keeps_its_groups(tmp_path):
    lines = [{"t_s": 15.0, "time_s": 15.0, "what": "SIGSTOP", "nodes": [1]},
             {"t_s": 16.0, "time_s": 16.0, "what": "partition", "groups": [[0, 1], [2]]}]
    path = tmp_path / "timeline.jsonl"
    path.write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in lines))
    assert [e.label for e in read_events(path)[0]] == ["SIGSTOP node-1", "partition [[0,1],[2]]"]


def test_node_rates_over_a_block_interval_smooth_one_block_every_two_seconds():
    # One 1,000-transaction block every 2 s, sampled every second.
    samples = tuple(NodeSample(float(t), True, 1000 * (t // 2), t // 2, 0) for t in range(8))
    assert [r for _, r in _node_rates(samples, 1.0)] == [0.0, 1000.0, 0.0, 1000.0, 0.0, 1000.0, 0.0]
    assert [r for _, r in _node_rates(samples, 2.0)] == [500.0] * 6
    # A sample a little early still reaches a whole window back, not one second.
    early = (NodeSample(0.0, True, 0, 0, 0), NodeSample(1.0, True, 0, 0, 0), NodeSample(1.9, True, 1000, 1, 0))
    assert _node_rates(early, 2.0) == [(1.9, pytest.approx(1000 / 1.9))]


def test_a_pause_or_a_counter_restart_breaks_the_node_line_instead_of_joining_across_it():
    samples = (NodeSample(0.0, True, 0, 1, 0), NodeSample(1.0, True, 500, 2, 1), NodeSample(2.0, True, 1000, 2, 1),
               NodeSample(3.0, False, None, None, None), NodeSample(9.0, True, 4000, 9, 8),
               NodeSample(10.0, True, 4500, 9, 8), NodeSample(11.0, True, 10, 1, 0), NodeSample(12.0, True, 510, 2, 1))
    assert _node_rate_runs(samples, 1.0) == [[(1.0, 500.0), (2.0, 500.0)], [(10.0, 500.0)], [(12.0, 500.0)]]


def test_generator_commits_are_averaged_over_bins_of_the_block_interval():
    seconds = tuple(Second(t, 1000 if t % 2 else 0, None, 500) for t in range(6))
    assert _binned(seconds, 2.0) == [(0.0, 500.0), (2.0, 500.0), (4.0, 500.0)]
    assert _binned(seconds, 1.0)[:2] == [(0.0, 0.0), (1.0, 1000.0)]


def test_the_model_is_the_one_way_delay_plus_serialisation_at_the_profile_rate():
    # 5,000,000 bytes at 1,000 Mbit/s: 40 ms; plus 111 ms one-way.
    assert model_propagation_s(5_000_000, {"delay_ms": 111.0, "rate_mbit": 1000.0}) == pytest.approx(0.151)
