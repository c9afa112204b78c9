"""Invariant evaluation on recorded data, and the invariants.json schema shared by writer and reader.

Each check gets a small hand-made record that holds, then one mutation that breaks it.
"""

from __future__ import annotations

import argparse
import math
from collections import Counter
from pathlib import Path

import orjson
import pytest

from qmemo.errors import ConfigError
from qmemo.scenario import invariants as inv
from qmemo.scenario.invariants import TxRecord
from qmemo.scenario.manifest import load_manifest, parse_manifest, parse_profiles, read_toml
from qmemo.scenario.verdict import SCHEMA, InvariantResult, Verdict, read, write
from tests.conftest import REPO_ROOT

PROFILES = parse_profiles(read_toml(REPO_ROOT / "scenarios" / "profiles.toml"))


def tx(tx_id: str, intended_s: float = 1.0, accepted: bool = True, committed_s: float | None = 2.0) -> TxRecord:
    return TxRecord(tx_id, intended_s, accepted, committed_s)


# --- same tip ----------------------------------------------------------------------------

def test_same_tip_holds_when_every_node_reports_one_tip() -> None:
    result = inv.same_tip({"node-0": (7, "aa"), "node-1": (7, "aa"), "node-2": (7, "aa")})
    assert result.passed and "height 7" in result.detail


def test_same_tip_fails_on_two_tips() -> None:
    result = inv.same_tip({"node-0": (7, "aa"), "node-1": (7, "bb")})
    assert not result.passed and "2 different tips" in result.detail


def test_same_tip_fails_when_a_node_does_not_answer() -> None:
    result = inv.same_tip({"node-0": (7, "aa"), "node-1": None})
    assert not result.passed and result.figures["down"] == ["node-1"]


# --- accepted, committed once -------------------------------------------------------------

def test_accepted_committed_once_holds() -> None:
    result = inv.accepted_once([tx("a"), tx("b"), tx("c", accepted=False, committed_s=None)],
                               Counter({"a": 1, "b": 1}), {})
    assert result.passed and result.figures["accepted"] == 2 and result.figures["committed_once"] == 2


def test_an_accepted_transaction_missing_without_a_reason_fails() -> None:
    result = inv.accepted_once([tx("a"), tx("b", committed_s=None)], Counter({"a": 1}), {"b": None}, {"unknown": 1})
    assert not result.passed and result.figures["examples_missing"] == ["b"]
    assert result.figures["missing_by_node_status"] == {"unknown": 1}


def test_an_accepted_transaction_still_held_at_the_end_fails() -> None:
    result = inv.accepted_once([tx("a", committed_s=None)], Counter(), {"a": None}, {"held": 1})
    assert not result.passed and result.figures["missing_without_reason"] == 1


def test_an_accepted_transaction_evicted_with_a_reason_passes() -> None:
    result = inv.accepted_once([tx("a"), tx("b", committed_s=None)], Counter({"a": 1}), {"b": "nonce_gap_timeout"})
    assert result.passed and result.figures["evicted"] == {"nonce_gap_timeout": 1}


def test_a_transaction_in_the_chain_twice_fails() -> None:
    result = inv.accepted_once([tx("a")], Counter({"a": 2}), {})
    assert not result.passed and result.figures["in_chain_more_than_once"] == 1


# --- final blocks --------------------------------------------------------------------------

OBSERVED = [("node-0", 1, "h1"), ("node-0", 2, "h2"), ("node-1", 1, "h1")]


def test_final_blocks_kept_holds_when_every_final_block_is_still_there() -> None:
    result = inv.final_blocks_kept(OBSERVED, {"node-0": {1: "h1", 2: "h2", 3: "h3"}, "node-1": {1: "h1", 2: "h2"}})
    assert result.passed and result.figures["observations"] == 3


