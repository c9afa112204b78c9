"""Scenario manifests: a pure parser and validator of the TOML into frozen dataclasses.

A manifest says what network to build (nodes, their zones, the link profile between each
pair of zones), what chain to start, what load to send, what to do to the network and
when (perturbations and floods), and what must hold at the end (invariants). Link
profiles live in their own file (scenarios/profiles.toml) so every manifest shares the
cited figures.

This module does no I/O beyond reading the files it is given, and never touches the
network: every error is a `ConfigError` whose message names the offending key, so a
typo in a manifest costs one line, not a half-built network.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qmemo.core.defaults import CHAIN, DEVNET
from qmemo.errors import ConfigError
from qmemo.load.schedule import MAX_BATCH
from qmemo.scenario.chaos import ChaosPlan, parse_chaos, schedule
from qmemo.scenario.fields import boolean as _bool
from qmemo.scenario.fields import integer as _integer
from qmemo.scenario.fields import node_list as _node_list
from qmemo.scenario.fields import number as _number
from qmemo.scenario.fields import optional as _optional
from qmemo.scenario.fields import plain_name as _plain_name
from qmemo.scenario.fields import string as _string
from qmemo.scenario.fields import table as _table
from qmemo.scenario.fields import unknown as _unknown

# Actions a perturbation can take, and the keys each one accepts besides at_s/action.
NODE_ACTIONS = ("kill", "restart", "pause", "disconnect")
ACTIONS = (*NODE_ACTIONS, "partition", "profile", "flood")
FLOOD_KINDS = ("invalid-signature", "held-queue", "held-queue-funded", "oversized-block")
TARGETINGS = ("round-robin", "random", "single")


@dataclass(frozen=True, slots=True)
class LinkProfile:
    """One direction's shaping towards a zone: netem delay/jitter/loss, HTB rate."""

    name: str
    delay_ms: float          # one-way, added on the sender's egress (RTT = 2 x delay)
    jitter_ms: float
    loss_pct: float
    rate_mbit: float
    source: str

    @property
    def needs_netem(self) -> bool:
        return self.delay_ms > 0 or self.jitter_ms > 0 or self.loss_pct > 0


@dataclass(frozen=True, slots=True)
class Network:
    nodes: int
    zones: tuple[str, ...]                       # zone of node i
    default_profile: str
    links: tuple[tuple[str, str, str], ...]      # (zone, zone, profile), unordered pairs
    # A sharded devnet (qmemo.core.shards): `nodes` split evenly, node n is validator
    # n % per_shard of shard n // per_shard.
    shards: int = 1

    @property
    def per_shard(self) -> int:
        return self.nodes // self.shards

    def shard_of(self, node: int) -> int:
        return node // self.per_shard

    def shard_nodes(self, shard: int) -> list[int]:
        return list(range(shard * self.per_shard, (shard + 1) * self.per_shard))

    def profile_between(self, zone_a: str, zone_b: str, overrides: dict[frozenset[str], str] | None = None) -> str:
        pair = frozenset((zone_a, zone_b))
        if overrides and pair in overrides:
            return overrides[pair]
        for a, b, profile in self.links:
            if frozenset((a, b)) == pair:
                return profile
        return self.default_profile


@dataclass(frozen=True, slots=True)
class Chain:
    scheme: str
    accounts: int
    block_interval_ms: int
    max_block_transactions: int
    attacker_accounts: int


@dataclass(frozen=True, slots=True)
class Load:
    tps: float
    duration_s: float
    schedule: str | None
    ramp: bool
    poisson: bool
    targeting: str
    target_nodes: tuple[int, ...]
    batch: int
    resend_for_s: float = 0.0       # qmemo gen --resend-for: a batch no node answered is tried again
    cross_shard_pct: float | None = None   # qmemo gen --cross-shard (a sharded network only)


@dataclass(frozen=True, slots=True)
class Perturbation:
    """One scheduled action; fields that do not apply to the action keep their defaults."""

    at_s: float
    action: str
    nodes: tuple[int, ...] = ()
    producer: bool = False            # the node: whoever produces the next block at at_s
    shard: int = 0                    # with producer: whose shard's next block
    for_s: float | None = None        # pause/disconnect/partition length, kill/restart downtime
    groups: tuple[tuple[int, ...], ...] = ()
    zones: tuple[str, str] | None = None
    profile: str | None = None
    kind: str | None = None           # flood kind
    rate: float = 0.0                 # flood: transactions (or blocks) per second

    @property
    def end_s(self) -> float:
        return self.at_s + (self.for_s or 0.0)


