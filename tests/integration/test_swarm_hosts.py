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
            accounted for, nothing final is lost, the invariants hold, what is lost is
            lost for a reason the kill gives and no more than can have been in flight
            to host 2 (KILL_LOST_REASONS, MAX_LOST); then each moved
            validator answers and holds its shard's chain: the survivors' block at their
            final height, the same hash (waited for, CATCH_UP_S at most)

The stack is rendered with a config limit below its genesis (--config-limit-bytes), so
the genesis travels gzipped and each node unzips it, as a chain of over 3,400 accounts
does; each host's veth is shaped to a rate (swarm.LINK_TBF), printed with the results.

Everything started is stopped; after the swarm's close the fixture checks that nothing
of the run is left (swarm.leftovers) and that the root namespace is as it was. A SIGTERM
to pytest takes Ctrl-C's path, so the teardown still runs; what a run killed outright
leaves, the next one's start sweeps (swarm.sweep_stale_roots).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from qmemo.analysis.markdown import num
from qmemo.deploy.collect import read_service_log
from qmemo.deploy.files import genesis_hash
from qmemo.deploy.stack import host_label
from qmemo.interrupts import deferred, interrupt_on_signals
from tests.conftest import REPO_ROOT, VENV_BIN
from tests.integration.engine import Engine, HostState
from tests.integration.conftest import unavailable
from tests.integration.swarm import SYSTEM_CONTAINERD, Swarm, leftovers, sweep_stale_roots, sweep_stale_rules

pytestmark = pytest.mark.slow

STACK = "qmemoswarm"
# 2 x 3 in the suite; QMEMO_SWARM_SHARDS=4 runs the same test on 4 shards x 3 (docs/scenarios.md).
SHARDS, PER_SHARD = int(os.environ.get("QMEMO_SWARM_SHARDS", "2")), 3
TPS, DURATION_S = 60, 15
BLOCK_INTERVAL_MS = 1000
KILLED, STAND_IN = 2, 1          # the worker whose engine dies, the one that may take its nodes
KILL_AT_S = 5.0                  # into the second load
RUN_TIMEOUT_S = 240
CATCH_UP_S = 120                 # a moved validator syncs about a minute of blocks from genesis
# Below this genesis (300 accounts: 55 KB on 2 x 3, 67 KB on 4 x 3; 19 and 25 KB gzipped): it travels gzipped.
CONFIG_LIMIT_BYTES = 32 * 1024
C_BASELINE = REPO_ROOT / "tests" / "fixtures" / "c-baseline-quick"
# Why a transaction of the kill run may be lost (summary.json counts.lost_reasons, as
# qmemo.load.follower.lost_reasons names them; docs/scenarios.md, "Several hosts"): it
# was accepted only by a node on the killed host and went with its mempool ("unknown to
# every node"), or it waited behind such a one's nonce until its hold ran out. Anything
# else - pending, held or not final at the end, final on a node, not asked - is a stall
# or a fork, not the kill.
KILL_LOST_REASONS = {"unknown to every node", "evicted: nonce_gap_timeout"}
# The most the kill may cost: what can have been in flight to the killed host's nodes.
# The host runs one of each shard's three validators and takes about a third of the load;
# they relay what they accept at once and a block is final an interval or two after it is
# made, so only what reached them in the last two intervals before they died (about 40
# at 60 TPS) can have been nowhere else, and each of those holds back its sender's later
# nonces until evicted (300 accounts at 60 TPS: one per sender every 5 s, two more in the
# 10 s left): about 120 at most. Three intervals of the whole load (180 of 900) is above
# that and far below a loss of what followed the kill (600) or of a shard that stopped
# making blocks final. The runs in docs/scenarios.md lost 0 to 7.
MAX_LOST = TPS * 3 * BLOCK_INTERVAL_MS // 1000


