"""`qmemo deploy render`: a scenario manifest rendered as a Docker Swarm stack over several hosts.

The manifest is the one `qmemo scenario run` starts in network namespaces on one machine
(network.nodes, network.shards, chain, load); the stack runs the very same command lines
(qmemo.scenario.argv), with service names where the runner has addresses:

    node-<i>     one service per validator (node i is validator i % per_shard of shard
                 i // per_shard, as the runner numbers them), one replica, its chain in
                 the named volume node-<i>-data-<genesis hash> on whichever host runs it
                 (a new chain, a new volume: a node never opens another chain's store)
    gen          the load, one task on the manager that holds the rendered folder (label
                 qmemo.results=true): `qmemo gen` as on one machine, without
                 --generators, so on a sharded genesis it starts one generator process
                 per shard inside that task; the parent reads every shard's state before
                 and after, checks the invariants and writes the merged run folder
                 (summary.json, node-stages.json, the nodes' metrics) into the manager's
                 runs/<run>/gen, where `qmemo report --devnet runs/<run>` reads it. The
                 generators are not spread over hosts: the run folder and the merge are
                 the manager's (a bind mount of its folder), and the parts meet through it

The devnet (genesis and keys) is made once, on the manager, by `qmemo genesis`; Swarm
carries it to the hosts: genesis.json as a config and each validator's key as a secret,
both named with the genesis's hash (a config cannot change in place, a new chain gets
new names). Swarm refuses a config over 500 KiB (about 3,400 accounts of genesis.json):
a larger genesis travels gzipped (genesis.json.gz, about 3.5 times smaller: some 12,000
accounts) and each node unzips it into /devnet/genesis.json before it starts; one that
does not fit even so is refused at render (`genesis_carrier`), never left for `docker
stack deploy` to fail on. Scheduling, restarts, service discovery (each service's name, `dnsrr`: no
IPVS needed) and the overlay network are Swarm's; nothing here talks to a host.

Placement, by node labels `qmemo.host-<h>=true` (h = 0 .. hosts-1, set with `docker node
update --label-add qmemo.host-<h>=true <host>`; `label_commands()`):

    spread   node i on host i mod hosts: with at least as many hosts as a shard has
             validators, a shard's validators each on a host of its own; every host
             used, as many nodes on each as the count allows
    shard    shard k's validators together on host k mod hosts: blocks stay on a host,
             receipts cross between hosts
    none     no constraint: Swarm's scheduler places each node (and moves it anywhere)

The generator is pinned to the manager labelled qmemo.results=true (RESULTS_LABEL, in
`label_commands()`): with several managers, `node.role == manager` alone could start it on
one where the rendered folder (devnet/, runs/) is not.

A constraint is a hard rule: a node pinned to host h waits while h is down (its task
stays pending), unless another host also carries qmemo.host-<h>: the operator's say in
where Swarm may move h's nodes (they start there on a new volume and sync their chain).
Add such a stand-in label only once h is known dead (powered off) or drained, after the
stack's nodes are placed: a host that is cut off but alive keeps its validators running,
and Swarm starts a second copy of each elsewhere with the same key (two signers for one
validator); and a stand-in label there at deploy time lets Swarm put two validators of
a shard on one host from the start.

What a stack does not run - perturbations and floods (chaos included), link profiles
with delay, jitter or loss (the overlay is unshaped), the manifest's throughput bounds
(the generator checks the accounting and the sharded invariants, not those) - is
refused at render, each part named (`unrunnable`): a stack that ran without them would
pass for the scenario it is not.

Pure: `stack(manifest, plan)` returns the stack file's content; the command writes it.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from qmemo.errors import ConfigError
from qmemo.scenario.argv import NODE_PORT, gen_arguments, key_file, node_arguments, node_peers, node_shard
from qmemo.scenario.compose import IMAGE
from qmemo.scenario.manifest import Manifest, Network

PLACEMENTS = ("spread", "shard", "none")
HOST_LABEL = "qmemo.host"  # qmemo.host-<h>=true: a host that may run host h's nodes
RESULTS_LABEL = "qmemo.results"  # qmemo.results=true: the manager that holds the rendered folder
DEVNET = "/devnet"          # in every container: genesis.json (a config), the node's key (a secret)
DATA = "/data"
RUNS = "/runs"
# An overlay subnet of the project's own range (deploy/compose.yaml's is 172.31.229.0/24,
# tests/integration/engine.py's pools 172.31.224.0/20 and 172.31.236.0/22); change it with
# --subnet where it overlaps a network of the hosts.
SUBNET = "172.31.244.0/24"
RUN_VARIABLE = "QMEMO_RUN"  # the run folder's name under runs/, substituted by `docker stack deploy`
DEFAULT_RUN = "1"
HEALTH_WAIT_S = 600         # the generator waits this long for every node to answer /health
# A node's restarts (Swarm's restart_policy): on failure, 5 s apart (Swarm's own default,
# written out: it also spaces the start of a dead host's tasks elsewhere), at most 5 in any
# 120 s (swarmkit counts the restarts in that sliding window, a move off a dead host
# among them). A node that fails that often fails on something a restart does not mend -
# another chain's store, a bad key, a full disk: Swarm then leaves it failed, with its
# error in `docker service ps`, until `docker service update --force`, where restarting
# it forever would reread its store each time and fill the host's log. A node that fails
# now and then is still restarted.
NODE_RESTART_POLICY = {"condition": "on-failure", "delay": "5s", "max_attempts": 5, "window": "120s"}
# The largest config or secret a Swarm manager accepts (swarmkit's MaxConfigSize and
# MaxSecretSize, 500 KiB; `docker stack deploy` fails on a larger one).
CONFIG_LIMIT_BYTES = 500 * 1024
GENESIS_GZ = "genesis.json.gz"   # the carrier of a genesis over the limit, in the devnet folder
THRESHOLDS = ("min_committed_tps", "max_p99_ms", "goodput_baseline_tps", "min_goodput_share")


@dataclass(frozen=True, slots=True)
class StackPlan:
    hosts: int                      # hosts labelled qmemo.host-0=true .. qmemo.host-<hosts-1>=true
    placement: str                  # one of PLACEMENTS
    folder: str                     # the rendered folder on the manager, absolute (stack deploy's bind mounts)
    genesis_hash: str               # names the config and secrets: a new chain, new objects
    verify_threads: int | None = None
    subnet: str = SUBNET
    image: str = IMAGE
    genesis_gzip: bool = False      # the genesis travels as genesis.json.gz (genesis_carrier)

    def __post_init__(self) -> None:
        if self.placement not in PLACEMENTS:
            raise ConfigError(f"--placement is one of {', '.join(PLACEMENTS)} (got {self.placement!r})")
        if self.hosts < 1:
            raise ConfigError(f"--hosts must be 1 or more (got {self.hosts})")
        check_subnet(self.subnet)
        if not self.folder.startswith("/"):
            raise ConfigError(f"the stack's folder must be an absolute path (got {self.folder!r})")


def check_subnet(subnet: str) -> None:
    """ConfigError naming --subnet unless it is a network address with its prefix (a.b.c.0/24)."""
    try:
        ipaddress.ip_network(subnet, strict=True)
    except ValueError as exc:
        raise ConfigError(f"--subnet must be a network with its prefix length, as 172.31.244.0/24 "
                          f"(got {subnet!r}: {exc})") from None
    if "/" not in subnet:
        raise ConfigError(f"--subnet must be a network with its prefix length, as 172.31.244.0/24 (got {subnet!r})")


def genesis_carrier(genesis_bytes: int, gzip_bytes: int, accounts: int,
                    limit_bytes: int = CONFIG_LIMIT_BYTES) -> bool:
    """Whether the genesis must travel gzipped (False: genesis.json itself fits a config).

    Raises ConfigError when even the gzipped genesis is over the limit: Swarm would refuse
    the stack at deploy."""
    if genesis_bytes <= limit_bytes:
        return False
    if gzip_bytes <= limit_bytes:
        return True
    # Accounts make nearly all of a large genesis: the count that fits scales with the size.
    fits = int(accounts * limit_bytes / gzip_bytes)
    raise ConfigError(
        f"the genesis is {genesis_bytes:,} bytes ({gzip_bytes:,} gzipped) for {accounts:,} accounts; a Swarm config "
        f"takes at most {limit_bytes:,} bytes, which holds about {fits:,} accounts gzipped: render with fewer "
        f"(--set chain.accounts={fits}) or run the chain as local processes (./devnet.sh, qmemo scenario run)")


def unrunnable(manifest: Manifest, *, drop_thresholds: bool = False) -> list[str]:
    """What of the manifest the stack cannot run, one line each (empty: all of it runs).
    `drop_thresholds`: the throughput bounds are left out knowingly (not listed)."""
    out = []
    changes = [f"perturbations.{i} ({f'{p.kind} flood' if p.action == 'flood' else p.action} at {p.at_s:g} s)"
               for i, p in enumerate(manifest.perturbations)]
    if changes:
        out.append(", ".join(changes) + ": the stack starts the nodes and the load and changes nothing mid-run "
                   "(--set perturbations=[] renders without them)")
    network = manifest.network
    shaped = []
    for a, b in sorted({tuple(sorted((a, b))) for a in network.zones for b in network.zones
                        if a != b or network.zones.count(a) > 1}):
        profile = manifest.profiles[network.profile_between(a, b)]
        if profile.needs_netem:
            shaped.append(f"{a} <-> {b} ({profile.name}: {profile.delay_ms:g} ms, jitter {profile.jitter_ms:g} ms, "
                          f"loss {profile.loss_pct:g}%)")
    if shaped:
        out.append("network links " + ", ".join(shaped) + ": the overlay between hosts is not shaped")
    bounds = [f"invariants.{key} = {getattr(manifest.invariants, key):g}" for key in THRESHOLDS
              if getattr(manifest.invariants, key) is not None]
    if bounds and not drop_thresholds:
        out.append(", ".join(bounds) + ": the generator checks the accounting and the sharded invariants, not "
                   "throughput bounds (--drop-thresholds renders without them)")
    return out


def refuse_unrunnable(manifest: Manifest, *, drop_thresholds: bool = False) -> None:
    """ConfigError naming every part of the manifest the stack cannot run."""
    parts = unrunnable(manifest, drop_thresholds=drop_thresholds)
    if parts:
        raise ConfigError(f"{manifest.name}: a Swarm stack cannot run " + "; ".join(parts)
                          + ". Run the manifest with `qmemo scenario run`, or render one without these parts")


def host_label(h: int) -> str:
    return f"{HOST_LABEL}-{h}"


def host_of(network: Network, i: int, plan: StackPlan) -> int | None:
    """The host h whose label qmemo.host-<h> node i is constrained to (None: anywhere)."""
    if plan.placement == "spread":
        return i % plan.hosts
    if plan.placement == "shard":
        return network.shard_of(i) % plan.hosts
    return None


def url(i: int) -> str:
    return f"http://node-{i}:{NODE_PORT}"


def _names(i: int, network: Network, plan: StackPlan) -> tuple[str, str]:
    """(config, secret) names of node i's genesis and key."""
    key = key_file(i, node_shard(network, i)).removesuffix(".keys.json")
    return genesis_config(plan), f"{key}-{plan.genesis_hash}"


