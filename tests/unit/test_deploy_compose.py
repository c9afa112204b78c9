"""deploy/compose.yaml - the devnet for Compose and Swarm - runs the scenario runner's command
lines (qmemo/scenario/argv.py) and keeps to what both orchestrators do.

The file is read as docker-compose reads it (`docker-compose config`, its defaults
substituted), through Debian's PyYAML, which docker-compose depends on.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from qmemo.scenario.argv import gen_arguments, genesis_arguments, node_arguments
from qmemo.scenario.manifest import load_manifest
from tests.conftest import REPO_ROOT

DEPLOY = REPO_ROOT / "deploy"
URLS = [f"http://node-{i}:8000" for i in range(3)]

pytestmark = pytest.mark.skipif(shutil.which("docker-compose") is None,
                                reason="docker-compose is not installed (scripts/setup.sh installs it)")


def yaml_to_dict(text: str) -> dict:
    loaded = subprocess.run(["/usr/bin/python3", "-c", "import json, sys, yaml; "
                             "print(json.dumps(yaml.safe_load(sys.stdin)))"],
                            input=text, capture_output=True, text=True, timeout=60)
    assert loaded.returncode == 0, loaded.stderr
    return json.loads(loaded.stdout)


@pytest.fixture(scope="module")
def project() -> dict:
    env = {"PATH": "/usr/bin:/bin"}     # no QMEMO_* from the caller: the file's defaults
    config = subprocess.run(["docker-compose", "-f", str(DEPLOY / "compose.yaml"), "config"], cwd=DEPLOY,
                            capture_output=True, text=True, timeout=60, env=env)
    assert config.returncode == 0, config.stderr
    return yaml_to_dict(config.stdout)


def test_the_command_lines_are_the_scenario_runners(project: dict) -> None:
    manifest = load_manifest(REPO_ROOT / "scenarios" / "lan-baseline.toml", REPO_ROOT / "scenarios" / "profiles.toml",
                             ["chain.accounts=300", "load.tps=200", "load.duration_s=30"])
    services = project["services"]
    assert services["genesis"]["command"] == genesis_arguments(manifest, "/devnet")
    for i in range(3):
        peers = [url for j, url in enumerate(URLS) if j != i]
        assert services[f"node-{i}"]["command"] == node_arguments(i, "/devnet", "/data", "0.0.0.0", peers,
                                                                  advertise=URLS[i])
    assert services["gen"]["command"] == gen_arguments(manifest.load, "/devnet", "/devnet/accounts.keys.json",
                                                       URLS, "/runs/gen")


def test_nothing_relies_on_what_swarm_ignores_or_publishes_a_port(project: dict) -> None:
    services = project["services"]
    raw = yaml_to_dict((DEPLOY / "compose.yaml").read_text())["services"]
    for name, service in services.items():
        assert "ports" not in service, name                        # Swarm would publish on every interface
        assert "build" not in service, name                        # stack deploy ignores it
        # Swarm ignores depends_on: each service waits itself (a list, as stack deploy requires).
        assert isinstance(raw[name].get("depends_on", []), list), name
    for i in range(3):
        node = services[f"node-{i}"]
        assert "until test -f /devnet/genesis.json" in node["entrypoint"][2]
        assert node["deploy"]["placement"]["constraints"] == [f"node.labels.qmemo-node-{i} == true"]
        assert node["deploy"]["endpoint_mode"] == "dnsrr"          # no IPVS needed
    assert services["gen"]["entrypoint"][2].startswith("qmemo health --wait 600 " + " ".join(URLS))
    assert project["networks"]["default"]["ipam"]["config"] == [{"subnet": "172.31.229.0/24"}]


def test_the_ports_file_publishes_the_nodes_on_loopback_only() -> None:
    config = subprocess.run(["docker-compose", "-f", "compose.yaml", "-f", "ports.yaml", "config"], cwd=DEPLOY,
                            capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert config.returncode == 0, config.stderr
    for i in range(3):
        assert yaml_to_dict(config.stdout)["services"][f"node-{i}"]["ports"] == [f"127.0.0.1:{8000 + i}:8000/tcp"]