def test_a_final_block_lost_after_a_restart_fails() -> None:
    result = inv.final_blocks_kept(OBSERVED, {"node-0": {1: "h1"}, "node-1": {1: "h1"}})
    assert not result.passed and result.figures["lost"] == 1 and result.figures["examples"] == ["node-0@2"]


def test_a_final_block_replaced_fails() -> None:
    result = inv.final_blocks_kept(OBSERVED, {"node-0": {1: "h1", 2: "xx"}, "node-1": {1: "h1"}})
    assert not result.passed and result.figures["changed"] == 1


def test_two_nodes_with_different_final_blocks_at_one_height_fail() -> None:
    observed = [*OBSERVED, ("node-1", 2, "other")]
    result = inv.final_blocks_kept(observed, {"node-0": {1: "h1", 2: "h2"}, "node-1": {1: "h1", 2: "other"}})
    assert not result.passed and result.figures["example_heights"] == [2]


# --- throughput and goodput ------------------------------------------------------------------

def summary(committed_tps: float, p99: float | None) -> dict:
    return {"target_tps": 500.0, "committed_tps": committed_tps,
            "latency_ms": {"intended_to_committed": {"percentiles_ms": {"p99": p99}}}}


def test_the_latency_bound_speaks_of_inclusion_when_the_summary_has_it() -> None:
    final_8s = summary(480, 8000)
    final_8s["latency_ms"]["intended_to_included"] = {"percentiles_ms": {"p99": 2500}}
    assert inv.throughput_within(final_8s, 450, 6000).passed
    assert not inv.throughput_within(summary(480, 8000), 450, 6000).passed


def test_throughput_within_bounds_holds() -> None:
    result = inv.throughput_within(summary(480, 2500), 450, 6000)
    assert result.passed and result.figures["committed_tps"] == 480


@pytest.mark.parametrize("tps, p99", [(449.9, 2500), (480, 6001), (480, None)])
def test_throughput_out_of_bounds_fails(tps: float, p99: float | None) -> None:
    assert not inv.throughput_within(summary(tps, p99), 450, 6000).passed


def test_honest_goodput_counts_only_transactions_intended_inside_the_flood() -> None:
    records = [tx(str(i), intended_s=i / 10, committed_s=5.0) for i in range(100)]    # 10 TPS over 0..10 s
    records += [tx("late", intended_s=4.5, committed_s=None)]
    result = inv.honest_goodput(records, [(2.0, 4.0)], baseline_tps=10.0, min_share=0.9)
    assert result.passed and result.figures["honest_committed"] == 20 and result.figures["share"] == 1.0


def test_overlapping_flood_windows_count_their_seconds_once() -> None:
    records = [tx(str(i), intended_s=i / 10, committed_s=5.0) for i in range(100)]
    result = inv.honest_goodput(records, [(2.0, 4.0), (3.0, 5.0)], baseline_tps=10.0, min_share=0.9)
    assert result.figures["flood_seconds"] == 3.0 and result.figures["honest_committed"] == 30


def test_honest_goodput_below_its_share_fails() -> None:
    records = [tx(str(i), intended_s=i / 10, committed_s=None if i % 2 else 5.0) for i in range(100)]
    result = inv.honest_goodput(records, [(0.0, 10.0)], baseline_tps=10.0, min_share=0.9)
    assert not result.passed and math.isclose(result.figures["share"], 0.5)


# --- a recorded run folder, end to end ---------------------------------------------------------

