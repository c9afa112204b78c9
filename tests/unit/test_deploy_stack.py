"""`qmemo deploy render`'s stack (qmemo.deploy.stack) runs what the local devnet runs, placed as asked.

The local devnet here is the scenario runner's (qmemo.scenario.cluster, runner): its node
and generator command lines are taken from it with each node's namespace address set to
the service's name, so the two can only differ in what a container changes (the listen
address, the data folder, the advertised URL) - and the test names each of those.
"""

from __future__ import annotations

import ipaddress
import re
import shlex
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
    # The manager holding the folder (labelled so), not any manager: its bind mounts are that host's.
    assert gen["deploy"]["placement"]["constraints"] == ["node.role == manager", "node.labels.qmemo.results == true"]
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
    assert label_commands(plan()) == [
        f"docker node update --label-add qmemo.results=true <the manager holding {FOLDER}>",
        *(f"docker node update --label-add qmemo.host-{h}=true <host-{h}>" for h in range(3))]


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
    assert node["volumes"] == ["node-4-data-0123456789ab:/data"] and "node-4-data-0123456789ab" in rendered["volumes"]
    assert node["deploy"]["endpoint_mode"] == "dnsrr"        # no IPVS needed
    assert rendered["networks"]["default"]["driver"] == "overlay"
    for service in rendered["services"].values():
        assert "ports" not in service and "build" not in service and "depends_on" not in service


def test_a_failing_node_is_restarted_5_s_apart_at_most_5_times_in_120_s() -> None:
    services = stack(manifest_of(2, 3), plan())["services"]
    for i in range(6):   # a crash loop (another chain's store, a bad key) ends failed, not restarted forever
        assert services[f"node-{i}"]["deploy"]["restart_policy"] == {
            "condition": "on-failure", "delay": "5s", "max_attempts": 5, "window": "120s"}
    assert services["gen"]["deploy"]["restart_policy"] == {"condition": "none"}
    assert ('restart_policy:\n        condition: "on-failure"\n        delay: "5s"\n        max_attempts: 5\n'
            '        window: "120s"\n') in to_yaml(stack(manifest_of(1, 3), plan()))


def test_a_plan_that_cannot_be_deployed_is_refused() -> None:
    with pytest.raises(ConfigError, match="--placement"):
        plan("everywhere")
    with pytest.raises(ConfigError, match="--hosts"):
        plan(hosts=0)
    with pytest.raises(ConfigError, match="absolute"):
        StackPlan(hosts=3, placement="spread", folder="runs/x", genesis_hash="0")
    for subnet in ("172.31.244.1/24", "172.31.244.0", "not-a-net", "172.31.244.0/33"):
        with pytest.raises(ConfigError, match="--subnet"):
            StackPlan(hosts=3, placement="spread", folder=FOLDER, genesis_hash="0", subnet=subnet)


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
                 f"    .venv/bin/qmemo deploy collect {FOLDER} --stack qmemo --run 1",
                 f"    .venv/bin/qmemo report --devnet {FOLDER}/runs/1", "| node-4 | 1 | 1 | 1 |"]:
        assert line in readme
    # Every qmemo command the steps give is the checkout's, as in the rest of the docs.
    assert [line for line in readme.splitlines() if line.lstrip().startswith("qmemo ")] == []
    assert (tmp_path / "stack.yaml").read_text().startswith("# Rendered by `qmemo deploy render lan-baseline")
    assert readme.startswith("<!-- Rendered by `qmemo deploy render lan-baseline")
    assert (tmp_path / "runs").is_dir()


