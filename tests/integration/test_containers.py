"""Containers on a real engine: the image, the devnet under Compose and under Swarm, a
rendered scenario project, and a namespaced scenario while dockerd runs.

One dockerd for the module (the `engine` and `image` fixtures, tests/integration/conftest.py):
the machine's own when one answers, else one started here with its own data root, stopped
by PID at the end, the host's iptables, sysctls and links put back exactly as they were
(checked: a difference fails the module). The image is built by scripts/image.sh, which
skips the build when its content tag is in the engine's data root already. Each devnet run is 3 validators
and a short load; the generator's own summary, written from inside the project into a
bind-mounted folder, must account for every planned transaction.

Where no engine can run, the tests fail with the reason (under CI) or are skipped with
it (a developer's machine without root).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from qmemo.scenario.verdict import read
from tests.conftest import REPO_ROOT, VENV_BIN
from tests.integration.engine import SWARM_POOL, Engine
from tests.integration.swarm import leftovers

pytestmark = pytest.mark.slow

TPS = 200
DURATION_S = 10
RUN_TIMEOUT_S = 240


def assert_every_transaction_accounted_for(summary: Path) -> dict:
    counts = orjson.loads(summary.read_bytes())["counts"]
    assert counts["planned"] == TPS * DURATION_S
    assert (counts["committed"] + counts["rejected_total"] + counts["lost"] + counts["failed"]
            + counts["unsent"]) == counts["planned"] == counts["accounted"]
    assert counts["committed"] > 0
    return counts


def project_env(engine: Engine, tmp_path: Path) -> dict[str, str]:
    (tmp_path / "devnet").mkdir()
    (tmp_path / "runs").mkdir()
    return {**os.environ, **engine.env, "QMEMO_DEVNET": str(tmp_path / "devnet"), "QMEMO_RUNS": str(tmp_path / "runs"),
            "QMEMO_TPS": str(TPS), "QMEMO_DURATION_S": str(DURATION_S)}


def compose(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker-compose", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def wait_for_container(engine: Engine, container: str) -> int:
    done = engine.docker("wait", container, timeout=RUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.strip())


def test_the_image_builds_from_debian_packages_and_runs_qmemo(engine: Engine, image: dict) -> None:
    assert image["tag"] == "qmemo:local" and image["content_tag"].startswith("qmemo:ctx-")
    assert image["size_bytes"] > 0 and f"{image['size_bytes'] // 1_000_000} MB" in image["output"]
    assert image["base"] == "debian:bookworm-slim" or image["base"].startswith("qmemo-base:bookworm-")
    # liboqs and our native libraries load inside: a devnet's keys are made with them.
    made = engine.docker("run", "--rm", "qmemo:local", "genesis", "--out", "/tmp/d", "--validators", "1",
                         "--accounts", "2", timeout=120)
    assert made.returncode == 0, made.stderr
    assert "1 Falcon-512 validators" in made.stdout


def test_a_second_build_of_the_same_checkout_is_found_by_its_content_tag(engine: Engine, image: dict) -> None:
    again = subprocess.run(["bash", str(REPO_ROOT / "scripts" / "image.sh")], capture_output=True, text=True,
                           timeout=300, env={**os.environ, **engine.env})
    assert again.returncode == 0, again.stderr
    record = json.loads((REPO_ROOT / ".deps" / "image" / "last-build.json").read_text())
    assert record["how"].startswith("cached") and record["content_tag"] == image["content_tag"]


@pytest.fixture(scope="module")
def compose_runs(engine: Engine, image: dict, tmp_path_factory) -> dict[str, Path]:
    """deploy/compose.yaml and a project rendered by `qmemo scenario compose lan-baseline`,
    up at the same time (their networks differ), each until its generator exits, then
    down; {project: its generator's summary.json}."""
    deploy_dir = tmp_path_factory.mktemp("deploy")
    rendered_dir = tmp_path_factory.mktemp("rendered") / "project"
    rendered = subprocess.run([str(VENV_BIN / "qmemo"), "scenario", "compose", "lan-baseline", "--out", str(rendered_dir),
                               "--set", "chain.accounts=300", "--set", f"load.tps={TPS}",
                               "--set", f"load.duration_s={DURATION_S}"],
                              cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert rendered.returncode == 0, rendered.stderr
    projects = {
        # (folder of the compose file, arguments before the command, environment, services to start)
        "deploy": (REPO_ROOT / "deploy", ["-p", f"qmemotest{os.getpid()}"], project_env(engine, deploy_dir), []),
        # Prometheus's image needs a registry: the other services are named.
        "rendered": (rendered_dir, [], {**os.environ, **engine.env}, ["genesis", "node-0", "node-1", "node-2", "gen"]),
    }
    summaries = {"deploy": deploy_dir / "runs" / "gen" / "summary.json",
                 "rendered": rendered_dir / "runs" / "gen" / "summary.json"}
    try:
        for folder, name, env, services in projects.values():
            up = compose([*name, "up", "-d", *services], env, folder)
            assert up.returncode == 0, up.stderr
        for project, (folder, name, env, _) in projects.items():
            status = wait_for_container(engine, compose([*name, "ps", "-q", "gen"], env, folder).stdout.strip())
            assert status == 0, f"{project}: " + compose([*name, "logs", "--no-color", "gen"], env, folder).stdout
        return summaries
    finally:
        for folder, name, env, _ in projects.values():
            down = compose([*name, "down", "-v"], env, folder)
            assert down.returncode == 0, down.stderr


def test_the_compose_devnet_accounts_for_every_transaction(compose_runs: dict[str, Path]) -> None:
    assert_every_transaction_accounted_for(compose_runs["deploy"])


def test_a_rendered_scenario_project_accounts_for_every_transaction_under_compose(
        compose_runs: dict[str, Path]) -> None:
    assert_every_transaction_accounted_for(compose_runs["rendered"])


def _swarm_state(engine: Engine) -> str:
    return engine.docker("info", "--format", "{{.Swarm.LocalNodeState}}").stdout.strip()


def _wait_gone(engine: Engine, stack: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if not engine.docker("ps", "-aq", "--filter", f"label=com.docker.stack.namespace={stack}").stdout.strip() and \
           not engine.docker("network", "ls", "-q", "--filter", f"name={stack}_default").stdout.strip():
            return
        time.sleep(0.2)


def test_the_swarm_stack_accounts_for_every_transaction(engine: Engine, image: dict, tmp_path: Path) -> None:
    env = project_env(engine, tmp_path)
    stack = f"qmemotest{os.getpid()}"
    joined = _swarm_state(engine) != "active"
    if joined:
        init = engine.docker("swarm", "init", "--advertise-addr", "127.0.0.1", "--default-addr-pool", SWARM_POOL)
        assert init.returncode == 0, init.stderr
    try:
        node = engine.docker("node", "ls", "-q").stdout.split()[0]
        labels = [arg for i in range(3) for arg in ("--label-add", f"qmemo-node-{i}=true")]
        assert engine.docker("node", "update", *labels, node).returncode == 0
        deploy = subprocess.run(["docker", "stack", "deploy", "-c", str(REPO_ROOT / "deploy" / "compose.yaml"), stack],
                                env=env, capture_output=True, text=True, timeout=120)
        assert deploy.returncode == 0, deploy.stderr
        deadline, state = time.monotonic() + RUN_TIMEOUT_S, ""
        while time.monotonic() < deadline:
            state = engine.docker("service", "ps", f"{stack}_gen", "--format", "{{.CurrentState}}").stdout
            if state.startswith(("Complete", "Failed", "Rejected", "Shutdown")):
                break
            time.sleep(0.5)
        logs = engine.docker("service", "logs", "--raw", f"{stack}_gen").stdout
        assert state.startswith("Complete"), f"gen: {state!r}\n{logs}"
        assert_every_transaction_accounted_for(tmp_path / "runs" / "gen" / "summary.json")
    finally:
        engine.docker("stack", "rm", stack)
        _wait_gone(engine, stack)
        engine.docker("volume", "rm", *(f"{stack}_node-{i}-data" for i in range(3)))
        if joined:
            engine.docker("swarm", "leave", "--force")


def test_a_namespaced_scenario_passes_while_dockerd_runs(engine: Engine, namespaces: None, tmp_path: Path) -> None:
    """dockerd's FORWARD policy DROP would cut the runner's bridge: its own rule lets it through, and goes."""
    # dockerd sets the policy DROP only when it turns forwarding on itself; on a host that
    # had it on already the test sets what such a dockerd would have set, and puts it back.
    policy = subprocess.run(["iptables", "-S", "FORWARD"], capture_output=True, text=True, timeout=30).stdout
    was = "DROP" if "-P FORWARD DROP" in policy.splitlines() else "ACCEPT"
    subprocess.run(["iptables", "-P", "FORWARD", "DROP"], check=True, timeout=30)
    try:
        _a_scenario_passes_across_the_drop(tmp_path)
    finally:
        subprocess.run(["iptables", "-P", "FORWARD", was], check=True, timeout=30)


def _a_scenario_passes_across_the_drop(tmp_path: Path) -> None:
    out = tmp_path / "run"
    process = subprocess.Popen([str(VENV_BIN / "qmemo"), "scenario", "run", "lan-baseline", "--out", str(out),
                                "--set", "chain.accounts=300", "--set", "invariants.settle_s=20",
                                "--set", "load.duration_s=10"],
                               cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    rule = f"-A FORWARD -i qms{process.pid}br -o qms{process.pid}br -j ACCEPT"
    seen = False
    deadline = time.monotonic() + 150
    while process.poll() is None and time.monotonic() < deadline:
        seen = seen or rule in subprocess.run(["iptables-save", "-t", "filter"], capture_output=True,
                                              text=True, timeout=30).stdout
        time.sleep(0.2)
    if process.poll() is None:
        process.terminate()
    output, _ = process.communicate(timeout=60)
    assert process.returncode == 0, output
    assert seen, "the runner's FORWARD rule was never in place"
    assert read(out).passed
    assert leftovers(process.pid) == []       # namespaces, links, any iptables rule naming them: gone
