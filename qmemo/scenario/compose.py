"""`qmemo scenario compose`: a scenario manifest rendered as a docker compose project.

For users with a container engine: the manifest's nodes, its generator and a Prometheus
server as compose services, all from one image built by the repo's `Containerfile`
(Debian, liboqs built inside by scripts/setup.sh, qMEMO installed from its wheel). A
one-shot `genesis` service writes the devnet into a shared volume first; each node then
binds 0.0.0.0 and advertises its service name (`--advertise http://node-i:8000`); the
generator waits until every node answers /health. A sharded manifest (network.shards)
gets the runner's own peers (qmemo.scenario.argv.node_peers, node_shard): node i peers
with its shard's other nodes, pulls receipts from every other shard's (`--shard-peers`)
and signs with its shard's key, as `qmemo scenario run` and `qmemo deploy render` start it.

Link profiles: when a pair of the manifest's zones is joined by a profile with delay,
jitter or loss, the project gets a fixed subnet with one address per node, and each node
starts by shaping its own eth0 with the very tc commands the runner uses
(`links.plan()`: HTB per destination zone, netem under it, a u32 filter per peer
address) before it execs `qmemo node`; that takes `cap_add: NET_ADMIN` and a host kernel
with sch_netem (a kernel without it makes the node exit with tc's error, not run
unshaped). A manifest of `lan` links only is rendered unshaped: the container network
as it is.

What it leaves out, and says so in the project's README.md: perturbations (a `profile`
change included) and floods, and the invariants - compose starts the network and the
load, it does not judge them.

Pure: `render(manifest, context)` returns the files' text; the command writes them.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from qmemo.scenario import links
from qmemo.scenario.argv import NODE_PORT, gen_arguments, genesis_arguments, node_arguments, node_peers, node_shard
from qmemo.scenario.manifest import Manifest

IMAGE = "qmemo:local"
PROMETHEUS_IMAGE = "prom/prometheus:v2.53.0"   # the 2.x line, as Debian 12's prometheus package
DEVNET = "/devnet"
RUNS = "/runs"
# Shaped projects only: a fixed subnet, so that each node's tc filters can name its peers
# by address before any of them has started. Edit it if it overlaps a network of yours.
SHAPED_SUBNET_PREFIX = "172.31.231"
FIRST_NODE_HOST = 10


def to_yaml(value: Any, indent: int = 0) -> str:
    """Block-style YAML of dicts, lists and scalars; every scalar is written as JSON (strings
    double-quoted), which YAML reads as the same value: no YAML library needed."""
    pad = "  " * indent
    if isinstance(value, dict):
        if not value:
            return "{}"
        lines = []
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                lines.append(f"{pad}{key}:\n{to_yaml(item, indent + 1)}")
            else:
                lines.append(f"{pad}{key}: {to_yaml(item)}")
        return "\n".join(lines)
    if isinstance(value, list):
        if not value:
            return "[]"
        lines = []
        for item in value:
            if isinstance(item, (dict, list)) and item:
                body = to_yaml(item, indent + 1).lstrip()
                lines.append(f"{pad}- {body}")
            else:
                lines.append(f"{pad}- {to_yaml(item)}")
        return "\n".join(lines)
    return json.dumps(value)


def _health_check(url: str) -> dict[str, Any]:
    # A generous timeout: `qmemo health` is a Python start-up, which on a loaded 2-core
    # host can outlast a short timeout and keep a healthy node "starting" past compose's
    # patience (docs/scenarios.md, "Tests with the engine").
    return {"test": ["CMD", "qmemo", "health", url], "interval": "2s", "timeout": "30s", "retries": 60}


def is_shaped(manifest: Manifest) -> bool:
    """True when some pair of the manifest's zones is joined by a profile that needs netem."""
    network = manifest.network
    return any(manifest.profiles[network.profile_between(a, b)].needs_netem
               for a in network.zones for b in network.zones)


