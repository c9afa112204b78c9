"""`qmemo scenario run`: build the hosts, start the devnet and the load, perturb on schedule, judge.

In order: check root and iproute2; sweep what dead runners left; make the hosts and
shape the links (refusing in one line when a profile needs netem and the kernel has
none); make a devnet (`qmemo genesis`, the attacker's accounts split off from the
generator's); start the nodes in their namespaces and wait until healthy; start the
metrics sampler; sign the workload, then start the generator in its namespace; from
the moment the generator's clock starts, run the timeline (perturbations, their
follow-ups, floods from the attacker's namespace); when the generator is done, wait for
one tip, read the end state, evaluate the invariants and write invariants.json.

Whatever happens - an error, Ctrl-C, SIGTERM, SIGHUP - `Hosts.close()` runs once from
`finally`: every process stopped, every namespace, veth and the bridge removed.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from qmemo.errors import QmemoError, SetupError
from qmemo.interrupts import interrupt_on_signals, shielded
from qmemo.scenario import hosts as hosts_mod
from qmemo.scenario import links
from qmemo.scenario.argv import gen_arguments, genesis_arguments
from qmemo.scenario.cluster import Cluster, FollowUp
from qmemo.scenario.hosts import Hosts, Process, stop_process
from qmemo.scenario.invariants import evaluate, not_judged, read_transactions
from qmemo.scenario.manifest import Manifest
from qmemo.scenario.observe import Sampler, end_state, wait_drained, wait_same_tip
from qmemo.scenario.supply import SupplyWatch
from qmemo.scenario.verdict import InvariantResult, Verdict, write

HEALTH_TIMEOUT_S = 60.0
GEN_START_TIMEOUT_S = 120.0
TICK_S = 0.05
FLOOD_GRACE_S = 60.0     # after the load: how long a flood may still take to send and collect answers


class ScenarioAborted(QmemoError):
    """The scenario could not run to its end (a node never came up, the generator failed...)."""

    code = "scenario_aborted"
    http_status = 500


def run_scenario(manifest: Manifest, manifest_path: Path, run_dir: Path, overrides: list[str],
                 links_backend: str = "netem") -> Verdict:
    hosts_mod.require_root_and_netns()
    run_dir.mkdir(parents=True, exist_ok=False)
    (run_dir / "logs").mkdir()
    shutil.copy(manifest_path, run_dir / "manifest.toml")
    (run_dir / "manifest.json").write_bytes(orjson.dumps({"overrides": overrides,
                                                          "effective": _jsonable(dataclasses.asdict(manifest))},
                                                         option=orjson.OPT_INDENT_2))
    swept = hosts_mod.sweep_stale()
    hosts = Hosts(hosts_mod.choose_subnet())
    restore_signals = interrupt_on_signals()     # SIGTERM/SIGHUP take the Ctrl-C path, once
    sampler: Sampler | None = None
    supply: SupplyWatch | None = None
    started = time.time()
    results: list[InvariantResult] = []
    refused = False
    try:
        hosts.create(manifest.network.nodes)
        try:
            links.require_backend(hosts, [p for p in manifest.profiles_used() if p.needs_netem], links_backend)
        except SetupError:
            refused = True
            raise
        links.apply(hosts, manifest.network, manifest.profiles, netem=links_backend == "netem")
        devnet = _make_devnet(manifest, run_dir)
        cluster = Cluster(manifest, hosts, devnet, run_dir, links_backend)
        for i in range(manifest.network.nodes):
            if links_backend == "relay":
                cluster.start_relay(i)
            cluster.start_node(i)
        _wait_healthy(cluster)
        sampler = Sampler(cluster.urls, run_dir)
        sampler.start()
        if manifest.chaos is not None:
            cluster.record("chaos schedule", seed=manifest.chaos.seed, faults=len(manifest.perturbations))
            supply = SupplyWatch(cluster.urls, devnet / "genesis.json", run_dir)
            supply.start()
        generator = _start_generator(cluster)
        floods = _start_floods(cluster)
        _run_timeline(cluster, generator)
        _wait_floods(cluster, floods)
        mempools = wait_drained(cluster.urls, manifest.invariants.drain_s)
        cluster.record("mempools drained" if all(m and not m["pending"] and not m["held"] for m in mempools.values())
                       else "mempools not drained", mempools=mempools)
        shards = [list(group) for group in cluster.shard_urls]     # one group of all nodes when unsharded
        tips = wait_same_tip(cluster.urls, manifest.invariants.settle_s, shards)
        sampler.stop()
        sampler = None
        if supply is not None:
            supply.sample_all(at_end=True)
            supply.stop()
            supply = None
        if not (run_dir / "gen" / "summary.json").exists():
            raise ScenarioAborted(f"the generator wrote no summary (exit {generator.popen.returncode}); "
                                  f"see {run_dir / 'logs' / 'gen.log'}")
        # Every accepted id, also those the generator saw in a block: a block can be lost later.
        accepted = [tx.id for tx in read_transactions(run_dir / "gen" / "transactions.csv") if tx.accepted]
        end_state(cluster.urls, accepted, run_dir, tips, mempools, shards)
        results = evaluate(run_dir, manifest)
    finally:
        with shielded():        # a second Ctrl-C or SIGTERM must not cut the cleanup short
            if sampler is not None:
                sampler.stop()
            if supply is not None:
                supply.stop()
            problems = hosts.close()
            if refused:
                # Nothing ran: a folder holding only the manifest would read as a run that died
                # (and `qmemo scenario show runs/*/` would stop at it).
                shutil.rmtree(run_dir, ignore_errors=True)
        restore_signals()
    verdict = Verdict(manifest.name, tuple(results), {
        "run_dir": str(run_dir), "started_s": started, "elapsed_s": round(time.time() - started, 1),
        "subnet": str(hosts.subnet), "links": links_backend, "overrides": overrides, "swept_stale": swept,
        "cleanup_problems": problems, "not_judged": not_judged(manifest)})
    write(run_dir, verdict)
    return verdict


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {(",".join(sorted(k)) if isinstance(k, frozenset) else str(k)): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def _qmemo() -> str:
    return str(Path(sys.executable).parent / "qmemo")


def _make_devnet(manifest: Manifest, run_dir: Path) -> Path:
    """`qmemo genesis` with the honest and the attacker's accounts; one key file for each side."""
    from qmemo.crypto.keys import load_keys, save_keys

    devnet = run_dir / "devnet"
    chain = manifest.chain
    command = [_qmemo(), *genesis_arguments(manifest, str(devnet))]
    with (run_dir / "logs" / "genesis.log").open("wb") as log:
        if subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False).returncode != 0:
            raise ScenarioAborted(f"qmemo genesis failed; see {run_dir / 'logs' / 'genesis.log'}")
    keys = load_keys(devnet / "accounts.keys.json")
    save_keys(devnet / "honest.keys.json", keys[:chain.accounts])
    save_keys(devnet / "attacker.keys.json", keys[chain.accounts:] or keys[:1])
    return devnet