@pytest.fixture(scope="module")
def image_archive(engine: Engine, image: dict, tmp_path_factory) -> Iterator[Path]:
    """The image as a `docker save` archive (about 380 MB), deleted after the engines loaded
    it (swarm) and in any case at the module's end: pytest keeps its tmp folders."""
    archive = tmp_path_factory.mktemp("image") / "qmemo.tar"
    try:
        saved = engine.docker("save", "-o", str(archive), "qmemo:local", timeout=600)
        assert saved.returncode == 0, saved.stderr
        yield archive
    finally:
        archive.unlink(missing_ok=True)


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
        try:
            hosts.timings = {"swarm_s": time.monotonic() - started,
                             "image_load_s": hosts.load_image(image_archive, "qmemo:local")}
        finally:
            image_archive.unlink(missing_ok=True)    # every engine has the image now (or the start failed)
        yield hosts
    finally:
        try:
            with deferred():      # a signal now is acted on once everything is stopped
                problems = hosts.close(STACK)
        finally:
            restore_signals()
        assert problems == [], f"the swarm did not go cleanly: {problems}"
        # What close() promises, looked at from outside: nothing of this run is left (no
        # namespace, link or iptables rule naming it, no process naming its root folder),
        # and the root namespace's iptables, sysctls and links are as they were.
        assert leftovers(hosts.hosts.pid, hosts.root) == []
        if hosts.host_state is not None:
            assert hosts.host_state.differences(HostState.read()) == []


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("stack")
    done = subprocess.run([str(VENV_BIN / "qmemo"), "deploy", "render", "lan-baseline", "--out", str(out),
                           "--shards", str(SHARDS), "--per-shard", str(PER_SHARD), "--verify-threads", "1",
                           "--drop-thresholds", "--config-limit-bytes", str(CONFIG_LIMIT_BYTES),
                           "--set", "chain.accounts=300", "--set", f"chain.block_interval_ms={BLOCK_INTERVAL_MS}",
                           "--set", f"load.tps={TPS}", "--set", f"load.duration_s={DURATION_S}",
                           "--set", "load.cross_shard_pct=20"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (out / "devnet" / "genesis.json.gz").is_file()       # the carrier, not genesis.json itself
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
    assert counts["planned"] == TPS * DURATION_S == counts["accounted"]     # accounted: the outcomes' sum
    assert cross["committed"] == cross["credited"] and cross["lost"] == 0     # credited, each once
    assert invariants["supply_conserved"] and invariants["credited_exactly_once"], invariants
    assert invariants["settled"] and invariants["accounts_off"] == 0 and invariants["not_credited"] == 0


def accounting_row(run: str, summary: dict) -> str:
    """The run's accounting as docs/scenarios.md's table has it (header, row), for `pytest -s`."""
    counts, cross, invariants = summary["counts"], summary["cross_shard"], summary["invariants"]
    committed = summary.get("latency_ms", {}).get("intended_to_committed", {}).get("percentiles_ms", {})

    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value:,.0f}"

    held = [name for name, ok in (("supply conserved", invariants["supply_conserved"]),
                                  ("credited exactly once", invariants["credited_exactly_once"]),
                                  ("settled", invariants["settled"])) if ok]
    return ("| run | planned | committed | lost | accounted | cross-shard debited / credited "
            "| intended->committed p50 / p99 ms | intended->credited p50 / p99 ms | invariants |\n"
            f"| {SHARDS} x {PER_SHARD}, {run} | {counts['planned']} | {counts['committed']} | {counts['lost']} "
            f"| {counts['accounted']} | {cross['committed']} / {cross['credited']} "
            f"| {ms(committed.get('p50'))} / {ms(committed.get('p99'))} "
            f"| {ms(cross.get('p50_ms_intended_to_credited'))} / {ms(cross.get('p99_ms_intended_to_credited'))} "
            f"| {', '.join(held)}, {invariants['accounts_off']} accounts off |")


@pytest.fixture(scope="module")
def clean_run(swarm: Swarm, rendered: Path) -> Path:
    deploy(swarm, rendered, "clean")
    return collect(swarm, rendered, "clean")


def test_a_shards_validators_run_on_three_hosts(swarm: Swarm, clean_run: Path) -> None:
    print(f"swarm: {swarm.timings}; swept at start: {swarm.swept}")   # docs/scenarios.md's figures (pytest -s)
    print(f"links: {swarm.link_profile}")
    hosts = {swarm.hostname(h): h for h in range(3)}
    placed = {service: {hosts[node] for node in nodes} for service, nodes in running_on(clean_run).items()}
    for shard in range(SHARDS):
        members = [shard * PER_SHARD + j for j in range(PER_SHARD)]
        assert [placed[f"node-{i}"] for i in members] == [{i % 3} for i in members], placed   # spread: i mod 3
        assert len({h for i in members for h in placed[f"node-{i}"]}) == PER_SHARD        # each on a host of its own
    # A node's log, from its host, on the manager: each line names its task and that host.
    node_log = read_service_log((clean_run / "logs" / "node-0.log").read_text(errors="replace").splitlines())
    assert node_log and {line.host for line in node_log} == {swarm.hostname(0)}, node_log[:3]
    assert {line.service for line in node_log} == {f"{STACK}_node-0"} and all(line.task for line in node_log)
    # The generator on the manager labelled qmemo.results (the folder's host); the nodes'
    # volumes named with the chain's genesis hash.
    assert {task["Node"] for task in tasks(clean_run) if task["Name"].startswith(f"{STACK}_gen.")} == {
        swarm.hostname(0)}
    volumes = swarm.docker(0, "volume", "ls", "--format", "{{.Name}}").stdout.split()
    assert f"{STACK}_node-0-data-{genesis_hash(clean_run.parent.parent / 'devnet')}" in volumes, volumes
    stack = (clean_run.parent.parent / "stack.yaml").read_text()
    assert '"genesis-' in stack and '.gz"' in stack and "gunzip -c /devnet/genesis.json.gz" in stack


def test_each_hosts_link_is_rate_limited_both_ways(swarm: Swarm, clean_run: Path) -> None:
    assert swarm.link_profile.startswith("tc tbf rate 100mbit"), swarm.link_profile
    for h in range(3):
        qdiscs = swarm.link_qdiscs(h)
        print(f"host {h}'s veth: {qdiscs}")
        assert len(qdiscs) == 2 and all("qdisc tbf" in line and "rate 100Mbit" in line for line in qdiscs), qdiscs
        assert all(" Sent 0 bytes" not in f" {line}" for line in qdiscs), qdiscs     # the run's traffic went through


def test_the_swarm_run_accounts_for_every_transaction_and_credit(clean_run: Path) -> None:
    summary = orjson.loads((clean_run / "gen" / "summary.json").read_bytes())
    assert_invariants(summary)
    assert summary["counts"]["committed"] == TPS * DURATION_S
    print(f"clean: counts {summary['counts']}; cross-shard {summary['cross_shard']}")
    print(accounting_row("clean", summary))
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
    counts = summary["counts"]
    # Every lost one for a reason the kill gives, each counted (the reasons add up to
    # `lost`), and no more of the load uncommitted - lost, failed, refused or unsent -
    # than can have been in flight to the killed host (MAX_LOST).
    reasons = counts.get("lost_reasons") or {}
    assert set(reasons) <= KILL_LOST_REASONS and sum(reasons.values()) == counts["lost"], counts
    assert counts["planned"] - counts["committed"] <= MAX_LOST, counts
    print(f"host {KILLED} killed at {time.strftime('%H:%M:%S', time.gmtime(killed_at))} UTC; "
          f"counts {summary['counts']}; cross-shard {summary['cross_shard']}")
    print(accounting_row(f"host {KILLED}'s engine killed {KILL_AT_S:g} s into the load", summary))
    for line in moved_validators_catch_up(swarm, [int(name.split("-")[1]) for name in moving], killed_at):
        print(f"moved: {line}")


def status_url(i: int) -> str:
    return f"http://node-{i}:8000/status"


def moved_validators_catch_up(swarm: Swarm, moved: list[int], killed_at: float,
                              timeout_s: float = CATCH_UP_S) -> list[str]:
    """Wait (CATCH_UP_S at most) until every moved validator answers and has its shard's
    survivors' block at their final height, hash for hash; a line per validator saying
    so. Asked from node-0's task on the manager, over the overlay: the names resolve to
    wherever Swarm runs each node now."""
    deadline, done = time.monotonic() + timeout_s, {}
    last: dict[int, str] = {i: "not asked yet" for i in moved}
    while len(done) < len(moved) and time.monotonic() < deadline:
        for i in [i for i in moved if i not in done]:
            shard = i // PER_SHARD
            survivors = [j for j in range(shard * PER_SHARD, (shard + 1) * PER_SHARD) if j % 3 != KILLED]
            statuses = swarm.ask(0, f"{STACK}_node-0", [status_url(j) for j in [*survivors, i]])
            mine = statuses[status_url(i)]
            theirs = [statuses[status_url(j)] for j in survivors]
            if any("error" in status for status in [mine, *theirs]):
                last[i] = "; ".join(f"{url}: {status['error']}" for url, status in statuses.items()
                                    if "error" in status)
                continue
            assert all(s["genesis_hash"] == mine["genesis_hash"] for s in theirs), (i, statuses)
            final = min(s["final_height"] for s in theirs)
            if mine["height"] < final:
                last[i] = f"at height {mine['height']}, its survivors final at {final}"
                continue
            blocks = swarm.ask(0, f"{STACK}_node-0",
                               [f"http://node-{j}:8000/block/{final}?txs=none" for j in [*survivors, i]])
            hashes = {url.split("/")[2].split(":")[0]: block.get("hash", block.get("error"))
                      for url, block in blocks.items()}
            survivor_hashes = {hashes[f"node-{j}"] for j in survivors}
            assert len(survivor_hashes) == 1, f"shard {shard}'s survivors disagree at final height {final}: {hashes}"
            if hashes[f"node-{i}"] in survivor_hashes:
                done[i] = (f"node-{i} (shard {shard}) on {swarm.hostname(STAND_IN)}: block {final} "
                           f"{hashes[f'node-{i}'][:16]}... as {', '.join(f'node-{j}' for j in survivors)} have it "
                           f"(their final height); its height {mine['height']}, final {mine['final_height']}; "
                           f"{time.time() - killed_at:.0f} s after the kill")
            elif mine["final_height"] >= final:
                raise AssertionError(f"node-{i} made another block {final} final than its shard's survivors: {hashes}")
            else:
                last[i] = f"block {final} differs from the survivors' ({hashes}), not final on it yet"
        if len(done) < len(moved):
            time.sleep(1.0)
    missing = {f"node-{i}": last[i] for i in moved if i not in done}
    assert not missing, f"moved validators not caught up within {timeout_s:g} s: {missing}"
    return [done[i] for i in moved]


class ChainsAsked:
    """A swarm whose nodes answer from a table: node -> (height, final height, {height: hash})."""

    def __init__(self, chains: dict[int, tuple[int, int, dict[int, str]]]) -> None:
        self.chains = chains

    def hostname(self, h: int) -> str:
        return f"qmemo-host-{h}"

    def ask(self, h: int, service: str, urls: list[str]) -> dict[str, dict]:
        answers = {}
        for url in urls:
            node = int(url.split("/")[2].split(":")[0].removeprefix("node-"))
            if node not in self.chains:
                answers[url] = {"error": "URLError: no such host"}
                continue
            height, final, hashes = self.chains[node]
            if url.endswith("/status"):
                answers[url] = {"genesis_hash": "g", "height": height, "final_height": final}
            else:
                answers[url] = {"hash": hashes[int(url.split("/block/")[1].split("?")[0])]}
        return answers


def test_the_moved_validators_check_passes_only_on_the_survivors_final_block() -> None:
    survivors = {0: (12, 10, {10: "a" * 64}), 1: (12, 10, {10: "a" * 64})}
    caught_up = ChainsAsked({**survivors, 2: (11, 9, {10: "a" * 64})})
    assert moved_validators_catch_up(caught_up, [2], time.time(), timeout_s=1)[0].startswith(
        "node-2 (shard 0) on qmemo-host-1: block 10 aaaaaaaaaaaaaaaa... as node-0, node-1 have it")
    with pytest.raises(AssertionError, match="not caught up within 0.5 s: {'node-2': 'at height 3"):
        moved_validators_catch_up(ChainsAsked({**survivors, 2: (3, 1, {})}), [2], time.time(), timeout_s=0.5)
    with pytest.raises(AssertionError, match="not caught up .* no such host"):       # it never answers
        moved_validators_catch_up(ChainsAsked(survivors), [2], time.time(), timeout_s=0.5)
    with pytest.raises(AssertionError, match="made another block 10 final"):
        moved_validators_catch_up(ChainsAsked({**survivors, 2: (12, 10, {10: "b" * 64})}), [2], time.time())


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
    # An argument names the folder, as a dockerd's --exec-root or a shim's -address does. One
    # process that never forks: a shell's child carries the shell's arguments until its exec,
    # and a sweep that came in between would rightly count two.
    left = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", str(folder / "h0" / "exec")])
            for folder in (stale, live, sibling)]
    try:
        assert sweep_stale_roots(tmp_path) == [f"{stale} (1 process(es) killed)"]
        assert left[0].wait(timeout=10) == -9 and not stale.exists()
        assert left[1].poll() is None and left[2].poll() is None and live.exists() and sibling.exists()
        # The teardown's check finds a process by the folder its command line names, and only so.
        assert [line.split(":")[0] for line in leftovers(dead.pid, live)] == [f"process {left[1].pid}"]
    finally:
        for process in left:
            process.kill()
            process.wait()


