"""`qmemo scenario compose`: a shipped manifest rendered as a docker compose project that
Debian's docker-compose accepts (`docker-compose config`, which parses and checks a
project without a container engine), with the nodes, generator and Prometheus wired
by service name, and the same command lines the scenario runner uses."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from qmemo.scenario import links
from qmemo.scenario.argv import gen_arguments, node_arguments, node_peers, node_shard
from qmemo.scenario.compose import prometheus_config, readme, services, to_yaml
from qmemo.scenario.manifest import load_manifest
from tests.conftest import REPO_ROOT, VENV_BIN, run_command

SCENARIOS = REPO_ROOT / "scenarios"


def _manifest(name: str):
    return load_manifest(SCENARIOS / f"{name}.toml", SCENARIOS / "profiles.toml")


def test_yaml_scalars_are_json_so_yaml_reads_the_same_values():
    text = to_yaml({"a": ["x", 1, True, None, "$$@ \"q\""], "b": {}, "c": {"d": [{"e": "f", "g": [1, 2]}]}})
    assert text.splitlines() == ['a:', '  - "x"', '  - 1', '  - true', '  - null', '  - "$$@ \\"q\\""', 'b: {}',
                                 'c:', '  d:', '    - e: "f"', '      g:', '        - 1', '        - 2']


def test_nodes_bind_every_interface_advertise_their_service_and_peer_by_name():
    project = services(_manifest("wan-three-continents"), "/src")["services"]
    assert sorted(project) == ["gen", "genesis", "node-0", "node-1", "node-2", "prometheus"]
    node = project["node-1"]["command"]
    assert node == node_arguments(1, "/devnet", "/data", "0.0.0.0", ["http://node-0:8000", "http://node-2:8000"],
                                  advertise="http://node-1:8000")
    assert project["node-1"]["labels"] == {"qmemo.zone": "us"}
    assert project["gen"]["depends_on"] == {f"node-{i}": {"condition": "service_healthy"} for i in range(3)}
    manifest = _manifest("wan-three-continents")
    assert project["gen"]["command"] == gen_arguments(manifest.load, "/devnet", "/devnet/accounts.keys.json",
                                                      [f"http://node-{i}:8000" for i in range(3)], "/runs/gen")


def test_a_lan_only_manifest_is_rendered_unshaped():
    rendered = services(_manifest("lan-baseline"), "/src")
    assert "networks" not in rendered
    for i in range(3):
        node = rendered["services"][f"node-{i}"]
        assert "entrypoint" not in node and "cap_add" not in node and "networks" not in node
    assert "unshaped" in readme(_manifest("lan-baseline"), "lan-baseline")


def test_shaped_nodes_get_fixed_addresses_net_admin_and_the_runners_tc_plan():
    manifest = _manifest("wan-three-continents")
    rendered = services(manifest, "/src")
    assert rendered["networks"] == {"default": {"ipam": {"config": [{"subnet": "172.31.231.0/24"}]}}}
    addresses = [rendered["services"][f"node-{i}"]["networks"]["default"]["ipv4_address"] for i in range(3)]
    assert addresses == ["172.31.231.10", "172.31.231.11", "172.31.231.12"]
    node = rendered["services"]["node-2"]
    assert node["cap_add"] == ["NET_ADMIN"]
    shell, flags, script, name = node["entrypoint"]
    assert (shell, flags, name) == ("sh", "-ec", "node-2")
    plan = links.plan(manifest.network, manifest.profiles, 2, addresses)
    assert script.splitlines() == [" ".join(c) for c in plan] + ['exec qmemo "$$@"']
    assert any("netem" in line and "delay 111ms 5.55ms" in line for line in script.splitlines())  # ap -> eu
    text = readme(manifest, "wan-three-continents")
    assert "eu <-> us: transatlantic (44 ms one-way" in text and "ap <-> ap" not in text


def _run_entrypoint(node: dict, fakes: dict[str, str], bin_dir) -> subprocess.CompletedProcess:
    """Run a node service's entrypoint + command as a container would (compose turns `$$`
    into `$`), with the programs in `fakes` replaced by the given shell scripts."""
    for program, body in fakes.items():
        (bin_dir / program).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / program).chmod(0o755)
    shell, flags, script, name = node["entrypoint"]
    return subprocess.run([shell, flags, script.replace("$$", "$"), name, *node["command"]],
                          env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
                          capture_output=True, text=True, timeout=30)


def test_the_shaping_entrypoint_runs_tc_in_order_then_execs_the_node(tmp_path):
    """With `tc` and `qmemo` replaced by scripts that record their arguments: every tc
    command of the plan runs, in order, then the node's own command line, unchanged."""
    manifest = _manifest("wan-three-continents")
    node = services(manifest, "/src")["services"]["node-1"]
    record = tmp_path / "calls"
    done = _run_entrypoint(node, {p: f'echo "{p} $*" >> {record}' for p in ("tc", "qmemo")}, tmp_path)
    assert done.returncode == 0, done.stderr
    plan = links.plan(manifest.network, manifest.profiles, 1, ["172.31.231.10", "172.31.231.11", "172.31.231.12"])
    assert record.read_text().splitlines() == [" ".join(c) for c in plan] + ["qmemo " + " ".join(node["command"])]


