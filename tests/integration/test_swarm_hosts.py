"""A sharded devnet on a Docker Swarm of three hosts: three engines, each in a network namespace of its own.

The hosts (tests/integration/swarm.py): a manager and two workers on a bridge between
their namespaces, the image from the container tests' build (the `image` fixture, one
build per checkout) saved once and loaded into each engine. The stack is what `qmemo
deploy render` writes for 2 shards x 3 validators, placement `spread` (a shard's three
validators on three hosts, node i on host i mod 3). Two loads on the one chain, each the generator's own run
folder on the manager, gathered with `qmemo deploy collect`:

    clean   every transaction accounted for and committed, every cross-shard transfer
            credited once, supply conserved; `qmemo report --devnet` reads the folder
    kill    host 1 may stand in for host 2 (label qmemo.host-2 added), then host 2's engine
            and its containers are SIGKILLed mid-load: Swarm marks it down and starts its
            validators on host 1 (new volumes: they sync), every transaction is still
            accounted for, nothing final is lost, the invariants hold

Everything started is stopped; the root namespace is checked to be as it was. A SIGTERM
to pytest takes Ctrl-C's path, so the teardown still runs; what a run killed outright
leaves, the next one's start sweeps (swarm.sweep_stale_roots).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from qmemo.analysis.markdown import num
from qmemo.deploy.stack import host_label
from qmemo.interrupts import deferred, interrupt_on_signals
from tests.conftest import REPO_ROOT, VENV_BIN
from tests.integration.engine import Engine
from tests.integration.conftest import unavailable
from tests.integration.swarm import SYSTEM_CONTAINERD, Swarm, sweep_stale_roots

pytestmark = pytest.mark.slow

STACK = "qmemoswarm"
# 2 x 3 in the suite; QMEMO_SWARM_SHARDS=4 runs the same test on 4 shards x 3 (docs/scenarios.md).
SHARDS, PER_SHARD = int(os.environ.get("QMEMO_SWARM_SHARDS", "2")), 3
TPS, DURATION_S = 60, 15
KILLED, STAND_IN = 2, 1          # the worker whose engine dies, the one that may take its nodes
KILL_AT_S = 5.0                  # into the second load
RUN_TIMEOUT_S = 240
C_BASELINE = REPO_ROOT / "tests" / "fixtures" / "c-baseline-quick"


@pytest.fixture(scope="module")
def image_archive(engine: Engine, image: dict, tmp_path_factory) -> Path:
    archive = tmp_path_factory.mktemp("image") / "qmemo.tar"
    saved = engine.docker("save", "-o", str(archive), "qmemo:local", timeout=600)
    assert saved.returncode == 0, saved.stderr
    return archive


@pytest.fixture(scope="module")
def swarm(image_archive: Path, namespaces: None, tmp_path_factory) -> Iterator[Swarm]:
    if SYSTEM_CONTAINERD.exists():
        unavailable(f"a system containerd runs ({SYSTEM_CONTAINERD}): the three engines would share it")
    hosts = Swarm(tmp_path_factory.mktemp("swarm-logs"))
    # The engines run in sessions of their own: a SIGTERM to pytest would end it and leave
    # them (and their containers) running. As Ctrl-C, it runs the teardown below.
    restore_signals = interrupt_on_signals()
    started = time.monotonic()
    try:
        hosts.start()
        hosts.timings = {"swarm_s": time.monotonic() - started,
                         "image_load_s": hosts.load_image(image_archive, "qmemo:local")}
        yield hosts
    finally:
        try:
            with deferred():      # a signal now is acted on once everything is stopped
                problems = hosts.close(STACK)
        finally:
            restore_signals()
        assert problems == [], f"the swarm did not go cleanly: {problems}"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("stack")
    done = subprocess.run([str(VENV_BIN / "qmemo"), "deploy", "render", "lan-baseline", "--out", str(out),
                           "--shards", str(SHARDS), "--per-shard", str(PER_SHARD), "--verify-threads", "1",
                           "--set", "chain.accounts=300", "--set", "chain.block_interval_ms=1000",
                           "--set", f"load.tps={TPS}", "--set", f"load.duration_s={DURATION_S}",
                           "--set", "load.cross_shard_pct=20"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return out


def deploy(swarm: Swarm, rendered: Path, run: str) -> None:
    env = {**os.environ, **swarm.manager_env, "QMEMO_RUN": run}
    # --resolve-image never: the image is each engine's own, no registry has it to pin a digest.
    done = subprocess.run(["docker", "stack", "deploy", "--resolve-image", "never", "-c", str(rendered / "stack.yaml"),
                           STACK], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def collect(swarm: Swarm, rendered: Path, run: str) -> Path:
    done = subprocess.run([str(VENV_BIN / "qmemo"), "deploy", "collect", str(rendered), "--stack", STACK,
                           "--run", run, "--wait", str(RUN_TIMEOUT_S)],
                          env={**os.environ, **swarm.manager_env}, capture_output=True, text=True,
                          timeout=RUN_TIMEOUT_S + 120)
    run_dir = rendered / "runs" / run
    assert done.returncode == 0, done.stdout + done.stderr + _tail(run_dir / "logs" / "gen.log")
    return run_dir


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n" + "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def tasks(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "tasks.jsonl").read_text().splitlines() if line]


def running_on(run_dir: Path) -> dict[str, set[str]]:
    """service (short name) -> the hosts (names) its running tasks are on."""
    out: dict[str, set[str]] = {}
    for task in tasks(run_dir):
        if task["DesiredState"] == "Running" and task["CurrentState"].startswith("Running"):
            out.setdefault(task["Name"].split(".")[0].removeprefix(f"{STACK}_"), set()).add(task["Node"])
    return out


def assert_invariants(summary: dict) -> None:
    counts, cross, invariants = summary["counts"], summary["cross_shard"], summary["invariants"]
    assert counts["planned"] == TPS * DURATION_S == counts["accounted"]
    assert (counts["committed"] + counts["rejected_total"] + counts["lost"] + counts["failed"]
            + counts["unsent"]) == counts["planned"]
    assert cross["committed"] == cross["credited"] and cross["lost"] == 0     # credited, each once
    assert invariants["supply_conserved"] and invariants["credited_exactly_once"], invariants
    assert invariants["settled"] and invariants["accounts_off"] == 0 and invariants["not_credited"] == 0


@pytest.fixture(scope="module")
def clean_run(swarm: Swarm, rendered: Path) -> Path:
    deploy(swarm, rendered, "clean")
    return collect(swarm, rendered, "clean")


def test_a_shards_validators_run_on_three_hosts(swarm: Swarm, clean_run: Path) -> None:
    print(f"swarm: {swarm.timings}; swept at start: {swarm.swept}")   # docs/scenarios.md's figures (pytest -s)
    hosts = {swarm.hostname(h): h for h in range(3)}
    placed = {service: {hosts[node] for node in nodes} for service, nodes in running_on(clean_run).items()}
    for shard in range(SHARDS):
        members = [shard * PER_SHARD + j for j in range(PER_SHARD)]
        assert [placed[f"node-{i}"] for i in members] == [{i % 3} for i in members], placed   # spread: i mod 3
        assert len({h for i in members for h in placed[f"node-{i}"]}) == PER_SHARD        # each on a host of its own
    assert (clean_run / "logs" / "node-0.log").stat().st_size > 0   # a node's log, from its host, on the manager


def test_the_swarm_run_accounts_for_every_transaction_and_credit(clean_run: Path) -> None:
    summary = orjson.loads((clean_run / "gen" / "summary.json").read_bytes())
    assert_invariants(summary)
    assert summary["counts"]["committed"] == TPS * DURATION_S
    print(f"clean: counts {summary['counts']}; cross-shard {summary['cross_shard']}")
    assert len(summary["shards"]) == SHARDS
    stages = orjson.loads((clean_run / "gen" / "node-stages.json").read_bytes())
    assert len(stages["nodes"]) == SHARDS * PER_SHARD                # every node's costs, from every host


def test_the_report_reads_the_swarm_run_folder_unchanged(clean_run: Path, tmp_path: Path) -> None:
    # The fixtures' C baseline: a fresh clone has no results/latest of its own.
    done = subprocess.run([str(VENV_BIN / "qmemo"), "report", "--results", str(C_BASELINE), "--devnet", str(clean_run),
                           "--out", str(tmp_path)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    report = (tmp_path / "REPORT.md").read_text()
    cross = orjson.loads((clean_run / "gen" / "summary.json").read_bytes())["cross_shard"]
    # Lines only the sharded section writes (qmemo/analysis/report_shards.py), with this run's figures.
    assert (f"Cross-shard: {num(cross['planned'])} planned, {num(cross['committed'])} debited, "
            f"{num(cross['credited'])} credited, 0 lost") in report
    assert "Invariants from every shard's final state: supply conserved **yes**" in report
    assert "credited exactly once **yes** (0 debited without a credit, 0 accounts off)" in report


def test_a_killed_workers_nodes_move_where_placement_allows_and_nothing_final_is_lost(
        swarm: Swarm, rendered: Path, clean_run: Path) -> None:
    stand_in, killed = swarm.hostname(STAND_IN), swarm.hostname(KILLED)
    assert swarm.docker(0, "node", "update", "--label-add", f"{host_label(KILLED)}=true",
                        swarm.node_id(STAND_IN)).returncode == 0
    deploy(swarm, rendered, "kill")
    # The load's zero from the generator's first live status, as the scenario runner takes
    # it; the kill is then due at KILL_AT_S on that clock.
    live = rendered / "runs" / "kill" / "gen" / "live.json"
    deadline, started_at = time.monotonic() + RUN_TIMEOUT_S, None
    while started_at is None and time.monotonic() < deadline:
        try:
            started_at = time.monotonic() - float(orjson.loads(live.read_bytes())["elapsed_s"])
        except (OSError, ValueError, KeyError):
            time.sleep(0.1)
    assert started_at is not None, "the second load did not start"
    time.sleep(max(0.0, started_at + KILL_AT_S - time.monotonic()))
    swarm.kill(KILLED)
    killed_at = time.time()
    moving = [f"node-{i}" for i in range(SHARDS * PER_SHARD) if i % 3 == KILLED]
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while time.monotonic() < deadline and any(swarm.running(f"{STACK}_{name}") != {stand_in} for name in moving):
        time.sleep(0.5)        # Swarm's heartbeat notices the host is gone, then starts its tasks elsewhere
    run_dir = collect(swarm, rendered, "kill")
    nodes = {n["Hostname"]: n["Status"] for n in map(json.loads, (run_dir / "nodes.jsonl").read_text().splitlines())}
    assert nodes[killed] == "Down"
    moved = running_on(run_dir)
    for i in range(SHARDS * PER_SHARD):       # spread: node i on host i mod 3
        assert killed not in moved[f"node-{i}"], moved
        if i % 3 == KILLED:
            assert moved[f"node-{i}"] == {stand_in}, moved
    summary = orjson.loads((run_dir / "gen" / "summary.json").read_bytes())
    assert_invariants(summary)
    assert summary["counts"]["committed"] > 0
    print(f"host {KILLED} killed at {time.strftime('%H:%M:%S', time.gmtime(killed_at))} UTC; "
          f"counts {summary['counts']}; cross-shard {summary['cross_shard']}")


def test_the_swarms_cleanup_goes_on_past_a_step_that_fails(tmp_path: Path) -> None:
    class Stuck:                  # an engine whose every docker call, and whose stop, times out
        roots = ()
        process = None

        def docker(self, *args: str, timeout: float = 0) -> None:
            raise subprocess.TimeoutExpired(["docker", *args], timeout)

        def stop(self) -> list[str]:
            raise subprocess.TimeoutExpired(["dockerd"], 30)

    hosts = Swarm(tmp_path / "logs")
    hosts.root = tmp_path / "root"
    hosts.root.mkdir()
    hosts.engines = [Stuck(), Stuck()]
    problems = hosts.close(STACK)
    assert [line.split(":")[0] for line in problems] == [
        f"stack rm {STACK}", "host 1", "host 0", "host 0", "host 1"], problems   # each step, tried and said
    assert not hosts.root.exists() and hosts.hosts.closed                   # the later steps ran
    assert hosts.close(STACK) == []                                         # and once only


def test_the_sweep_kills_and_deletes_only_what_names_a_dead_runs_folder(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale, live = tmp_path / str(dead.pid), tmp_path / str(os.getpid())
    sibling = tmp_path / f"{dead.pid}-not-a-run"          # the stale folder's name is a prefix of its name
    for folder in (stale, live, sibling):
        (folder / "h0" / "exec").mkdir(parents=True)
    # $0 names the folder, as a dockerd's --exec-root or a shim's -address does.
    left = [subprocess.Popen(["sh", "-c", "sleep 60", str(folder / "h0" / "exec")])
            for folder in (stale, live, sibling)]
    try:
        assert sweep_stale_roots(tmp_path) == [f"{stale} (1 process(es) killed)"]
        assert left[0].wait(timeout=10) == -9 and not stale.exists()
        assert left[1].poll() is None and left[2].poll() is None and live.exists() and sibling.exists()
    finally:
        for process in left:
            process.kill()
            process.wait()
