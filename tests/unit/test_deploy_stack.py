"""`qmemo deploy render`'s stack (qmemo.deploy.stack) runs what the local devnet runs, placed as asked.

The local devnet here is the scenario runner's (qmemo.scenario.cluster, runner): its node
and generator command lines are taken from it with each node's namespace address set to
the service's name, so the two can only differ in what a container changes (the listen
address, the data folder, the advertised URL) - and the test names each of those.
"""

from __future__ import annotations

import ipaddress
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from qmemo.cli import main
from qmemo.deploy.files import make_devnet, write_stack
from qmemo.deploy.stack import StackPlan, host_of, label_commands, placement_warnings, stack
from qmemo.errors import ConfigError
from qmemo.scenario import runner
from qmemo.scenario.argv import node_peers
from qmemo.scenario.cluster import Cluster
from qmemo.scenario.compose import to_yaml
from qmemo.scenario.hosts import Host, Hosts
from qmemo.scenario.manifest import Manifest, load_manifest
from tests.conftest import REPO_ROOT

SCENARIOS = REPO_ROOT / "scenarios"
SHAPES = [(1, 3), (2, 3), (4, 3)]
FOLDER = "/srv/qmemo"


def manifest_of(shards: int, per_shard: int) -> Manifest:
    overrides = [f"network.nodes={shards * per_shard}", f"network.shards={shards}", "chain.accounts=300"]
    if shards > 1:
        overrides.append("load.cross_shard_pct=20")
    return load_manifest(SCENARIOS / "lan-baseline.toml", SCENARIOS / "profiles.toml", overrides)


def plan(placement: str = "spread", hosts: int = 3) -> StackPlan:
    return StackPlan(hosts=hosts, placement=placement, folder=FOLDER, genesis_hash="0123456789ab", verify_threads=1)


def local_commands(manifest: Manifest, tmp_path: Path) -> tuple[dict[int, list[str]], list[str]]:
    """The scenario runner's node and generator command lines (program path dropped), each
    node's address being its service's name."""
    hosts = Hosts(ipaddress.IPv4Network("10.231.0.0/24"))
    hosts.hosts = {f"node-{i}": Host(f"node-{i}", "-", "-", f"node-{i}") for i in range(manifest.network.nodes)}
    started: dict[int, list[str]] = {}
    hosts.spawn = lambda host, name, command, log, env=None: started.__setitem__(int(name[5:]), command[1:])
    cluster = Cluster(manifest, hosts, Path("/devnet"), tmp_path)
    for i in range(manifest.network.nodes):
        cluster.start_node(i)
    return started, runner._gen_command(cluster)[1:]


def container_changes(command: list[str], i: int) -> list[str]:
    """A runner's node command as the container runs it: listen on every interface, the
    data in the node's volume, its service name advertised (0.0.0.0 says nothing to a peer)."""
    out = list(command)
    out[out.index("--host") + 1] = "0.0.0.0"
    out[out.index("--data") + 1] = "/data"
    at = out.index("--verify-threads")
    return out[:at] + ["--advertise", f"http://node-{i}:8000"] + out[at:]


@pytest.mark.parametrize(("shards", "per_shard"), SHAPES)
def test_the_nodes_run_the_local_devnets_command_lines(shards: int, per_shard: int, tmp_path: Path) -> None:
    manifest = manifest_of(shards, per_shard)
    services = stack(manifest, plan())["services"]
    local, _ = local_commands(manifest, tmp_path)
    assert sorted(services) == sorted([f"node-{i}" for i in range(shards * per_shard)] + ["gen"])
    for i, command in local.items():
        assert services[f"node-{i}"]["command"] == container_changes(command, i)
        same, _ = node_peers(manifest.network, i)          # it starts once its shard's peers resolve
        assert services[f"node-{i}"]["entrypoint"][2].startswith(f"for peer in {' '.join(f'node-{j}' for j in same)};")
        if shards > 1:      # receipts from every other shard's nodes, blocks from its own
            shard_peers = services[f"node-{i}"]["command"][services[f"node-{i}"]["command"].index("--shard-peers") + 1]
            assert len(shard_peers.split(",")) == (shards - 1) * per_shard