def recorded_run(path: Path, *, drop_final_block: bool = False) -> Path:
    """A run folder in the layout the runner writes, for two nodes and three transactions."""
    (path / "chain").mkdir(parents=True)
    (path / "gen").mkdir()
    chain = {"1": "h1", "2": "h2"}
    (path / "chain" / "end.json").write_bytes(orjson.dumps({
        "tips": {"node-0": [2, "h2"], "node-1": [2, "h2"]},
        "chains": {"node-0": {"1": "h1"} if drop_final_block else chain, "node-1": chain},
        "mempools": {"node-0": {"pending": 0, "held": 0}, "node-1": {"pending": 0, "held": 0}},
        "evictions": {"c": "nonce_gap_timeout"}, "missing_status": {}}))
    (path / "chain" / "tx-ids.txt").write_text("a\nb\n")
    (path / "chain" / "final-observed.jsonl").write_bytes(
        b'{"node":"node-0","height":1,"hash":"h1"}\n{"node":"node-0","height":2,"hash":"h2"}\n')
    (path / "gen" / "transactions.csv").write_text(
        "index,id,intended_s,sent_s,accepted_s,committed_s,status,reason\n"
        "0,a,0.1,0.1,0.2,1.0,accepted,\n1,b,0.2,0.2,0.3,1.1,accepted,\n2,c,0.3,0.3,0.4,,accepted,\n")
    (path / "gen" / "summary.json").write_bytes(orjson.dumps(summary(500, 2000)))
    return path


def manifest(bounds: dict | None = None):
    return parse_manifest({"name": "t", "description": "d", "load": {"tps": 500, "duration_s": 10},
                           "invariants": bounds or {"min_committed_tps": 450, "max_p99_ms": 6000}}, PROFILES)


def test_evaluate_reads_a_recorded_run_and_every_invariant_holds(tmp_path: Path) -> None:
    results = inv.evaluate(recorded_run(tmp_path), manifest())
    assert [r.name for r in results] == ["same_tip", "accepted_committed_once", "final_blocks_kept",
                                         "throughput_within_bounds"]
    assert all(r.passed for r in results), [r.detail for r in results if not r.passed]


def test_evaluate_finds_a_final_block_lost_in_a_recorded_run(tmp_path: Path) -> None:
    results = {r.name: r for r in inv.evaluate(recorded_run(tmp_path, drop_final_block=True), manifest())}
    assert not results["final_blocks_kept"].passed
    assert results["same_tip"].passed


def recorded_chaos_run(path: Path) -> Path:
    """The recorded run as a chaos run leaves it: the generator's counts, the load's window in
    the timeline (no metrics timelines: no process life to judge)."""
    recorded_run(path)
    counts = {"planned": 3, "committed": 2, "failed": 0, "lost": 1, "unsent": 0, "rejected": {}}
    (path / "gen" / "summary.json").write_bytes(orjson.dumps({**summary(500, 2000), "counts": counts}))
    (path / "timeline.jsonl").write_bytes(b'{"time_s": 3.0, "what": "load started"}\n'
                                          b'{"time_s": 9.0, "what": "load finished"}\n')
    return path


def chaos_manifest(*overrides: str):
    return load_manifest(REPO_ROOT / "scenarios" / "chaos.toml", REPO_ROOT / "scenarios" / "profiles.toml",
                         list(overrides))


def test_a_chaos_run_judges_resources_flat_and_fails_it_when_no_life_could_be_judged(tmp_path: Path) -> None:
    results = {r.name: r for r in inv.evaluate(recorded_chaos_run(tmp_path), chaos_manifest())}
    assert not results["resources_flat"].passed
    assert results["resources_flat"].detail.startswith("no process life could be judged")
    assert inv.not_judged(chaos_manifest()) == {}


def test_judge_resources_false_leaves_resources_flat_out_of_the_verdict_and_says_why(tmp_path: Path) -> None:
    manifest = chaos_manifest("chaos.judge_resources=false")
    results = inv.evaluate(recorded_chaos_run(tmp_path), manifest)
    assert [r.name for r in results][-3:] == ["supply_conserved", "heights_converge", "all_planned_final"]
    assert inv.not_judged(manifest) == {"resources_flat": "left out by chaos.judge_resources = false"}


def test_scenario_show_lists_an_invariant_left_out_as_not_judged(tmp_path: Path, capsys) -> None:
    from qmemo.commands.scenario import run_show
    write(tmp_path, Verdict("chaos", (InvariantResult("same_tip", True, "ok", {}),),
                            {"not_judged": {"resources_flat": "chaos.judge_resources = false"}}))
    run_show(argparse.Namespace(runs=[tmp_path]))
    assert "| same_tip pass resources_flat not judged |" in capsys.readouterr().out