def node_addresses(manifest: Manifest) -> list[str]:
    """Each node's fixed address in a shaped project."""
    return [f"{SHAPED_SUBNET_PREFIX}.{FIRST_NODE_HOST + i}" for i in range(manifest.network.nodes)]


def shaping_entrypoint(manifest: Manifest, i: int) -> list[str]:
    """`sh -ec`: node i's tc commands (the runner's plan for its zone), then `exec qmemo <command>`."""
    commands = links.plan(manifest.network, manifest.profiles, i, node_addresses(manifest))
    script = "\n".join([*(shlex.join(command) for command in commands), 'exec qmemo "$$@"'])
    return ["sh", "-ec", script, f"node-{i}"]


def services(manifest: Manifest, context: str) -> dict[str, Any]:
    """The compose project as a dict: genesis, node-0..n-1, gen, prometheus (and, when
    shaped, a network with fixed node addresses)."""
    n = manifest.network.nodes
    shaped = is_shaped(manifest)
    build = {"context": context, "dockerfile": "Containerfile"}
    url = {i: f"http://node-{i}:{NODE_PORT}" for i in range(n)}
    project: dict[str, Any] = {
        "genesis": {
            "image": IMAGE, "build": build,
            # Once: a restarted project keeps its chain (and its genesis time).
            "entrypoint": ["sh", "-c", f'test -f {DEVNET}/genesis.json || exec qmemo "$$@"', "genesis"],
            "command": genesis_arguments(manifest, DEVNET),
            "volumes": [f"devnet:{DEVNET}"],
        },
    }
    for i in range(n):
        same, others = node_peers(manifest.network, i)
        project[f"node-{i}"] = {
            "image": IMAGE,
            "command": node_arguments(i, DEVNET, "/data", "0.0.0.0", [url[j] for j in same], advertise=url[i],
                                      shard=node_shard(manifest.network, i), shard_peers=[url[j] for j in others]),
            "depends_on": {"genesis": {"condition": "service_completed_successfully"}},
            "volumes": [f"devnet:{DEVNET}:ro", f"node-{i}-data:/data"],
            "ports": [f"127.0.0.1:{NODE_PORT + i}:{NODE_PORT}"],
            "healthcheck": _health_check(url[i]),
            "labels": {"qmemo.zone": manifest.network.zones[i]},
        }
        if shaped:
            project[f"node-{i}"].update({
                "entrypoint": shaping_entrypoint(manifest, i),
                "cap_add": ["NET_ADMIN"],       # tc on the container's own eth0
                "networks": {"default": {"ipv4_address": node_addresses(manifest)[i]}},
            })
    project["gen"] = {
        "image": IMAGE,
        "command": gen_arguments(manifest.load, DEVNET, f"{DEVNET}/accounts.keys.json",
                                 [url[i] for i in manifest.load.target_nodes], f"{RUNS}/gen"),
        "depends_on": {f"node-{i}": {"condition": "service_healthy"} for i in range(n)},
        # Read-write: the generator keeps its signed workloads in the devnet folder (workloads/).
        "volumes": [f"devnet:{DEVNET}", f"./runs:{RUNS}"],
    }
    project["prometheus"] = {
        "image": PROMETHEUS_IMAGE,
        "volumes": ["./prometheus.yml:/etc/prometheus/prometheus.yml:ro"],
        "ports": ["127.0.0.1:9090:9090"],
        "depends_on": [f"node-{i}" for i in range(n)],
    }
    volumes: dict[str, Any] = {"devnet": {}, **{f"node-{i}-data": {} for i in range(n)}}
    rendered: dict[str, Any] = {"services": project, "volumes": volumes}
    if shaped:
        rendered["networks"] = {"default": {"ipam": {"config": [{"subnet": f"{SHAPED_SUBNET_PREFIX}.0/24"}]}}}
    # No top-level `name`: docker-compose 1.29 (Debian 12) refuses it; the folder names the project.
    return rendered


