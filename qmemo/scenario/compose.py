"""`qmemo scenario compose`: a scenario manifest rendered as a docker compose project.

For users with a container engine: the manifest's nodes, its generator and a Prometheus
server as compose services, all from one image built by the repo's `Containerfile`
(Debian, liboqs built inside by scripts/setup.sh, qMEMO installed from its wheel). A
one-shot `genesis` service writes the devnet into a shared volume first; each node then
binds 0.0.0.0 and advertises its service name (`--advertise http://node-i:8000`); the
generator waits until every node answers /health.

What it leaves out, and says so in the project's README.md: link profiles (netem in a
container needs NET_ADMIN and a kernel with sch_netem; run the manifest with `qmemo
scenario run` for those), perturbations and floods, and the invariants - compose starts
the network and the load, it does not judge them.

Pure: `render(manifest, context)` returns the files' text; the command writes them.
"""

from __future__ import annotations

import json
from typing import Any

from qmemo.scenario.argv import NODE_PORT, gen_arguments, genesis_arguments, node_arguments
from qmemo.scenario.manifest import Manifest

IMAGE = "qmemo:local"
PROMETHEUS_IMAGE = "prom/prometheus:v2.53.0"   # the 2.x line, as Debian 12's prometheus package
DEVNET = "/devnet"
RUNS = "/runs"


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
    return {"test": ["CMD", "qmemo", "health", url], "interval": "2s", "timeout": "5s", "retries": 60}


def services(manifest: Manifest, context: str) -> dict[str, Any]:
    """The compose project as a dict: genesis, node-0..n-1, gen, prometheus."""
    n = manifest.network.nodes
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
        project[f"node-{i}"] = {
            "image": IMAGE,
            "command": node_arguments(i, DEVNET, "/data", "0.0.0.0", [url[j] for j in range(n) if j != i],
                                      advertise=url[i]),
            "depends_on": {"genesis": {"condition": "service_completed_successfully"}},
            "volumes": [f"devnet:{DEVNET}:ro", f"node-{i}-data:/data"],
            "ports": [f"127.0.0.1:{NODE_PORT + i}:{NODE_PORT}"],
            "healthcheck": _health_check(url[i]),
            "labels": {"qmemo.zone": manifest.network.zones[i]},
        }
    project["gen"] = {
        "image": IMAGE,
        "command": gen_arguments(manifest.load, DEVNET, f"{DEVNET}/accounts.keys.json",
                                 [url[i] for i in manifest.load.target_nodes], f"{RUNS}/gen"),
        "depends_on": {f"node-{i}": {"condition": "service_healthy"} for i in range(n)},
        "volumes": [f"devnet:{DEVNET}:ro", f"./runs:{RUNS}"],
    }
    project["prometheus"] = {
        "image": PROMETHEUS_IMAGE,
        "volumes": ["./prometheus.yml:/etc/prometheus/prometheus.yml:ro"],
        "ports": ["127.0.0.1:9090:9090"],
        "depends_on": [f"node-{i}" for i in range(n)],
    }
    volumes: dict[str, Any] = {"devnet": {}, **{f"node-{i}-data": {} for i in range(n)}}
    # No top-level `name`: docker-compose 1.29 (Debian 12) refuses it; the folder names the project.
    return {"services": project, "volumes": volumes}


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


def readme(manifest: Manifest, manifest_path: str) -> str:
    return f"""# {manifest.name}: a docker compose project rendered by `qmemo scenario compose {manifest_path}`

{manifest.description}

    docker compose build        # or docker-compose; the image builds liboqs inside (a few minutes)
    docker compose up -d        # genesis once, then {manifest.network.nodes} nodes, then the generator
    docker compose logs -f gen  # the load; its folder lands in ./runs/gen
    # Prometheus: http://127.0.0.1:9090   nodes: http://127.0.0.1:{NODE_PORT}..{NODE_PORT + manifest.network.nodes - 1}
    docker compose down -v      # stop, and remove the chain's volumes

Rendered: the nodes (each binds 0.0.0.0 and advertises its service name), the load
({manifest.load.tps:g} TPS for {manifest.load.duration_s:g} s unless a schedule says otherwise), Prometheus.
Not rendered: link profiles (zones are only labels here), perturbations, floods and the
invariants - run `qmemo scenario run {manifest_path}` (as root) for those.
"""