def _wait_healthy(cluster: Cluster) -> None:
    deadline = time.monotonic() + HEALTH_TIMEOUT_S
    waiting = set(cluster.nodes)
    while waiting:
        for i in sorted(waiting):
            if cluster.nodes[i].popen.poll() is not None:
                raise ScenarioAborted(f"node-{i} exited with {cluster.nodes[i].popen.returncode} while starting:\n"
                                      + _tail(cluster.run_dir / "logs" / f"node-{i}.log"))
            if cluster.healthy(i):
                waiting.discard(i)
        if waiting and time.monotonic() > deadline:
            raise ScenarioAborted(f"node(s) {sorted(waiting)} not healthy after {HEALTH_TIMEOUT_S:.0f} s")
        time.sleep(0.2)
    cluster.record("nodes healthy")


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _gen_command(cluster: Cluster) -> list[str]:
    load = cluster.manifest.load
    return [_qmemo(), *gen_arguments(load, str(cluster.devnet), str(cluster.devnet / "honest.keys.json"),
                                     [cluster.url(i) for i in load.target_nodes], str(cluster.run_dir / "gen"))]


def _start_generator(cluster: Cluster) -> Process:
    """Sign the workload (in the generator's namespace), then start the load; set the timeline's zero."""
    log = cluster.run_dir / "logs" / "gen.log"
    prepare = cluster.hosts.spawn("gen", "gen-prepare", [*_gen_command(cluster), "--prepare-only"], log)
    if prepare.popen.wait() != 0:
        raise ScenarioAborted(f"signing the workload failed:\n{_tail(log)}")
    live = cluster.run_dir / "gen" / "live.json"
    generator = cluster.hosts.spawn("gen", "generator", [*_gen_command(cluster), "--live", str(live)], log)
    deadline = time.monotonic() + GEN_START_TIMEOUT_S
    while True:
        try:
            elapsed = orjson.loads(live.read_bytes())["elapsed_s"]
            break
        except (OSError, ValueError, KeyError):
            pass
        if generator.popen.poll() is not None:
            raise ScenarioAborted(f"the generator exited with {generator.popen.returncode}:\n{_tail(log)}")
        if time.monotonic() > deadline:
            raise ScenarioAborted(f"the generator did not start sending within {GEN_START_TIMEOUT_S:.0f} s")
        time.sleep(TICK_S)
    cluster.t0 = time.time() - float(elapsed)
    cluster.record("load started", tps=cluster.manifest.load.tps, duration_s=cluster.manifest.load.duration_s)
    return generator