def _has_table(table: str) -> bool:
    saved = subprocess.run(["iptables-save", "-t", table], capture_output=True, text=True, timeout=30)
    return saved.returncode == 0 and f"*{table}" in saved.stdout


def test_the_sweep_deletes_what_a_dead_run_left_in_the_root_namespaces_iptables() -> None:
    if os.geteuid() != 0 or shutil.which("iptables-save") is None or not _has_table("filter"):
        pytest.skip("needs root and an iptables filter table already there (adding one would change the host)")
    dead = subprocess.Popen(["true"])
    dead.wait()
    live = os.getpid()
    # What a SIGKILLed run leaves: its bridge's FORWARD rule, and a rule naming one of its hosts' veths.
    left = [("filter", ["FORWARD", "-i", f"qms{dead.pid}br", "-o", f"qms{dead.pid}br", "-j", "ACCEPT"]),
            ("filter", ["FORWARD", "-i", f"qms{dead.pid}n1", "-j", "ACCEPT"])]
    if _has_table("nat"):
        left.append(("nat", ["POSTROUTING", "-o", f"qms{dead.pid}n0", "-j", "RETURN"]))
    kept = [("filter", ["FORWARD", "-i", f"qms{live}br", "-o", f"qms{live}br", "-j", "ACCEPT"]),   # a live run's
            ("filter", ["FORWARD", "-i", f"qms{dead.pid}brx", "-j", "ACCEPT"])]                   # no run's name
    try:
        for table, rule in left + kept:
            subprocess.run(["iptables", "-t", table, "-A", *rule], check=True, timeout=30)
        removed = sweep_stale_rules()
        assert sorted(line.split(" -A ")[1] for line in removed) == sorted(" ".join(rule) for _, rule in left)
        for table, rule in left:
            assert subprocess.run(["iptables", "-t", table, "-C", *rule], capture_output=True).returncode == 1, rule
        for table, rule in kept:
            assert subprocess.run(["iptables", "-t", table, "-C", *rule], capture_output=True).returncode == 0, rule
    finally:
        for table, rule in left + kept:
            while subprocess.run(["iptables", "-t", table, "-D", *rule], capture_output=True).returncode == 0:
                pass