def test_a_failing_tc_stops_the_node_from_starting(tmp_path):
    """No netem in the host kernel: tc fails, and the node must not start unshaped."""
    node = services(_manifest("wan-three-continents"), "/src")["services"]["node-0"]
    done = _run_entrypoint(node, {"tc": "echo 'Specified qdisc kind is unknown.' >&2; exit 2",
                                  "qmemo": f"touch {tmp_path}/started"}, tmp_path)
    assert done.returncode != 0 and "qdisc kind is unknown" in done.stderr
    assert not (tmp_path / "started").exists()


def test_prometheus_scrapes_the_compose_nodes():
    template = (REPO_ROOT / "deploy" / "prometheus.yml").read_text()
    rendered = prometheus_config(template, _manifest("lan-baseline"))
    assert '- targets: ["node-0:8000", "node-1:8000", "node-2:8000"]' in rendered
    assert "127.0.0.1:8000" not in rendered and "metrics_path: /metrics/prometheus" in rendered


@pytest.mark.skipif(shutil.which("docker-compose") is None,
                    reason="docker-compose is not installed (scripts/setup.sh installs it)")
def test_docker_compose_accepts_the_rendered_project(tmp_path):
    out = tmp_path / "project"
    done = run_command([str(VENV_BIN / "qmemo"), "scenario", "compose", "kill-producer", "--out", str(out),
                        "--set", "load.tps=200"])
    assert done.returncode == 0, done.stderr
    assert {p.name for p in out.iterdir()} == {"compose.yaml", "prometheus.yml", "README.md"}
    checked = subprocess.run(["docker-compose", "config"], cwd=out, capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stderr
    config = checked.stdout
    assert "dockerfile: Containerfile" in config and f"context: {REPO_ROOT}" in config
    assert "- '200'" in config            # the override reached the generator
    assert "service_completed_successfully" in config and "service_healthy" in config
    rendered = json.dumps(services(_manifest("kill-producer"), str(REPO_ROOT)))
    assert "kill" not in rendered          # perturbations are not rendered (the README says so)


@pytest.mark.skipif(shutil.which("docker-compose") is None,
                    reason="docker-compose is not installed (scripts/setup.sh installs it)")
def test_docker_compose_accepts_a_shaped_project(tmp_path):
    out = tmp_path / "project"
    done = run_command([str(VENV_BIN / "qmemo"), "scenario", "compose", "wan-three-continents", "--out", str(out)])
    assert done.returncode == 0, done.stderr
    checked = subprocess.run(["docker-compose", "config"], cwd=out, capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stderr
    config = checked.stdout
    assert "subnet: 172.31.231.0/24" in config and config.count("- NET_ADMIN") == 3
    assert all(f"ipv4_address: 172.31.231.{10 + i}" in config for i in range(3))
    assert "netem limit 100000 delay 73ms" in config     # us -> ap, transpacific


def test_a_sharded_manifests_nodes_peer_within_their_shard_and_pull_receipts_from_the_others():
    manifest = _manifest("shards-kill-partition")          # 2 shards of 3
    project = services(manifest, "/src")["services"]
    urls = [f"http://node-{i}:8000" for i in range(6)]
    assert project["genesis"]["command"][-2:] == ["--shards", "2"]
    for i in range(6):
        same, others = node_peers(manifest.network, i)
        assert project[f"node-{i}"]["command"] == node_arguments(
            i, "/devnet", "/data", "0.0.0.0", [urls[j] for j in same], advertise=urls[i],
            shard=node_shard(manifest.network, i), shard_peers=[urls[j] for j in others])
    node = project["node-4"]["command"]
    assert node[node.index("--peers") + 1] == "http://node-3:8000,http://node-5:8000"        # shard 1's own
    assert node[node.index("--shard-peers") + 1] == ",".join(urls[:3])                      # shard 0's
    assert node[node.index("--key") + 1] == "/devnet/shard-1-validator-1.keys.json"
    assert "2 shards of 3" in readme(manifest, "shards-kill-partition")