def _start_floods(cluster: Cluster) -> list[Process]:
    processes = []
    for k, flood in enumerate(cluster.manifest.floods):
        command = [sys.executable, "-m", "qmemo.scenario.flood", "--kind", str(flood.kind), "--rate", f"{flood.rate:g}",
                   "--duration", f"{flood.for_s:g}", "--start-at", f"{cluster.t0 + flood.at_s:.3f}",
                   "--nodes", ",".join(cluster.url(i) for i in flood.nodes),
                   "--genesis", str(cluster.devnet / "genesis.json"),
                   "--keys", str(cluster.devnet / "attacker.keys.json"),
                   "--out", str(cluster.run_dir / f"flood-{k}.json")]
        processes.append(cluster.hosts.spawn("attacker", f"flood-{k}", command,
                                             cluster.run_dir / "logs" / f"flood-{k}.log"))
        cluster.record("flood scheduled", kind=flood.kind, rate=flood.rate, at_s=flood.at_s, for_s=flood.for_s)
    return processes


def _wait_floods(cluster: Cluster, floods: list[Process]) -> None:
    """Floods end on their own schedule; one that hangs past it is stopped (and says so in the timeline)."""
    deadline = time.monotonic() + FLOOD_GRACE_S
    for flood in floods:
        try:
            flood.popen.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            cluster.record("flood overran; stopped", flood=flood.name, problems=stop_process(flood))
        cluster.record("flood finished", flood=flood.name, exit=flood.popen.returncode)


def _run_timeline(cluster: Cluster, generator: Process) -> None:
    """Carry out every perturbation and its follow-up at its time; return once the load is over and all are done."""
    pending: list[FollowUp] = [FollowUp(p.at_s, p.action, lambda p=p: pending.extend(cluster.perturb(p)))
                               for p in cluster.manifest.perturbations if p.action != "flood"]
    while pending or generator.popen.poll() is None:
        now_s = time.time() - cluster.t0
        due = sorted((f for f in pending if f.at_s <= now_s), key=lambda f: f.at_s)
        for follow_up in due:
            pending.remove(follow_up)
            follow_up.run()
        time.sleep(TICK_S)
    cluster.record("load finished", generator_exit=generator.popen.returncode)
    # 1: not every transaction accounted; 4: a sharded run's invariants failed - the invariants say more
    if generator.popen.returncode not in (0, 1, 4):
        raise ScenarioAborted(f"the generator failed (exit {generator.popen.returncode}); "
                         f"see {cluster.run_dir / 'logs' / 'gen.log'}")
