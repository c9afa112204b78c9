"""The tc plan for one node's egress: a class per destination zone, netem where the profile delays, a filter per peer."""

from __future__ import annotations

from qmemo.scenario.links import plan
from qmemo.scenario.manifest import parse_manifest, parse_profiles, read_toml
from qmemo.scenario.relay import parse_peer
from tests.conftest import REPO_ROOT

PROFILES = parse_profiles(read_toml(REPO_ROOT / "scenarios" / "profiles.toml"))
ADDRESSES = ["10.231.9.1", "10.231.9.2", "10.231.9.3"]


def network():
    return parse_manifest({"name": "t", "description": "d", "load": {"tps": 1, "duration_s": 1},
                           "network": {"nodes": 3, "zones": ["eu", "us", "us"], "default_profile": "lan",
                                       "links": [{"zones": ["eu", "us"], "profile": "transatlantic"}]}},
                          PROFILES).network


def test_each_peer_is_filtered_into_its_zones_class_and_only_delayed_links_get_netem() -> None:
    commands = [" ".join(c) for c in plan(network(), PROFILES, 0, ADDRESSES)]
    assert commands[0] == "tc qdisc replace dev eth0 root handle 1: htb default 1"
    # node-0 (eu): class 1:10 to eu (lan: no delay), class 1:11 to us (transatlantic: 44 ms +- 2.2 ms)
    assert "tc class add dev eth0 parent 1: classid 1:11 htb rate 1000mbit ceil 1000mbit" in commands
    netem = [c for c in commands if " netem " in c]
    assert netem == ["tc qdisc add dev eth0 parent 1:11 handle 11: netem limit 100000 delay 44ms 2.2ms "
                     "distribution normal"]
    filters = [c for c in commands if " filter " in c]
    assert [f.split("dst ")[1] for f in filters] == ["10.231.9.2/32 flowid 1:11", "10.231.9.3/32 flowid 1:11"]


def test_same_zone_peers_share_the_unshaped_lan_class() -> None:
    commands = [" ".join(c) for c in plan(network(), PROFILES, 1, ADDRESSES)]
    # node-1 (us): class 1:10 is eu (transatlantic), 1:11 is us (lan)
    assert any(c.endswith("10.231.9.3/32 flowid 1:11") for c in commands)
    assert any(c.endswith("10.231.9.1/32 flowid 1:10") for c in commands)
    assert [c for c in commands if " netem " in c][0].startswith("tc qdisc add dev eth0 parent 1:10 ")


def test_a_profile_override_changes_the_plan() -> None:
    commands = plan(network(), PROFILES, 0, ADDRESSES, {frozenset(("eu", "us")): "intercontinental"})
    assert any("111ms" in c for c in commands)


def test_without_netem_only_rates_are_planned() -> None:
    commands = plan(network(), PROFILES, 0, ADDRESSES, netem=False)
    assert not any("netem" in c for c in commands)
    assert sum(1 for c in commands if "filter" in c) == 2


def test_a_relay_peer_spec_parses() -> None:
    assert parse_peer("2=10.231.9.3:8000:44:2.2") == (2, "10.231.9.3", 8000, 44.0, 2.2)