def data_volume(i: int | str, plan: StackPlan) -> str:
    """Node i's volume, named with the genesis hash as its config and secrets are: a stack
    rendered for a new chain gets new volumes (an old chain's store makes the node exit
    with "holds another chain" at every restart, until Swarm gives up on it)."""
    return f"node-{i}-data-{plan.genesis_hash}"


def genesis_config(plan: StackPlan) -> str:
    return f"genesis-{plan.genesis_hash}" + (".gz" if plan.genesis_gzip else "")


def peers_resolve_entrypoint(peers: list[str]) -> list[str]:
    """`sh -c`: wait until every peer's service name resolves, then `exec qmemo <command>`.

    Swarm starts a stack's tasks on all hosts at once, but a service's name resolves only
    once Swarm has added its task to the DNS (with a health check: once healthy) and the
    overlay has carried that to this host. A validator that starts before its peers
    resolve produces blocks alone; when the branches meet, the validators whose blocks
    were undone hold back for their fork lock
    (about 30 block intervals), which stalls the shard's finality. ($$: a literal $ in a
    stack file.)"""
    wait = f'for peer in {" ".join(peers)}; do until getent hosts "$$peer" >/dev/null; do sleep 0.5; done; done; '
    return ["sh", "-c", wait + 'exec qmemo "$$@"', "node"]


