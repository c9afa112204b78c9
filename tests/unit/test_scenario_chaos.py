"""The chaos schedule (qmemo.scenario.chaos) and the invariants only a chaos run checks
(qmemo.scenario.invariants): seeded and replayable, a minority at a time, one kill of
all, a quiet end; supply conserved, heights converging, every planned transaction final."""

from __future__ import annotations

from pathlib import Path

import pytest

from qmemo.errors import ConfigError
from qmemo.scenario.chaos import CHAOS_ACTIONS, ChaosPlan, schedule
from qmemo.scenario.invariants import all_planned_final, heights_converge, last_fault_end, supply_conserved
from qmemo.scenario.manifest import load_manifest

SCENARIOS = Path(__file__).parents[2] / "scenarios"
PLAN = ChaosPlan(seed=7, actions=CHAOS_ACTIONS, for_s=(5.0, 20.0), gap_s=(15.0, 30.0), start_s=15.0,
                 quiet_end_s=60.0, kill_all_at_s=None, kill_all_for_s=5.0)


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
])
def test_a_bad_chaos_table_is_refused_naming_its_key(override, message):
    overrides = [override] + (["network.zones=['local', 'local']"] if override.startswith("network") else [])
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(")):
        load_manifest(SCENARIOS / "chaos.toml", SCENARIOS / "profiles.toml", overrides)


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
