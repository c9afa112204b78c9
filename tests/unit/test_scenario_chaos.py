"""The chaos schedule (qmemo.scenario.chaos) and the invariants only a chaos run checks
(qmemo.scenario.invariants): seeded and replayable, a minority at a time, one kill of
all, a quiet end; supply conserved, heights converging, every planned transaction final,
each node's memory and open files flat in every process life."""

from __future__ import annotations

from pathlib import Path

import pytest

from dataclasses import replace

from qmemo.api_schema import ProcessFigures
from qmemo.errors import ConfigError
from qmemo.records import to_json
from qmemo.scenario.chaos import CHAOS_ACTIONS, ChaosPlan, parse_chaos, schedule
from qmemo.scenario.invariants import (LIFE_WARMUP_S, all_planned_final, heights_converge, last_fault_end,
                                       load_window, process_samples, resources_flat, supply_conserved)
from qmemo.scenario.manifest import load_manifest
from tests.unit.api_documents import metrics_snapshot

SCENARIOS = Path(__file__).parents[2] / "scenarios"
PLAN = ChaosPlan(seed=7, actions=CHAOS_ACTIONS, for_s=(5.0, 20.0), gap_s=(15.0, 30.0), start_s=15.0,
                 quiet_end_s=60.0, kill_all_at_s=None, kill_all_for_s=5.0, judge_resources=True)


def _affected(fault: dict) -> set[int]:
    return set(fault["nodes"]) if "nodes" in fault else set(fault["groups"][0])


def test_a_seed_gives_one_schedule_and_another_seed_another():
    assert schedule(PLAN, 3, 600.0) == schedule(PLAN, 3, 600.0)
    assert schedule(PLAN, 3, 600.0) != schedule(ChaosPlan(**{**_fields(PLAN), "seed": 8}), 3, 600.0)


def _fields(plan: ChaosPlan) -> dict:
    return {name: getattr(plan, name) for name in plan.__slots__}