def unzip_genesis_entrypoint(entrypoint: list[str]) -> list[str]:
    """The node's `sh -c` entrypoint, first unzipping the genesis Swarm carried gzipped
    (gunzip is in every Debian base, Essential: yes)."""
    shell, flag, script, *rest = entrypoint
    return [shell, flag, f"gunzip -c {DEVNET}/{GENESIS_GZ} > {DEVNET}/genesis.json && " + script, *rest]


def node_service(manifest: Manifest, i: int, plan: StackPlan) -> dict[str, Any]:
    network = manifest.network
    same, others = node_peers(network, i)
    shard = node_shard(network, i)
    config, secret = _names(i, network, plan)
    entrypoint = peers_resolve_entrypoint([f"node-{j}" for j in same])
    genesis_target = f"{DEVNET}/genesis.json"
    if plan.genesis_gzip:
        entrypoint, genesis_target = unzip_genesis_entrypoint(entrypoint), f"{DEVNET}/{GENESIS_GZ}"
    host = host_of(network, i, plan)
    deploy: dict[str, Any] = {
        "restart_policy": dict(NODE_RESTART_POLICY),
        # A service's name resolves to its task's own address: Swarm's default (a virtual
        # IP) needs the kernel's IPVS, which not every kernel has.
        "endpoint_mode": "dnsrr",
    }
    if host is not None:
        deploy["placement"] = {"constraints": [f"node.labels.{host_label(host)} == true"]}
    return {
        "image": plan.image,
        "entrypoint": entrypoint,
        "command": node_arguments(i, DEVNET, DATA, "0.0.0.0", [url(j) for j in same], advertise=url(i),
                                  verify_threads=plan.verify_threads, shard=shard,
                                  shard_peers=[url(j) for j in others]),
        "configs": [{"source": config, "target": genesis_target}],
        "secrets": [{"source": secret, "target": f"{DEVNET}/{key_file(i, shard)}"}],
        "volumes": [f"{data_volume(i, plan)}:{DATA}"],
        # No health check: Swarm names only healthy tasks in its DNS, so with one, no peer
        # resolves until the node is up, and the nodes' wait for each other (entrypoint)
        # would never end. The generator asks every node itself (`qmemo health --wait`).
        "labels": {"qmemo.shard": str(network.shard_of(i)), "qmemo.validator": str(i % network.per_shard)},
        "deploy": deploy,
    }