@pytest.mark.parametrize(("shards", "per_shard"), SHAPES)
def test_the_generator_runs_the_local_devnets_load_into_the_managers_run_folder(
        shards: int, per_shard: int, tmp_path: Path) -> None:
    manifest = manifest_of(shards, per_shard)
    gen = stack(manifest, plan())["services"]["gen"]
    _, local = local_commands(manifest, tmp_path)
    expected = list(local)
    expected[expected.index("--accounts") + 1] = "/devnet/accounts.keys.json"   # the runner splits off an attacker's
    expected[expected.index("--out") + 1] = "/runs/${QMEMO_RUN:-1}/gen"
    assert gen["command"] == [*expected, "--live", "/runs/${QMEMO_RUN:-1}/gen/live.json"]
    assert gen["deploy"]["placement"]["constraints"] == ["node.role == manager"]
    assert gen["volumes"] == [f"{FOLDER}/devnet:/devnet", f"{FOLDER}/runs:/runs"]
    assert gen["deploy"]["restart_policy"] == {"condition": "none"}     # one load per deploy
    # Swarm starts everything at once: the generator waits for every node itself.
    assert all(f"http://node-{i}:8000" in gen["entrypoint"][2] for i in range(shards * per_shard))


@pytest.mark.parametrize(("shards", "per_shard"), SHAPES)
def test_spread_puts_a_shards_validators_on_different_hosts(shards: int, per_shard: int) -> None:
    manifest = manifest_of(shards, per_shard)
    services = stack(manifest, plan())["services"]
    for k in range(shards):
        hosts = [services[f"node-{i}"]["deploy"]["placement"]["constraints"] for i in manifest.network.shard_nodes(k)]
        assert sorted(hosts) == [[f"node.labels.qmemo.host-{h} == true"] for h in range(3)]
    per_host = [sum(host_of(manifest.network, i, plan()) == h for i in range(shards * per_shard)) for h in range(3)]
    assert per_host == [shards] * 3                         # as many nodes on every host
    ten = [host_of(manifest.network, i, plan(hosts=10)) for i in range(shards * per_shard)]
    assert all(len(set(ten[k * per_shard:(k + 1) * per_shard])) == per_shard for k in range(shards))
    assert len(set(ten)) == min(10, shards * per_shard)     # more hosts: each one used


def test_shard_placement_keeps_a_shard_on_one_host_and_none_leaves_it_to_swarm() -> None:
    manifest = manifest_of(4, 3)
    shard = stack(manifest, plan("shard"))["services"]
    for i in range(12):
        assert shard[f"node-{i}"]["deploy"]["placement"]["constraints"] == [
            f"node.labels.qmemo.host-{(i // 3) % 3} == true"]
    anywhere = stack(manifest, plan("none"))["services"]
    assert all("placement" not in anywhere[f"node-{i}"]["deploy"] for i in range(12))
    assert label_commands(plan()) == [f"docker node update --label-add qmemo.host-{h}=true <host-{h}>"
                                      for h in range(3)]


def test_swarm_carries_the_genesis_and_each_key_and_names_them_by_the_chain() -> None:
    manifest = manifest_of(2, 3)
    rendered = stack(manifest, plan())
    node = rendered["services"]["node-4"]
    assert node["configs"] == [{"source": "genesis-0123456789ab", "target": "/devnet/genesis.json"}]
    assert node["secrets"] == [{"source": "shard-1-validator-1-0123456789ab",
                                "target": "/devnet/shard-1-validator-1.keys.json"}]
    assert rendered["configs"] == {"genesis-0123456789ab": {"file": f"{FOLDER}/devnet/genesis.json"}}
    assert rendered["secrets"]["shard-1-validator-1-0123456789ab"] == {
        "file": f"{FOLDER}/devnet/shard-1-validator-1.keys.json"}
    assert node["volumes"] == ["node-4-data:/data"] and "node-4-data" in rendered["volumes"]
    assert node["deploy"]["endpoint_mode"] == "dnsrr"        # no IPVS needed
    assert rendered["networks"]["default"]["driver"] == "overlay"
    for service in rendered["services"].values():
        assert "ports" not in service and "build" not in service and "depends_on" not in service