@dataclass(frozen=True, slots=True)
class Bounds:
    settle_s: float
    drain_s: float
    min_committed_tps: float | None
    max_p99_ms: float | None
    goodput_baseline_tps: float | None
    min_goodput_share: float | None


@dataclass(frozen=True, slots=True)
class Manifest:
    name: str
    description: str
    network: Network
    chain: Chain
    load: Load
    perturbations: tuple[Perturbation, ...]
    invariants: Bounds
    profiles: dict[str, LinkProfile]
    chaos: ChaosPlan | None = None      # when set, `perturbations` hold its schedule too

    def profiles_used(self) -> list[LinkProfile]:
        names = {self.network.default_profile, *(p for _, _, p in self.network.links)}
        names |= {p.profile for p in self.perturbations if p.profile}
        return [self.profiles[name] for name in sorted(names)]

    @property
    def floods(self) -> tuple[Perturbation, ...]:
        return tuple(p for p in self.perturbations if p.action == "flood")


# --- reading -----------------------------------------------------------------------------

def read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(Path(path).read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """`KEY=VALUE` overrides (dotted keys, a list index as a number, VALUE in TOML syntax).

    `load.duration_s=20` or `perturbations.0.at_s=5`: how the test suite runs a shipped
    manifest in short form without a second copy of it.
    """
    for item in overrides:
        key, sep, value_text = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {item!r} is not KEY=VALUE")
        try:
            value = tomllib.loads(f"v = {value_text}")["v"]
        except tomllib.TOMLDecodeError:
            value = value_text          # a bare word: a string
        parts = key.split(".")
        target: Any = raw
        for part in parts[:-1]:
            target = target[int(part)] if isinstance(target, list) and part.isdigit() else target.setdefault(part, {})
        last = parts[-1]
        if isinstance(target, list) and last.isdigit():
            target[int(last)] = value
        elif isinstance(target, dict):
            target[last] = value
        else:
            raise ConfigError(f"override {key}: {'.'.join(parts[:-1])} is not a table")
    return raw


def load_manifest(path: Path, profiles_path: Path, overrides: list[str] | None = None) -> Manifest:
    raw = apply_overrides(read_toml(path), overrides or [])
    return parse_manifest(raw, parse_profiles(read_toml(profiles_path)))


# --- the sections --------------------------------------------------------------------------

def parse_profiles(raw: dict[str, Any]) -> dict[str, LinkProfile]:
    profiles: dict[str, LinkProfile] = {}
    for name, table in raw.items():
        where = f"profiles.{name}."
        if not isinstance(table, dict):
            raise ConfigError(f"profiles.{name}: must be a table")
        _unknown(table, where, {"delay_ms", "jitter_ms", "loss_pct", "rate_mbit", "source"})
        profiles[name] = LinkProfile(
            name=_plain_name(name, "name", where), delay_ms=_number(table, "delay_ms", where, 0.0),
            jitter_ms=_number(table, "jitter_ms", where, 0.0),
            loss_pct=_number(table, "loss_pct", where, 0.0), rate_mbit=_number(table, "rate_mbit", where, strict=True),
            source=_string(table, "source", where))
        if profiles[name].loss_pct > 100:
            raise ConfigError(f"{where}loss_pct: must be at most 100")
        if profiles[name].jitter_ms > profiles[name].delay_ms:
            raise ConfigError(f"{where}jitter_ms: must not exceed delay_ms (netem would reorder)")
    return profiles


def parse_manifest(raw: dict[str, Any], profiles: dict[str, LinkProfile]) -> Manifest:
    _unknown(raw, "", {"name", "description", "network", "chain", "load", "perturbations", "invariants", "chaos"})
    network = _parse_network(_table(raw, "network"), profiles)
    chain = _parse_chain(_table(raw, "chain"))
    load = _parse_load(_table(raw, "load"), network.nodes)
    if load.cross_shard_pct is not None and network.shards < 2:
        raise ConfigError("load.cross_shard_pct: needs network.shards of 2 or more")
    perturbations = raw.get("perturbations", [])
    if not isinstance(perturbations, list):
        raise ConfigError("perturbations: must be an array of tables ([[perturbations]])")
    chaos = parse_chaos(_table(raw, "chaos"), network.nodes, load.duration_s) if "chaos" in raw else None
    if chaos is not None:
        # Checked below like hand-written ones (a schedule that breaks a rule is a bug here).
        perturbations = [*perturbations, *schedule(chaos, network.nodes, load.duration_s)]
    parsed = tuple(sorted((_parse_perturbation(p, i, network, profiles, load) for i, p in enumerate(perturbations)),
                          key=lambda p: p.at_s))
    if any(p.action == "flood" and p.kind != "oversized-block" for p in parsed) and chain.attacker_accounts < 1:
        raise ConfigError("chain.attacker_accounts: a transaction flood needs at least 1")
    return Manifest(name=_plain_name(_string(raw, "name", ""), "name", ""),
                    description=_string(raw, "description", ""), network=network, chain=chain, load=load,
                    perturbations=parsed, invariants=_parse_bounds(_table(raw, "invariants"), parsed),
                    profiles=profiles, chaos=chaos)


def _parse_network(table: dict[str, Any], profiles: dict[str, LinkProfile]) -> Network:
    where = "network."
    _unknown(table, where, {"nodes", "zones", "default_profile", "links", "shards"})
    nodes = _integer(table, "nodes", where, CHAIN.validators, minimum=1)
    if nodes > 32:
        raise ConfigError(f"network.nodes: at most 32 on one machine, got {nodes}")
    shards = _integer(table, "shards", where, 1, minimum=1)
    if nodes % shards:
        raise ConfigError(f"network.shards: {nodes} nodes do not split evenly into {shards} shards")
    zones = table.get("zones", ["local"] * nodes)
    if not isinstance(zones, list) or len(zones) != nodes or not all(isinstance(z, str) and z for z in zones):
        raise ConfigError(f"network.zones: must list one zone name per node ({nodes})")
    for zone in zones:
        _plain_name(zone, "zones", where)
    default = _string(table, "default_profile", where, "lan")
    if default not in profiles:
        raise ConfigError(f"network.default_profile: unknown profile {default!r}")
    links = []
    raw_links = table.get("links", [])
    if not isinstance(raw_links, list):
        raise ConfigError("network.links: must be an array of tables")
    for i, link in enumerate(raw_links):
        at = f"network.links.{i}."
        if not isinstance(link, dict):
            raise ConfigError(f"network.links.{i}: must be a table")
        _unknown(link, at, {"zones", "profile"})
        pair = link.get("zones")
        if not isinstance(pair, list) or len(pair) != 2 or not all(z in zones for z in pair):
            raise ConfigError(f"{at}zones: must name two zones of network.zones, got {pair!r}")
        profile = _string(link, "profile", at)
        if profile not in profiles:
            raise ConfigError(f"{at}profile: unknown profile {profile!r}")
        links.append((pair[0], pair[1], profile))
    return Network(nodes, tuple(zones), default, tuple(links), shards)


def _parse_chain(table: dict[str, Any]) -> Chain:
    where = "chain."
    _unknown(table, where, {"scheme", "accounts", "block_interval_ms", "max_block_transactions", "attacker_accounts"})
    return Chain(scheme=_string(table, "scheme", where, CHAIN.scheme),
                 accounts=_integer(table, "accounts", where, DEVNET.accounts, minimum=1),
                 block_interval_ms=_integer(table, "block_interval_ms", where, CHAIN.block_interval_ms, minimum=100),
                 max_block_transactions=_integer(table, "max_block_transactions", where, CHAIN.max_block_transactions,
                                                 minimum=1),
                 attacker_accounts=_integer(table, "attacker_accounts", where, 0))


def _parse_load(table: dict[str, Any], nodes: int) -> Load:
    where = "load."
    _unknown(table, where, {"tps", "duration_s", "schedule", "ramp", "poisson", "targeting", "target_nodes", "batch",
                            "resend_for_s", "cross_shard_pct"})
    schedule = table.get("schedule")
    if schedule is not None:
        _string(table, "schedule", where)
    return Load(tps=_number(table, "tps", where, strict=True), duration_s=_number(table, "duration_s", where, strict=True),
                schedule=schedule, ramp=_bool(table, "ramp", where), poisson=_bool(table, "poisson", where),
                targeting=_string(table, "targeting", where, "round-robin", TARGETINGS),
                target_nodes=_node_list(table.get("target_nodes", list(range(nodes))), "target_nodes", where, nodes),
                batch=_integer(table, "batch", where, MAX_BATCH, minimum=1),
                resend_for_s=_number(table, "resend_for_s", where, 0.0),
                cross_shard_pct=_optional(table, "cross_shard_pct", where))


_PERTURBATION_KEYS = {
    "kill": {"node", "nodes", "for_s", "shard"}, "restart": {"node", "nodes", "for_s", "shard"},
    "pause": {"node", "nodes", "for_s"}, "disconnect": {"node", "nodes", "for_s"},
    "partition": {"groups", "for_s"}, "profile": {"zones", "profile"},
    "flood": {"kind", "rate", "for_s", "target_nodes"},
}


def _parse_perturbation(table: Any, index: int, network: Network, profiles: dict[str, LinkProfile],
                        load: Load) -> Perturbation:
    where = f"perturbations.{index}."
    if not isinstance(table, dict):
        raise ConfigError(f"perturbations.{index}: must be a table")
    action = _string(table, "action", where, choices=ACTIONS)
    _unknown(table, where, {"at_s", "action"} | _PERTURBATION_KEYS[action])
    at_s = _number(table, "at_s", where)
    if at_s >= load.duration_s:
        raise ConfigError(f"{where}at_s: {at_s} is not inside the load's {load.duration_s} s")
    if action in NODE_ACTIONS:
        if ("node" in table) == ("nodes" in table):
            raise ConfigError(f"{where}node: give node (an index or \"producer\") or nodes (a list), not both")
        node = table.get("node")
        producer = node == "producer"
        nodes = () if producer else _node_list(table.get("nodes", [node]), "node" if "node" in table else "nodes",
                                               where, network.nodes)
        for_s = _number(table, "for_s", where, 0.0 if action == "restart" else None)
        if action in ("pause", "disconnect") and for_s == 0:
            raise ConfigError(f"{where}for_s: a {action} must last more than 0 s")
        shard = _integer(table, "shard", where, 0)
        if shard >= network.shards or ("shard" in table and not producer):
            raise ConfigError(f"{where}shard: names the shard whose producer is meant (node = \"producer\"), "
                              f"0 to {network.shards - 1}")
        return Perturbation(at_s, action, nodes=nodes, producer=producer, for_s=for_s, shard=shard)
    if action == "partition":
        groups = table.get("groups")
        if not isinstance(groups, list) or len(groups) < 2:
            raise ConfigError(f"{where}groups: must list at least two groups of node indexes")
        parsed = tuple(_node_list(g, "groups", where, network.nodes) for g in groups)
        flat = [n for g in parsed for n in g]
        if sorted(flat) != list(range(network.nodes)):
            raise ConfigError(f"{where}groups: every node must be in exactly one group")
        return Perturbation(at_s, action, groups=parsed, for_s=_number(table, "for_s", where, strict=True))
    if action == "profile":
        pair = table.get("zones")
        if not isinstance(pair, list) or len(pair) != 2 or not all(z in network.zones for z in pair):
            raise ConfigError(f"{where}zones: must name two zones of network.zones, got {pair!r}")
        profile = _string(table, "profile", where)
        if profile not in profiles:
            raise ConfigError(f"{where}profile: unknown profile {profile!r}")
        return Perturbation(at_s, action, zones=(pair[0], pair[1]), profile=profile)
    kind = _string(table, "kind", where, choices=FLOOD_KINDS)
    return Perturbation(at_s, action, kind=kind, rate=_number(table, "rate", where, strict=True),
                        for_s=_number(table, "for_s", where, strict=True),
                        nodes=_node_list(table.get("target_nodes", list(range(network.nodes))), "target_nodes",
                                         where, network.nodes))


def _parse_bounds(table: dict[str, Any], perturbations: tuple[Perturbation, ...]) -> Bounds:
    where = "invariants."
    _unknown(table, where, {"settle_s", "drain_s", "min_committed_tps", "max_p99_ms", "goodput_baseline_tps",
                            "min_goodput_share"})
    bounds = Bounds(settle_s=_number(table, "settle_s", where, 30.0, strict=True),
                    # the node's held-nonce TTL is 30 s: a held transaction is evicted within 40
                    drain_s=_number(table, "drain_s", where, 40.0),
                    min_committed_tps=_optional(table, "min_committed_tps", where),
                    max_p99_ms=_optional(table, "max_p99_ms", where, strict=True),
                    goodput_baseline_tps=_optional(table, "goodput_baseline_tps", where, strict=True),
                    min_goodput_share=_optional(table, "min_goodput_share", where))
    has_flood = any(p.action == "flood" for p in perturbations)
    if has_flood and (bounds.goodput_baseline_tps is None or bounds.min_goodput_share is None):
        raise ConfigError("invariants.goodput_baseline_tps: a flood scenario needs it and min_goodput_share")
    return bounds