def gen_service(manifest: Manifest, plan: StackPlan) -> dict[str, Any]:
    urls = [url(i) for i in manifest.load.target_nodes]
    run = f"{RUNS}/${{{RUN_VARIABLE}:-{DEFAULT_RUN}}}"
    everyone = " ".join(url(i) for i in range(manifest.network.nodes))
    return {
        "image": plan.image,
        # Swarm starts every service at once: the generator waits until each node answers.
        "entrypoint": ["sh", "-c", f'qmemo health --wait {HEALTH_WAIT_S} {everyone} && exec qmemo "$$@"', "gen"],
        # As the scenario runner starts it: the manifest's load, and its live status beside the summary.
        "command": [*gen_arguments(manifest.load, DEVNET, f"{DEVNET}/accounts.keys.json", urls, f"{run}/gen"),
                    "--live", f"{run}/gen/live.json"],
        # Read-write: the generator keeps its signed workloads in devnet/workloads for the next run.
        "volumes": [f"{plan.folder}/devnet:{DEVNET}", f"{plan.folder}/runs:{RUNS}"],
        # The manager that holds the folder: its bind mounts are that host's (RESULTS_LABEL).
        "deploy": {"restart_policy": {"condition": "none"}, "endpoint_mode": "dnsrr",
                   "placement": {"constraints": ["node.role == manager", f"node.labels.{RESULTS_LABEL} == true"]}},
    }


def stack(manifest: Manifest, plan: StackPlan) -> dict[str, Any]:
    """The stack file as a dict: node-0 .. node-<n-1>, gen, their configs, secrets, volumes, network."""
    network = manifest.network
    services: dict[str, Any] = {f"node-{i}": node_service(manifest, i, plan) for i in range(network.nodes)}
    services["gen"] = gen_service(manifest, plan)
    devnet = f"{plan.folder}/devnet"
    configs = {genesis_config(plan): {"file": f"{devnet}/{GENESIS_GZ if plan.genesis_gzip else 'genesis.json'}"}}
    secrets = {_names(i, network, plan)[1]: {"file": f"{devnet}/{key_file(i, node_shard(network, i))}"}
               for i in range(network.nodes)}
    return {
        "version": "3.8",
        "services": services,
        "configs": configs,
        "secrets": secrets,
        "volumes": {data_volume(i, plan): {} for i in range(network.nodes)},
        "networks": {"default": {"driver": "overlay", "ipam": {"config": [{"subnet": plan.subnet}]}}},
    }


def placement_warnings(manifest: Manifest, plan: StackPlan) -> list[str]:
    """What the plan does not give that its placement promises, one line each (empty: nothing)."""
    per_shard = manifest.network.per_shard
    if plan.placement == "spread" and plan.hosts < per_shard:
        return [f"--placement spread over {plan.hosts} host(s) with {per_shard} validators per shard: a shard's "
                f"validators share hosts (one host down takes more than one of them); use --hosts {per_shard} or more"]
    return []


def label_commands(plan: StackPlan) -> list[str]:
    """The `docker node update` lines that give each host its label (<host-h>: its node name),
    and the manager holding the rendered folder its results label (the generator runs there)."""
    return [f"docker node update --label-add {RESULTS_LABEL}=true <the manager holding {plan.folder}>",
            *(f"docker node update --label-add {host_label(h)}=true <host-{h}>" for h in range(plan.hosts))]


def placement_table(manifest: Manifest, plan: StackPlan) -> list[tuple[str, int, int, str]]:
    """(service, shard, validator, host) for every node: what the placement makes of the manifest."""
    network = manifest.network
    return [(f"node-{i}", network.shard_of(i), i % network.per_shard,
             "any" if (host := host_of(network, i, plan)) is None else str(host)) for i in range(network.nodes)]
