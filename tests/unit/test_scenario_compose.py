"""`qmemo scenario compose`: a shipped manifest rendered as a docker compose project that
Debian's docker-compose accepts (`docker-compose config`, which parses and checks a
project without a container engine), with the nodes, generator and Prometheus wired
by service name, and the same command lines the scenario runner uses."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from qmemo.scenario.argv import gen_arguments, node_arguments
from qmemo.scenario.compose import prometheus_config, services, to_yaml
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