# --- invariants.json ------------------------------------------------------------------------

def test_a_verdict_written_reads_back_equal(tmp_path: Path) -> None:
    verdict = Verdict("t", (InvariantResult("same_tip", True, "ok", {"tips": {}}),
                            InvariantResult("honest_goodput", False, "low", {"share": 0.5})), {"run_dir": "x"})
    write(tmp_path, verdict)
    again = read(tmp_path)
    assert again == verdict and not again.passed
    assert orjson.loads((tmp_path / "invariants.json").read_bytes())["schema"] == SCHEMA


def test_a_verdict_without_results_does_not_pass() -> None:
    assert not Verdict("t", ()).passed


def test_reading_another_schema_is_refused(tmp_path: Path) -> None:
    (tmp_path / "invariants.json").write_bytes(orjson.dumps({"schema": "qmemo-scenario-invariants/0"}))
    with pytest.raises(ConfigError, match="not a qmemo-scenario-invariants/1 file"):
        read(tmp_path)


def test_a_passed_flag_that_contradicts_the_results_is_refused(tmp_path: Path) -> None:
    write(tmp_path, Verdict("t", (InvariantResult("same_tip", False, "no", {}),)))
    document = orjson.loads((tmp_path / "invariants.json").read_bytes())
    document["passed"] = True
    (tmp_path / "invariants.json").write_bytes(orjson.dumps(document))
    with pytest.raises(ConfigError, match="disagrees"):
        read(tmp_path)


def test_a_sharded_devnet_needs_one_tip_per_shard_not_one_overall():
    from qmemo.scenario.invariants import same_tip_per_shard
    tips = {"node-0": (5, "aa"), "node-1": (5, "aa"), "node-2": (7, "bb"), "node-3": (7, "bb")}
    assert same_tip_per_shard(tips, [["node-0", "node-1"], ["node-2", "node-3"]]).passed
    split = same_tip_per_shard({**tips, "node-3": (7, "cc")}, [["node-0", "node-1"], ["node-2", "node-3"]])
    assert not split.passed and "shard 1: 2 different tips" in split.detail


def test_cross_shard_transfers_pass_only_credited_once_with_supply_conserved():
    from qmemo.scenario.invariants import sharded_transfers
    good = {"invariants": {"supply_conserved": True, "credited_exactly_once": True, "accounts_off": 0},
            "cross_shard": {"committed": 40, "credited": 40, "lost": 0, "p99_ms_intended_to_credited": 9000.0}}
    assert sharded_transfers(good).passed and "40 of 40" in sharded_transfers(good).detail
    doubled = {**good, "invariants": {**good["invariants"], "credited_exactly_once": False, "accounts_off": 1}}
    assert not sharded_transfers(doubled).passed
    lost = {**good, "cross_shard": {**good["cross_shard"], "credited": 39, "lost": 1}}
    assert not sharded_transfers(lost).passed
    assert not sharded_transfers({}).passed      # an unsharded summary proves nothing here


def test_two_shards_final_blocks_at_one_height_are_no_conflict():
    from qmemo.scenario.invariants import final_blocks_kept_per_shard
    observed = [("node-0", 1, "a"), ("node-1", 1, "a"), ("node-2", 1, "b"), ("node-3", 1, "b")]
    chains = {"node-0": {1: "a"}, "node-1": {1: "a"}, "node-2": {1: "b"}, "node-3": {1: "b"}}
    groups = [["node-0", "node-1"], ["node-2", "node-3"]]
    assert final_blocks_kept_per_shard(observed, chains, groups).passed
    forked = final_blocks_kept_per_shard([*observed, ("node-3", 1, "c")], chains, groups)
    assert not forked.passed and "shard 1:" in forked.detail