def test_a_plan_that_cannot_be_deployed_is_refused() -> None:
    with pytest.raises(ConfigError, match="--placement"):
        plan("everywhere")
    with pytest.raises(ConfigError, match="--hosts"):
        plan(hosts=0)
    with pytest.raises(ConfigError, match="absolute"):
        StackPlan(hosts=3, placement="spread", folder="runs/x", genesis_hash="0")


@pytest.mark.skipif(shutil.which("docker-compose") is None, reason="docker-compose is not installed")
def test_the_stack_file_is_valid_compose_v3(tmp_path: Path) -> None:
    (tmp_path / "stack.yaml").write_text(to_yaml(stack(manifest_of(4, 3), plan())) + "\n")
    done = subprocess.run(["docker-compose", "-f", "stack.yaml", "config", "--services"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.split()) == sorted([f"node-{i}" for i in range(12)] + ["gen"])


def test_a_devnet_folder_this_command_did_not_make_is_never_replaced(tmp_path: Path) -> None:
    devnet = tmp_path / "devnet"
    devnet.mkdir()
    (devnet / "notes.txt").write_text("someone's")
    with pytest.raises(ConfigError, match="refusing"):
        make_devnet(manifest_of(2, 3), devnet)
    assert (devnet / "notes.txt").read_text() == "someone's"


def test_the_rendered_folder_says_how_to_label_deploy_collect_and_report(tmp_path: Path) -> None:
    manifest = manifest_of(2, 3)
    write_stack(manifest, plan(), tmp_path, "qmemo deploy render lan-baseline --shards 2")
    readme = (tmp_path / "README.md").read_text()
    for line in [*label_commands(plan()),
                 f"QMEMO_RUN=1 docker stack deploy --resolve-image never -c {FOLDER}/stack.yaml qmemo",
                 f"qmemo deploy collect {FOLDER} --stack qmemo --run 1", f"qmemo report --devnet {FOLDER}/runs/1",
                 "| node-4 | 1 | 1 | 1 |"]:
        assert line in readme
    assert (tmp_path / "stack.yaml").read_text().startswith("# Rendered by `qmemo deploy render lan-baseline")
    assert (tmp_path / "runs").is_dir()


def render(argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """`qmemo deploy render ...` as typed (the devnet not made: its hash fixed); (stdout, stderr)."""
    monkeypatch.setattr("qmemo.deploy.files.make_devnet", lambda manifest, devnet: "0123456789ab")
    monkeypatch.setattr("sys.argv", ["/somewhere/bin/qmemo", *argv])
    assert main(argv) == 0
    return capsys.readouterr()


def test_per_shard_alone_gives_each_of_the_manifests_shards_that_many_validators(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    render(["deploy", "render", "lan-baseline", "--set", "network.shards=2", "--set", "load.cross_shard_pct=20",
            "--per-shard", "3", "--out", str(tmp_path)], monkeypatch, capsys)
    services = re.findall(r"^  (node-\d+|gen):$", (tmp_path / "stack.yaml").read_text(), re.MULTILINE)
    assert sorted(services) == sorted([f"node-{i}" for i in range(6)] + ["gen"])


def test_the_rendered_files_name_the_command_line_as_given(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["deploy", "render", "lan-baseline", "--shards", "2", "--hosts", "4", "--placement", "shard",
            "--verify-threads", "1", "--subnet", "172.31.245.0/24", "--set", "load.tps=10", "--out", str(tmp_path)]
    render(argv, monkeypatch, capsys)
    given = "qmemo " + " ".join(argv)
    assert (tmp_path / "stack.yaml").read_text().startswith(f"# Rendered by `{given}`")
    assert f"Rendered by `{given}`" in (tmp_path / "README.md").read_text()


def test_spread_over_fewer_hosts_than_a_shards_validators_is_warned_of(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _, err = render(["deploy", "render", "lan-baseline", "--shards", "2", "--hosts", "2", "--out", str(tmp_path)],
                    monkeypatch, capsys)
    assert "warning: --placement spread over 2 host(s) with 3 validators per shard" in err
    assert placement_warnings(manifest_of(2, 3), plan(hosts=3)) == []
    assert placement_warnings(manifest_of(2, 3), plan("shard", hosts=2)) == []    # sharing is what shard asks