def render(argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    """`qmemo deploy render ...` as typed (the devnet not made: its hash fixed); (stdout, stderr)."""
    monkeypatch.setattr("qmemo.deploy.files.make_devnet", lambda manifest, devnet: "0123456789ab")
    monkeypatch.setattr("qmemo.deploy.files.carry_genesis", lambda manifest, devnet, limit_bytes: False)
    monkeypatch.setattr("sys.argv", ["/somewhere/bin/qmemo", *argv])
    assert main(argv) == 0
    return capsys.readouterr()


def test_per_shard_alone_gives_each_of_the_manifests_shards_that_many_validators(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    render(["deploy", "render", "lan-baseline", "--set", "network.shards=2", "--set", "load.cross_shard_pct=20",
            "--per-shard", "3", "--drop-thresholds", "--out", str(tmp_path)], monkeypatch, capsys)
    services = re.findall(r"^  (node-\d+|gen):$", (tmp_path / "stack.yaml").read_text(), re.MULTILINE)
    assert sorted(services) == sorted([f"node-{i}" for i in range(6)] + ["gen"])


def test_the_rendered_files_name_the_command_line_as_given(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["deploy", "render", "lan-baseline", "--shards", "2", "--hosts", "4", "--placement", "shard",
            "--verify-threads", "1", "--subnet", "172.31.245.0/24", "--set", "load.tps=10", "--drop-thresholds",
            "--out", str(tmp_path)]
    render(argv, monkeypatch, capsys)
    given = "qmemo " + " ".join(argv)
    assert (tmp_path / "stack.yaml").read_text().startswith(f"# Rendered by `{given}`")
    assert f"Rendered by `{given}`" in (tmp_path / "README.md").read_text()


def test_spread_over_fewer_hosts_than_a_shards_validators_is_warned_of(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _, err = render(["deploy", "render", "lan-baseline", "--shards", "2", "--hosts", "2", "--drop-thresholds",
                     "--out", str(tmp_path)], monkeypatch, capsys)
    assert "warning: --placement spread over 2 host(s) with 3 validators per shard" in err
    assert placement_warnings(manifest_of(2, 3), plan(hosts=3)) == []
    assert placement_warnings(manifest_of(2, 3), plan("shard", hosts=2)) == []    # sharing is what shard asks


def test_the_readme_says_the_load_is_one_generator_process_per_shard_in_one_task_on_the_manager(
        tmp_path: Path) -> None:
    write_stack(manifest_of(4, 3), plan(), tmp_path, "qmemo deploy render lan-baseline --shards 4")
    readme = " ".join((tmp_path / "README.md").read_text().split())
    assert ("one generator process per shard (4), all in the one `gen` task on the manager labelled "
            "qmemo.results=true (`qmemo gen` without --generators)") in readme
    assert "Generators are not spread over hosts" in readme
    gen = stack(manifest_of(4, 3), plan())["services"]["gen"]
    assert "--generators" not in gen["command"]             # so qmemo gen starts one per shard


def test_a_new_chain_gets_new_node_volumes() -> None:
    manifest = manifest_of(2, 3)
    other = StackPlan(hosts=3, placement="spread", folder=FOLDER, genesis_hash="fedcba987654")
    volumes = [set(stack(manifest, p)["volumes"]) for p in (plan(), other)]
    assert volumes[0] == {f"node-{i}-data-0123456789ab" for i in range(6)}
    assert volumes[0].isdisjoint(volumes[1])      # a node never opens the old chain's store ("holds another chain")
    assert stack(manifest, other)["services"]["node-5"]["volumes"] == ["node-5-data-fedcba987654:/data"]


@pytest.mark.parametrize("name", ["README.md", "stack.yaml"])
def test_render_never_overwrites_a_readme_or_stack_file_it_did_not_write(
        name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / name).write_text("# my own notes\n")
    made: list[Path] = []
    monkeypatch.setattr("qmemo.deploy.files.make_devnet", lambda manifest, devnet: made.append(devnet) or "0")
    assert main(["deploy", "render", "lan-baseline", "--shards", "2", "--drop-thresholds",
                 "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path / name} exists and was not written by qmemo deploy render" in " ".join(err.split())
    assert (tmp_path / name).read_text() == "# my own notes\n" and made == []      # refused before the genesis
    with pytest.raises(ConfigError, match="refusing to overwrite"):                 # and by write_stack itself
        write_stack(manifest_of(2, 3), plan(), tmp_path, "qmemo deploy render lan-baseline")


def test_render_writes_over_its_own_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["deploy", "render", "lan-baseline", "--shards", "2", "--drop-thresholds", "--out", str(tmp_path)]
    render(argv, monkeypatch, capsys)
    render([*argv[:-2], "--hosts", "4", *argv[-2:]], monkeypatch, capsys)         # again, another plan
    assert "--hosts 4" in (tmp_path / "stack.yaml").read_text().splitlines()[0]


@pytest.mark.parametrize(("flags", "named"), [
    (["--shards", "0"], "--shards must be 1 or more (got 0)"),
    (["--shards", "2", "--per-shard", "0"], "--per-shard must be 1 or more (got 0)"),
    (["--per-shard", "0"], "--per-shard must be 1 or more (got 0)"),
    (["--shards", "2", "--hosts", "0"], "--hosts must be 1 or more (got 0)"),
    (["--shards", "2", "--verify-threads", "0"], "--verify-threads must be 1 or more (got 0)"),
    (["--shards", "2", "--subnet", "172.31.244.7/24"], "--subnet must be a network"),
    (["--shards", "2", "--subnet", "nowhere"], "--subnet must be a network"),
])
def test_a_flag_out_of_range_is_refused_by_name_before_anything_is_made(
        flags: list[str], named: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    made: list[Path] = []
    monkeypatch.setattr("qmemo.deploy.files.make_devnet", lambda manifest, devnet: made.append(devnet) or "0")
    out = tmp_path / "out"
    assert main(["deploy", "render", "lan-baseline", *flags, "--drop-thresholds", "--out", str(out)]) == 1
    assert named in capsys.readouterr().err
    assert made == [] and not out.exists()


def documented_render_commands() -> list[tuple[str, list[str]]]:
    """(where, argv after `qmemo`) of every `qmemo deploy render` command line in a code
    block of README.md and docs/scenarios.md, its continuation lines joined, comments dropped."""
    found = []
    for doc in (REPO_ROOT / "README.md", REPO_ROOT / "docs" / "scenarios.md"):
        in_block, joined, number = False, "", 0
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            if line.lstrip().startswith("```"):
                in_block, joined = not in_block, ""
                continue
            if not in_block:
                continue
            if not joined:
                number = n
            joined += line
            if line.endswith("\\"):
                joined = joined[:-1] + " "
                continue
            command, joined = joined, ""
            if "deploy render" not in command:      # other blocks hold TOML, JSON, other commands
                continue
            words = shlex.split(command, comments=True)
            if words[1:3] == ["deploy", "render"] and words[0].endswith("qmemo"):
                found.append((f"{doc.relative_to(REPO_ROOT)}:{number}", words[1:]))
    return found


def test_every_documented_render_command_renders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    commands = documented_render_commands()
    assert {where.split(":")[0] for where, _ in commands} == {"README.md", "docs/scenarios.md"}, commands
    for k, (where, argv) in enumerate(commands):
        out = tmp_path / str(k)
        if "--out" in argv:
            argv = list(argv)
            argv[argv.index("--out") + 1] = str(out)
        else:
            argv = [*argv, "--out", str(out)]
        monkeypatch.setattr("qmemo.deploy.files.make_devnet", lambda manifest, devnet: "0123456789ab")
        monkeypatch.setattr("qmemo.deploy.files.carry_genesis", lambda manifest, devnet, limit_bytes: False)
        monkeypatch.setattr("sys.argv", ["/somewhere/bin/qmemo", *argv])
        code = main(argv)
        err = capsys.readouterr().err
        assert code == 0, f"{where}: `qmemo {shlex.join(argv)}` failed: {err}"
        assert (out / "stack.yaml").is_file(), where


def test_the_documented_command_extraction_joins_continuations_and_drops_comments(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (tmp_path / "README.md").write_text("`qmemo deploy render X` in prose\n```sh\n"
                                        ".venv/bin/qmemo deploy render lan-baseline --shards 4 \\\n"
                                        "  --set load.tps=400   # a comment\n```\n")
    (docs / "scenarios.md").write_text("```sh\nqmemo deploy render lan-baseline --hosts 0\n```\n")
    monkeypatch.setattr(f"{__name__}.REPO_ROOT", tmp_path)
    assert documented_render_commands() == [
        ("README.md:3", ["deploy", "render", "lan-baseline", "--shards", "4", "--set", "load.tps=400"]),
        ("docs/scenarios.md:2", ["deploy", "render", "lan-baseline", "--hosts", "0"])]
