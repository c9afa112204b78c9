"""The scenario manifest parser: shipped manifests parse; each invalid input is one mutation of a valid one.

Every invalid manifest must raise ConfigError naming the offending key, so a typo costs
one clear line and never a half-built network.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from qmemo.errors import ConfigError
from qmemo.scenario.manifest import apply_overrides, load_manifest, parse_manifest, parse_profiles, read_toml
from tests.conftest import REPO_ROOT

SCENARIOS = REPO_ROOT / "scenarios"
PROFILES = parse_profiles(read_toml(SCENARIOS / "profiles.toml"))
SHIPPED = ["lan-baseline", "wan-three-continents", "kill-producer", "kill-all", "pause-node", "oversized-block-flood", "disconnect-restart-reprofile",
           "partition-minority", "invalid-signature-flood", "held-queue-flood", "propagation", "shards-kill-partition"]


def valid() -> dict[str, Any]:
    return {
        "name": "t", "description": "a test scenario",
        "network": {"nodes": 3, "zones": ["eu", "us", "us"], "default_profile": "lan",
                    "links": [{"zones": ["eu", "us"], "profile": "transatlantic"}]},
        "chain": {"accounts": 100, "attacker_accounts": 4},
        "load": {"tps": 100, "duration_s": 30},
        "perturbations": [{"at_s": 5, "action": "pause", "node": 1, "for_s": 5},
                          {"at_s": 10, "action": "partition", "groups": [[0], [1, 2]], "for_s": 5},
                          {"at_s": 12, "action": "flood", "kind": "invalid-signature", "rate": 100, "for_s": 5}],
        "invariants": {"goodput_baseline_tps": 100, "min_goodput_share": 0.8},
    }


def test_the_valid_manifest_parses_into_its_dataclasses() -> None:
    manifest = parse_manifest(valid(), PROFILES)
    assert manifest.network.profile_between("us", "eu") == "transatlantic"
    assert manifest.network.profile_between("us", "us") == "lan"
    assert [p.action for p in manifest.perturbations] == ["pause", "partition", "flood"]
    assert manifest.floods[0].nodes == (0, 1, 2)
    assert manifest.perturbations[0].end_s == 10
    assert {p.name for p in manifest.profiles_used()} == {"lan", "transatlantic"}


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_scenario_parses(name: str) -> None:
    manifest = load_manifest(SCENARIOS / f"{name}.toml", SCENARIOS / "profiles.toml")
    assert manifest.name == name


def test_every_shipped_profile_cites_its_source() -> None:
    assert {"lan", "continental", "intercontinental"} <= set(PROFILES)
    for profile in PROFILES.values():
        assert profile.delay_ms == 0 or "aws-latencies.csv" in profile.source


def test_overrides_replace_values_by_dotted_key_and_list_index() -> None:
    raw = apply_overrides(valid(), ["load.duration_s=20", "perturbations.0.at_s=2", "name=short"])
    manifest = parse_manifest(raw, PROFILES)
    assert manifest.load.duration_s == 20 and manifest.name == "short"
    assert manifest.perturbations[0].at_s == 2


def test_an_override_without_equals_is_refused() -> None:
    with pytest.raises(ConfigError, match="not KEY=VALUE"):
        apply_overrides(valid(), ["load.duration_s"])


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(raw: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = raw
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        target[int(last) if last.isdigit() else last] = value
    return mutate


def _delete(path: str) -> Callable[[dict[str, Any]], None]:
    def mutate(raw: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target: Any = raw
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        del target[last]
    return mutate


# (mutation, the key the error must name)
MUTATIONS = {
    "unknown top-level key": (_set("netwrok", {}), "netwrok: unknown key"),
    "name missing": (_delete("name"), "name: must be a non-empty string"),
    "name with a space": (_set("name", "a b"), "name:"),
    "nodes zero": (_set("network.nodes", 0), "network.nodes: must be >= 1"),
    "nodes a string": (_set("network.nodes", "3"), "network.nodes: must be a whole number"),
    "too many nodes": (_set("network.nodes", 33), "network.nodes: at most 32"),
    "zones too short": (_set("network.zones", ["eu", "us"]), "network.zones: must list one zone name per node"),
    "unknown default profile": (_set("network.default_profile", "moon"), "network.default_profile: unknown profile"),
    "link to an unknown zone": (_set("network.links.0.zones", ["eu", "ap"]), "network.links.0.zones"),
    "link with an unknown profile": (_set("network.links.0.profile", "moon"), "network.links.0.profile"),
    "tps zero": (_set("load.tps", 0), "load.tps: must be > 0"),
    "tps missing": (_delete("load.tps"), "load.tps: required"),
    "duration negative": (_set("load.duration_s", -1), "load.duration_s"),
    "tps a boolean": (_set("load.tps", True), "load.tps: must be a number"),
    "unknown targeting": (_set("load.targeting", "all"), "load.targeting: must be one of"),
    "target node out of range": (_set("load.target_nodes", [0, 3]), "load.target_nodes: 3 is not a node index"),
    "target node twice": (_set("load.target_nodes", [1, 1]), "load.target_nodes: a node is listed twice"),
    "ramp not a boolean": (_set("load.ramp", "yes"), "load.ramp: must be true or false"),
    "unknown action": (_set("perturbations.0.action", "reboot"), "perturbations.0.action: must be one of"),
    "perturbation after the load": (_set("perturbations.0.at_s", 30), "perturbations.0.at_s"),
    "pause without for_s": (_delete("perturbations.0.for_s"), "perturbations.0.for_s: required"),
    "pause of zero seconds": (_set("perturbations.0.for_s", 0), "perturbations.0.for_s: a pause must last"),
    "pause of an unknown node": (_set("perturbations.0.node", 7), "perturbations.0.node: 7 is not a node index"),
    "pause with node and nodes": (_set("perturbations.0.nodes", [0]), "perturbations.0.node: give node"),
    "key of another action": (_set("perturbations.0.groups", [[0]]), "perturbations.0.groups: unknown key"),
    "partition with one group": (_set("perturbations.1.groups", [[0, 1, 2]]), "perturbations.1.groups"),
    "partition missing a node": (_set("perturbations.1.groups", [[0], [1]]),
                                 "perturbations.1.groups: every node must be in exactly one group"),
    "unknown flood kind": (_set("perturbations.2.kind", "ddos"), "perturbations.2.kind: must be one of"),
    "flood rate zero": (_set("perturbations.2.rate", 0), "perturbations.2.rate: must be > 0"),
    "flood without attacker accounts": (_set("chain.attacker_accounts", 0), "chain.attacker_accounts"),
    "flood without a goodput baseline": (_delete("invariants.goodput_baseline_tps"),
                                         "invariants.goodput_baseline_tps"),
    "p99 bound zero": (_set("invariants.max_p99_ms", 0), "invariants.max_p99_ms: must be > 0"),
    "unknown invariant key": (_set("invariants.max_p50_ms", 1), "invariants.max_p50_ms: unknown key"),
    "block interval too short": (_set("chain.block_interval_ms", 10), "chain.block_interval_ms: must be >= 100"),
    "nodes that do not split into shards": (_set("network.shards", 2), "network.shards: 3 nodes do not split"),
    "cross-shard traffic without shards": (_set("load.cross_shard_pct", 20), "load.cross_shard_pct: needs"),
    "a shard named without the producer": (_set("perturbations.0.shard", 0), "perturbations.0.shard"),
}


def test_a_sharded_manifest_splits_its_nodes_and_starts_each_in_its_shard() -> None:
    from qmemo.scenario.argv import gen_arguments, genesis_arguments, node_arguments

    manifest = load_manifest(SCENARIOS / "shards-kill-partition.toml", SCENARIOS / "profiles.toml")
    network = manifest.network
    assert (network.shards, network.per_shard) == (2, 3)
    assert [network.shard_of(n) for n in range(6)] == [0, 0, 0, 1, 1, 1] and network.shard_nodes(1) == [3, 4, 5]
    kill = manifest.perturbations[0]
    assert kill.producer and kill.shard == 0
    genesis = genesis_arguments(manifest, "/d")
    assert genesis[genesis.index("--validators") + 1] == "3" and genesis[genesis.index("--shards") + 1] == "2"
    node = node_arguments(4, "/d", "/d/data", "10.0.0.5", ["http://p"], shard=(1, 1), shard_peers=["http://o"])
    assert "/d/shard-1-validator-1.keys.json" in node and node[node.index("--shard-peers") + 1] == "http://o"
    gen = gen_arguments(manifest.load, "/d", "/d/honest.keys.json", ["http://a"], "/out")
    assert gen[gen.index("--cross-shard") + 1] == "20"


@pytest.mark.parametrize("case", sorted(MUTATIONS))
def test_an_invalid_manifest_is_refused_naming_its_key(case: str) -> None:
    mutate, message = MUTATIONS[case]
    raw = copy.deepcopy(valid())
    mutate(raw)
    with pytest.raises(ConfigError) as error:
        parse_manifest(raw, PROFILES)
    assert message in str(error.value)
    assert "\n" not in str(error.value)


PROFILE_MUTATIONS = {
    "rate zero": ({"rate_mbit": 0, "source": "s"}, "profiles.x.rate_mbit: must be > 0"),
    "no source": ({"rate_mbit": 1}, "profiles.x.source: must be a non-empty string"),
    "loss over 100": ({"rate_mbit": 1, "loss_pct": 101, "source": "s"}, "profiles.x.loss_pct"),
    "jitter above delay": ({"rate_mbit": 1, "delay_ms": 1, "jitter_ms": 2, "source": "s"}, "profiles.x.jitter_ms"),
    "unknown key": ({"rate_mbit": 1, "source": "s", "latency": 3}, "profiles.x.latency: unknown key"),
}


@pytest.mark.parametrize("case", sorted(PROFILE_MUTATIONS))
def test_an_invalid_profile_is_refused_naming_its_key(case: str) -> None:
    table, message = PROFILE_MUTATIONS[case]
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        parse_profiles({"x": table})


def test_a_missing_manifest_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_manifest(tmp_path / "none.toml", SCENARIOS / "profiles.toml")


def test_a_manifest_that_is_not_toml_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("name = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_manifest(path, SCENARIOS / "profiles.toml")