def prometheus_config(template: str, manifest: Manifest) -> str:
    """deploy/prometheus.yml with its targets replaced by the compose services'."""
    targets = ", ".join(f'"node-{i}:{NODE_PORT}"' for i in range(manifest.network.nodes))
    lines: list[str] = []
    for line in template.splitlines():
        stripped = line.lstrip()
        if not lines and stripped.startswith("#"):
            continue        # the template's opening comment speaks of devnet.sh's local nodes
        if stripped.startswith("- targets:"):
            line = line[:len(line) - len(stripped)] + f"- targets: [{targets}]"
        elif stripped.startswith("devnet:"):
            line = line[:len(line) - len(stripped)] + f"devnet: {manifest.name}"
        lines.append(line)
    header = (f"# Rendered by `qmemo scenario compose` from deploy/prometheus.yml for scenario {manifest.name}:\n"
              "# the compose project's nodes, by service name.\n")
    return header + "\n".join(lines) + "\n"


def _links_note(manifest: Manifest) -> str:
    if not is_shaped(manifest):
        return "Links: all `lan`, so the nodes run on the container network as it is (unshaped)."
    network = manifest.network
    # Pairs of distinct zones, and a zone with itself only when two nodes share it.
    pairs = sorted({(min(a, b), max(a, b)) for a in network.zones for b in network.zones
                    if a != b or network.zones.count(a) > 1})
    lines = []
    for a, b in pairs:
        profile = manifest.profiles[network.profile_between(a, b)]
        lines.append(f"    {a} <-> {b}: {profile.name} ({profile.delay_ms:g} ms one-way, jitter {profile.jitter_ms:g} ms, "
                     f"loss {profile.loss_pct:g}%, {profile.rate_mbit:g} Mbit/s)")
    zones = ", ".join(f"node-{i} {zone}" for i, zone in enumerate(network.zones))
    return ("Links: each node shapes its own eth0 with tc before it starts (HTB per destination zone,\n"
            "netem under it, a filter per peer address on the fixed subnet "
            f"{SHAPED_SUBNET_PREFIX}.0/24),\nas `qmemo scenario run` does:\n"
            + "\n".join(lines) + f"\nZones: {zones}.\n"
            "This needs NET_ADMIN (granted in compose.yaml) and a host kernel with sch_netem: without\n"
            "it a node exits with tc's error instead of running unshaped.")


def readme(manifest: Manifest, manifest_path: str) -> str:
    network = manifest.network
    shards = (f" ({network.shards} shards of {network.per_shard}: each node peers with its shard's, pulls receipts "
              "from the others')" if network.shards > 1 else "")
    return f"""# {manifest.name}: a docker compose project rendered by `qmemo scenario compose {manifest_path}`

{manifest.description}

    scripts/image.sh            # in the checkout: the image qmemo:local (or `docker-compose build`)
    docker-compose up -d        # genesis once, then {manifest.network.nodes} nodes, then the generator
    docker-compose logs -f gen  # the load; its folder lands in ./runs/gen
    # Prometheus: http://127.0.0.1:9090   nodes: http://127.0.0.1:{NODE_PORT}..{NODE_PORT + manifest.network.nodes - 1}
    docker-compose down -v      # stop, and remove the chain's volumes

(`docker compose` works the same.) Prometheus runs from the {PROMETHEUS_IMAGE} image, pulled
from a registry; where none is reachable, name the other services:
`docker-compose up -d genesis {" ".join(f"node-{i}" for i in range(manifest.network.nodes))} gen`.

Rendered: the nodes{shards} (each binds 0.0.0.0 and advertises its service name), the load
({manifest.load.tps:g} TPS for {manifest.load.duration_s:g} s unless a schedule says otherwise), Prometheus.

{_links_note(manifest)}

Not rendered: perturbations (a link profile changed mid-run included), floods and the
invariants - run `qmemo scenario run {manifest_path}` (as root) for those.
"""