@pytest.mark.parametrize("nodes", [3, 5, 7])
def test_faults_never_overlap_and_take_a_minority_except_the_one_kill_of_all(nodes):
    faults = schedule(PLAN, nodes, 600.0)
    everyone = [f for f in faults if _affected(f) == set(range(nodes))]
    assert len(everyone) == 1 and everyone[0]["action"] == "kill" and everyone[0]["at_s"] == 300.0
    assert all(len(_affected(f)) <= (nodes - 1) // 2 for f in faults if f not in everyone)
    for before, after in zip(faults, faults[1:]):
        assert before["at_s"] + before["for_s"] + PLAN.gap_s[0] <= after["at_s"] + 1e-6   # one at a time, a gap between
    assert faults[0]["at_s"] >= PLAN.start_s and faults[-1]["at_s"] < 600.0 - PLAN.quiet_end_s
    assert {f["action"] for f in faults} == set(CHAOS_ACTIONS)       # every kind, not left to chance
    partitions = [f for f in faults if f["action"] == "partition"]
    assert all(sorted(f["groups"][0] + f["groups"][1]) == list(range(nodes)) for f in partitions)


def test_the_shipped_manifest_parses_its_schedule_like_hand_written_perturbations():
    manifest = load_manifest(SCENARIOS / "chaos.toml", SCENARIOS / "profiles.toml")
    assert manifest.chaos is not None and manifest.chaos.seed == 1 and manifest.load.duration_s == 600
    assert len(manifest.perturbations) == len(schedule(manifest.chaos, 3, 600.0)) >= 10
    replay = load_manifest(SCENARIOS / "chaos.toml", SCENARIOS / "profiles.toml", ["chaos.seed=2"])
    assert replay.perturbations != manifest.perturbations


@pytest.mark.parametrize("override, message", [
    ("chaos.actions=['explode']", "chaos.actions: must list some of"),
    ("chaos.for_s=[5]", "chaos.for_s: must be [least, most] seconds"),
    ("chaos.gap_s=[9, 3]", "chaos.gap_s: must be [least, most] seconds"),
    ("chaos.kill_all_at_s=590", "chaos.kill_all_at_s: 590 s must fall between"),
    ("chaos.seed='x'", "chaos.seed: must be a whole number"),
    ("chaos.blast_radius=2", "chaos.blast_radius: unknown key"),
    ("network.nodes=2", "chaos.: chaos needs at least 3 nodes"),
    ("chaos.judge_resources=no", "chaos.judge_resources: must be true or false, got 'no'"),
    ("chaos.judge_resources=0", "chaos.judge_resources: must be true or false, got 0"),
])
def test_a_bad_chaos_table_is_refused_naming_its_key(override, message):
    overrides = [override] + (["network.zones=['local', 'local']"] if override.startswith("network") else [])
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(")):
        load_manifest(SCENARIOS / "chaos.toml", SCENARIOS / "profiles.toml", overrides)


def test_resources_are_judged_unless_the_chaos_table_says_judge_resources_false():
    assert parse_chaos({}, 3, 600.0).judge_resources is True
    assert load_manifest(SCENARIOS / "chaos.toml", SCENARIOS / "profiles.toml").chaos.judge_resources is True
    short = load_manifest(SCENARIOS / "chaos.toml", SCENARIOS / "profiles.toml", ["chaos.judge_resources=false"])
    assert short.chaos.judge_resources is False
    assert short.perturbations == load_manifest(SCENARIOS / "chaos.toml", SCENARIOS / "profiles.toml").perturbations


def _supply(node: str, supply: int, consistent: bool = True, at_end: bool = False) -> dict:
    return {"node": node, "ok": True, "height": 9, "supply": supply, "expected": 100, "consistent": consistent,
            "at_end": at_end}


def test_supply_holds_when_every_consistent_sample_and_every_end_sample_has_the_genesis_total():
    samples = [_supply("node-0", 100), _supply("node-1", 97, consistent=False),   # a block moved under it: not judged
               _supply("node-0", 100, at_end=True), _supply("node-1", 100, at_end=True)]
    assert supply_conserved(samples, ["node-0", "node-1"]).passed


def test_a_coin_made_or_lost_or_a_node_without_an_end_sample_fails_the_supply():
    ended = [_supply("node-0", 100, at_end=True), _supply("node-1", 100, at_end=True)]
    result = supply_conserved([_supply("node-1", 101), *ended], ["node-0", "node-1"])
    assert not result.passed and result.figures["off"] == 1
    result = supply_conserved(ended[:1], ["node-0", "node-1"])
    assert not result.passed and result.figures["nodes_without_an_end_sample"] == ["node-1"]


def _height(node: str, t: float, height: int | None) -> dict:
    return {"time_s": t, "node": node, "ok": height is not None,
            "status": {"height": height} if height is not None else None}


def test_heights_converge_at_the_first_second_every_node_is_within_one_block():
    samples = [_height("a", 100.2, 50), _height("b", 100.4, None),         # b restarting
               _height("a", 101.2, 51), _height("b", 101.3, 44),           # b syncing
               _height("a", 104.1, 52), _height("b", 104.5, 51),           # within one block
               _height("a", 90.0, 40), _height("b", 90.0, 40)]             # before the fault ended: not counted
    result = heights_converge(samples, ["a", "b"], last_fault_end=100.0, within_s=10)
    assert result.passed and result.figures["converged_after_s"] == 4.0
    assert not heights_converge(samples, ["a", "b"], last_fault_end=100.0, within_s=3).passed
    assert not heights_converge(samples[:4], ["a", "b"], last_fault_end=100.0, within_s=60).passed


def test_the_last_fault_ends_with_the_last_restart_resume_or_heal():
    timeline = [{"time_s": 5.0, "what": "kill -9"}, {"time_s": 9.0, "what": "restart"},
                {"time_s": 20.0, "what": "partition"}, {"time_s": 31.0, "what": "heal"},
                {"time_s": 40.0, "what": "load finished"}]
    assert last_fault_end(timeline) == 31.0 and last_fault_end([]) is None


def test_every_planned_transaction_must_be_final_no_failed_or_stranded_one():
    counts = {"planned": 10, "committed": 10, "failed": 0, "lost": 0, "unsent": 0, "rejected": {}}
    assert all_planned_final({"counts": counts}).passed
    stranded = {**counts, "committed": 7, "lost": 3, "lost_reasons": {"evicted: nonce_gap_timeout": 3}}
    result = all_planned_final({"counts": stranded, "failover": {"outcome_unknown_resent": 2}})
    assert not result.passed and result.figures["lost_reasons"] == {"evicted: nonce_gap_timeout": 3}


# --- resources_flat -------------------------------------------------------------------------

MIB = 2**20
LOAD = (1000.0, 2000.0)         # the load's wall times: started, finished


def _life(pid: int, started_at_s: float, until_s: float, rss_mib: float = 300.0, rss_mib_per_s: float = 0.0,
          fds_per_s: float = 0.0, ramp_s: float = 0.0) -> list[tuple[float, ProcessFigures]]:
    """A process life sampled every 2 s from its start to `until_s`: RSS climbing from 80 MiB to
    `rss_mib` in its first `ramp_s` (a warm-up), then `rss_mib_per_s` on, swinging by 4 MiB
    with every sample (a mempool filling and draining); 40 fds, then `fds_per_s` on."""
    samples = []
    for i in range(int((until_s - started_at_s) / 2) + 1):
        age_s = i * 2.0
        level = 80 + (rss_mib - 80) * min(1.0, age_s / ramp_s) if ramp_s else rss_mib
        rss = level + rss_mib_per_s * max(0.0, age_s - ramp_s) + (-1) ** i * 4
        samples.append((started_at_s + age_s, ProcessFigures(1.0, int(rss * MIB), "uvloop",
                                                             40 + int(fds_per_s * age_s), pid, started_at_s)))
    return samples


def _as_one_life(samples: list[tuple[float, ProcessFigures]]) -> list[tuple[float, ProcessFigures]]:
    """The same samples told as one process (what a sampler blind to restarts would judge)."""
    return [(t, replace(p, pid=1, started_at_s=samples[0][1].started_at_s)) for t, p in samples]


def test_resources_flat_holds_when_every_life_stays_level_after_its_warm_up():
    steady = {"node-0": _life(10, 900.0, 2000.0), "node-1": _life(20, 900.0, 2000.0, ramp_s=90.0)}
    result = resources_flat(steady, LOAD)
    assert result.passed, result.detail
    assert result.figures["lives_judged"] == 2 and result.figures["lives_growing"] == 0
    life = result.figures["nodes"]["node-1"]["judged"][0]
    assert life["verdict"] == "flat" and life["started_s"] == -100.0 and life["judged_from_s"] == LIFE_WARMUP_S
    assert {"rss_first_mib", "rss_last_mib", "rss_max_mib", "rss_slope_mib_per_hour", "fds_first", "fds_last",
            "fds_slope_per_hour"} <= set(life)
    assert "2 process lives judged, all flat" in result.detail


def test_rss_growing_steadily_in_one_life_fails_naming_the_node_and_its_life():
    leaking = {"node-0": _life(10, 900.0, 2000.0), "node-1": _life(20, 900.0, 2000.0, rss_mib_per_s=0.02)}
    result = resources_flat(leaking, LOAD)        # +72 MiB/h on 300: 24%/h
    assert not result.passed and result.figures["lives_growing"] == 1
    assert result.figures["nodes"]["node-1"]["judged"][0]["verdict"] == "growing"
    assert result.detail.startswith("growing: node-1 pid 20") and "(1 of 2 judged lives flat)" in result.detail


def test_open_fds_growing_in_one_life_fails():
    result = resources_flat({"node-0": _life(10, 900.0, 2000.0, fds_per_s=1 / 30)}, LOAD)     # 120 an hour
    life = result.figures["nodes"]["node-0"]["judged"][0]
    assert not result.passed and life["verdict"] == "growing" and life["fds_slope_per_hour"] > 100


def test_a_restart_begins_a_new_life_whose_warm_up_does_not_make_a_steady_node_look_leaky():
    # Flat at 300 MiB, killed; the new process (new pid) drops to 80 MiB, warms up for 90 s
    # and levels out where the first one was.
    restarted = _life(10, 900.0, 1300.0) + _life(11, 1310.0, 2000.0, ramp_s=90.0)
    result = resources_flat({"node-0": restarted}, LOAD)
    assert result.passed, result.detail
    assert [life["pid"] for life in result.figures["nodes"]["node-0"]["judged"]] == [10, 11]
    assert not resources_flat({"node-0": _as_one_life(restarted)}, LOAD).passed     # one timeline: the climb back


def test_a_restart_does_not_hide_a_leak_in_the_life_before_it():
    # Leaking in its first life; the restart drops RSS back, so the two lives together show no trend.
    restarted = _life(10, 900.0, 1500.0, rss_mib_per_s=0.05) + _life(11, 1510.0, 2000.0, rss_mib=300.0, ramp_s=60.0)
    result = resources_flat({"node-0": restarted}, LOAD)
    first, second = result.figures["nodes"]["node-0"]["judged"]
    assert not result.passed and (first["verdict"], second["verdict"]) == ("growing", "flat")
    assert resources_flat({"node-0": _as_one_life(restarted)}, LOAD).passed        # one timeline: the sawtooth hides it


def test_no_life_long_enough_to_judge_fails_saying_so():
    # Restarted every 150 s: no life runs 60 s under load past its 120 s warm-up.
    short = [sample for k in range(7) for sample in _life(10 + k, 950.0 + 150 * k, 1095.0 + 150 * k)]
    result = resources_flat({"node-0": short, "node-1": []}, LOAD)
    assert not result.passed and result.figures["lives_judged"] == 0 and result.figures["lives_too_short"] == 7
    assert result.figures["nodes_without_a_judged_life"] == ["node-0", "node-1"]
    assert result.detail.startswith("no process life could be judged")


def test_samples_without_a_process_life_or_open_fds_are_not_judged_and_judge_nothing():
    # A node from before the figures (no pid, start or fds): nothing proves the memory flat.
    old = [(t, ProcessFigures(1.0, p.rss_bytes, "uvloop")) for t, p in _life(10, 900.0, 2000.0)]
    result = resources_flat({"node-0": old}, LOAD)
    assert not result.passed and result.figures["samples_without_pid_start_or_fds"] == len(old)
    assert f"{len(old):,} samples without pid, start time or open fds" in result.detail


def test_process_samples_decode_the_recorded_metrics_with_the_nodes_schema_and_skip_failed_samples():
    snapshot = metrics_snapshot("node-0")
    lines = [{"time_s": 5.0, "node": "node-0", "ok": True, "status": None, "metrics": to_json(snapshot)},
             {"time_s": 6.0, "node": "node-0", "ok": False, "status": None, "metrics": None}]     # paused: no answer
    assert process_samples(lines, ["node-0", "node-1"]) == {"node-0": [(5.0, snapshot.process)], "node-1": []}


def test_the_load_window_comes_from_the_timeline_and_a_timeline_without_it_is_refused():
    timeline = [{"time_s": 1.0, "what": "nodes healthy"}, {"time_s": 3.0, "what": "load started"},
                {"time_s": 9.0, "what": "load finished"}]
    assert load_window(timeline) == (3.0, 9.0)
    with pytest.raises(ConfigError, match="no 'load started' and 'load finished'"):
        load_window(timeline[:2])


def _with_anon(samples: list[tuple[float, ProcessFigures]], anon_mib: float,
               anon_mib_per_s: float = 0.0) -> list[tuple[float, ProcessFigures]]:
    """The same samples with an anonymous part of the resident set reported: `anon_mib`,
    then `anon_mib_per_s` on from the first sample."""
    first = samples[0][0]
    return [(t, replace(p, rss_anon_bytes=int((anon_mib + anon_mib_per_s * (t - first)) * MIB)))
            for t, p in samples]


def test_resources_flat_judges_anonymous_memory_where_the_node_reports_it():
    # The resident set climbs with the store's mapped file pages (page cache, bounded by the
    # map); the heap does not: flat.
    mapped = {"node-0": _with_anon(_life(10, 900.0, 2000.0, rss_mib_per_s=0.5), 100.0)}
    result = resources_flat(mapped, LOAD)
    assert result.passed, result.detail
    assert result.figures["nodes"]["node-0"]["judged"][0]["memory"] == "anonymous"
    assert "anonymous resident memory" in result.figures["rule"]
    # The heap itself climbing is growth, whatever the resident set does.
    leaking = {"node-0": _with_anon(_life(10, 900.0, 2000.0), 100.0, anon_mib_per_s=0.2)}
    result = resources_flat(leaking, LOAD)
    assert not result.passed and "anonymous RSS" in result.detail


def test_resources_flat_says_it_judged_the_whole_resident_set_for_a_node_without_the_figure():
    result = resources_flat({"node-0": _life(10, 900.0, 2000.0, rss_mib_per_s=0.5)}, LOAD)
    assert not result.passed and "resident RSS" in result.detail
    assert result.figures["nodes"]["node-0"]["judged"][0]["memory"] == "resident"
