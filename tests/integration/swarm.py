"""Several hosts on one machine for the tests: a Docker engine in each of three network namespaces, one Swarm.

The namespaces, their veths and the bridge between them are the scenario runner's
(qmemo.scenario.hosts.Hosts: a 10.231.X.0/24 of its choosing, the FORWARD rule it adds
while a root-namespace engine drops forwarding, one cleanup path). Each host's dockerd
(tests/integration/engine.launch_dockerd, entered with nsenter so it keeps the host's
/sys and cgroups) has its own data root, exec root, socket and docker0; its iptables
rules, FORWARD policy and sysctls are its namespace's, so they go with it. Host 0 is the
manager (`swarm init` on its address), hosts 1 and 2 join as workers; each is labelled
qmemo.host-<h>=true (qmemo.deploy.stack), the manager also qmemo.results=true (the
generator's host). The image arrives as a `docker save` archive, loaded into each engine
(no registry), and the archive is deleted once they have it.

Each host's link is shaped where the kernel allows (`shape_links`): a token bucket (tc
tbf, LINK_RATE) on both ends of its veth, so what leaves a host and what reaches it each
pass at most that rate. This kernel has no sch_netem, so no delay, jitter or loss: a
rate is all that is shaped, and a kernel without tbf leaves the links as they are (the
run records which).

`kill(h)` is a host losing power: SIGKILL to its dockerd, to everything else in its
namespace (containerd, the shims) and to its containers' first processes (which takes
their PID namespaces with them). `close()` removes the stack, stops the engines that
are left, unmounts and deletes their roots, then the namespaces, and puts the root
namespace's iptables, sysctls and links back as they were (engine.HostState): nothing
stays behind. It is the one cleanup path, idempotent and never raising (a step that
fails is reported and the next one runs), so a `finally` can always call it. What it
promises is checked from outside by `leftovers(pid, root)`: no namespace, link or
root-namespace iptables rule naming the run, no process naming its root folder.

A run that never reached its cleanup (SIGKILL, or a SIGTERM before the fixture took it
as Ctrl-C) leaves engines behind in sessions of their own, with their containers. The
next start sweeps them (`sweep_stale_roots`): only folders ROOT/<pid> whose pid is dead,
and in each only what names that folder - a dockerd or containerd by its --data-root,
--exec-root or --config, a shim by its containerd's socket, a container's processes by
a cgroup named after a container of that data root - then the mounts under it, then
the folder; the dead runs' namespaces go by the scenario runner's own sweep. What a dead
run added to the root namespace's iptables goes too (`sweep_stale_rules`): every rule, in
any table of either family, that names one of its interfaces (qms<pid>..., the pid
dead) - its bridge's FORWARD rule, and anything else an engine or a step of the run
wrote about them; a live run's rules, and rules naming no run, stay.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from qmemo.deploy.stack import RESULTS_LABEL, host_label
from qmemo.interrupts import deferred
from qmemo.scenario.hosts import PREFIX, CommandFailed, Hosts, choose_subnet, run_ip, sweep_stale
from qmemo.scenario.hosts import leftovers as namespaces_left
from tests.integration.engine import SWARM_POOL, TOOLS, Engine, HostState, is_under, launch_dockerd, unmount_under

ROOT = Path("/var/lib/qmemo-swarm")        # <pid>/h<n>/{data,exec}: deleted at close
# A dockerd uses the system's containerd when this socket is there instead of starting its
# own: three engines would then share one, and a host's kill would not take its containers.
SYSTEM_CONTAINERD = Path("/run/containerd/containerd.sock")
JOIN_TIMEOUT_S = 60.0
SWEEP_WAIT_S = 10.0
# Each host's link, both ways: 100 Mbit/s, a LAN's share rather than the veth's unbounded
# copy; a burst of 10 ms at that rate (125 KB, above the rate / HZ tbf needs) and at most
# 50 ms queued before packets drop.
LINK_RATE = "100mbit"
LINK_TBF = ["tbf", "rate", LINK_RATE, "burst", "125kb", "latency", "50ms"]
# Run inside a task's container (the overlay is the containers', not this namespace's):
# each URL's JSON answer, or what went wrong asking it.
PROBE = """import json, sys, urllib.request
def get(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return json.load(answer)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
print(json.dumps({url: get(url) for url in sys.argv[1:]}))
"""
# An interface of a run: qms<pid> and its host's tag (hosts.py's names: n<i>, g, a, br).
_RUN_INTERFACE = re.compile(rf"\b{PREFIX}(\d+)(?:n\d+|g|a|br)\b")


def _processes() -> list[tuple[int, list[str], list[str]]]:
    """(pid, its arguments, its cgroup paths) of every process that can be read."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = [a.decode(errors="replace") for a in (entry / "cmdline").read_bytes().split(b"\0") if a]
            cgroups = [line.split(":", 2)[-1] for line in (entry / "cgroup").read_text().splitlines()]
        except OSError:       # gone meanwhile, or a kernel thread's
            continue
        found.append((int(entry.name), args, cgroups))
    return found


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def _run_rules() -> Iterator[tuple[str, str, str, str, set[int]]]:
    """(family, its tool, table, rule, the pids of the runs it names) of every root-namespace
    iptables rule, both families, every table, that names an interface of a run."""
    for family, (save, tool, _) in TOOLS.items():
        if shutil.which(save) is None:
            continue
        table = None
        for line in run_ip([save], check=False).stdout.splitlines():
            if line.startswith("*"):
                table = line[1:]
            elif table and line.startswith("-A ") and (pids := {int(m) for m in _RUN_INTERFACE.findall(line)}):
                yield family, tool, table, line, pids


def sweep_stale_rules() -> list[str]:
    """Delete every root-namespace iptables rule (both families, every table) that names an
    interface of a run whose pid is dead; what was deleted, one line each."""
    removed = []
    for family, tool, table, line, pids in _run_rules():
        if not any(map(_alive, pids)):
            run_ip([tool, "-t", table, "-D", *shlex.split(line)[1:]], check=False)
            removed.append(f"{family} -t {table} {line}")
    return removed


def _names_folder(args: list[str], folder: Path) -> bool:
    """Does an argument name `folder` or a path in it (a dockerd's --exec-root=..., a shim's
    -address unix://...)?"""
    return any(is_under(arg.split("=", 1)[-1].removeprefix("unix://"), folder) for arg in args)


def leftovers(pid: int, root: Path | None = None) -> list[str]:
    """What run `pid` left behind, one line each (for tests: should be none): its namespaces
    and links (the scenario runner's `leftovers`), every root-namespace iptables rule, in any
    table of either family, that names one of its interfaces, and, given its root folder,
    every process whose command line names that folder."""
    found = namespaces_left(pid)
    found += [f"{family} -t {table} {line}" for family, _, table, line, pids in _run_rules() if pid in pids]
    if root is not None:
        found += [f"process {p}: {' '.join(args)}" for p, args, _ in _processes() if _names_folder(args, root)]
    return found


def sweep_stale_roots(root: Path = ROOT) -> list[str]:
    """Kill what runs under root/<pid> of a dead pid, unmount under it, delete it; what was removed."""
    removed: list[str] = []
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        if not folder.name.isdigit() or Path(f"/proc/{folder.name}").exists():
            continue             # not ours, or its run is alive (or its pid reused: left alone, to be safe)
        containers = {path.name for path in folder.glob("h*/data/containers/*") if len(path.name) == 64}
        doomed = [pid for pid, args, cgroups in _processes()
                  if _names_folder(args, folder)
                  or any({part, part.removeprefix("docker-").removesuffix(".scope")} & containers
                         for cgroup in cgroups for part in cgroup.split("/"))]
        for pid in doomed:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + SWEEP_WAIT_S
        while not all(map(_gone, doomed)) and time.monotonic() < deadline:
            time.sleep(0.1)
        unmount_under((folder,))
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(f"{folder} ({len(doomed)} process(es) killed)")
    return removed


@dataclass
class Swarm:
    log_dir: Path
    count: int = 3
    hosts: Hosts = field(init=False)
    engines: list[Engine | None] = field(default_factory=list)
    killed: set[int] = field(default_factory=set)
    host_state: HostState | None = None       # the root namespace's, before anything started
    timings: dict[str, float] = field(default_factory=dict)
    swept: list[str] = field(default_factory=list)   # what dead runs had left, removed at start
    link_profile: str = ""                            # how each host's veth is shaped (shape_links)
    closed: bool = False

    def __post_init__(self) -> None:
        self.hosts = Hosts(choose_subnet())
        self.root = ROOT / str(os.getpid())

    def address(self, h: int) -> str:
        return self.hosts.hosts[f"node-{h}"].address

    def hostname(self, h: int) -> str:
        return f"qmemo-host-{h}"

    def namespace(self, h: int) -> str:
        return self.hosts.hosts[f"node-{h}"].namespace

    def docker(self, h: int, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        engine = self.engines[h]
        assert engine is not None, f"host {h} has no engine"
        return engine.docker(*args, timeout=timeout)

    @property
    def manager_env(self) -> dict[str, str]:
        assert self.engines[0] is not None
        return self.engines[0].env

    def start(self) -> None:
        """What dead runs left, swept; namespaces, one engine in each, the Swarm, the labels."""
        self.swept = sweep_stale_roots() + sweep_stale_rules() + sweep_stale()
        self.host_state = HostState.read()
        self.hosts.create(self.count)
        self.link_profile = self.shape_links()
        for h in range(self.count):
            self.engines.append(None)
            with deferred():     # a signal inside Popen would leave a dockerd close() does not know
                self.engines[h] = launch_dockerd(self.log_dir / f"dockerd-{h}.log", self.root / f"h{h}" / "data",
                                                 self.root / f"h{h}" / "exec", netns=self.namespace(h),
                                                 hostname=self.hostname(h))
        init = self.docker(0, "swarm", "init", "--advertise-addr", self.address(0), "--listen-addr",
                           f"{self.address(0)}:2377", "--default-addr-pool", SWARM_POOL)
        assert init.returncode == 0, init.stderr
        token = self.docker(0, "swarm", "join-token", "-q", "worker").stdout.strip()
        for h in range(1, self.count):
            joined = self.docker(h, "swarm", "join", "--token", token, "--advertise-addr", self.address(h),
                                 "--listen-addr", f"{self.address(h)}:2377", f"{self.address(0)}:2377")
            assert joined.returncode == 0, f"host {h}: {joined.stderr}"
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        while time.monotonic() < deadline and len(self.ready_nodes()) < self.count:
            time.sleep(0.2)
        assert len(self.ready_nodes()) == self.count, self.docker(0, "node", "ls").stdout
        for h in range(self.count):
            node = self.node_id(h)
            # The manager (host 0) holds the rendered folder: the generator is pinned to it.
            labels = [f"{host_label(h)}=true", *([f"{RESULTS_LABEL}=true"] if h == 0 else [])]
            labelled = self.docker(0, "node", "update", *(arg for label in labels for arg in ("--label-add", label)),
                                   node)
            assert labelled.returncode == 0, labelled.stderr

    def veth_ends(self, h: int) -> list[tuple[list[str], list[str]]]:
        """(tc's options, its device) for each end of host h's veth: the root namespace's, the host's eth0."""
        host = self.hosts.hosts[f"node-{h}"]
        return [([], ["dev", host.veth]), (["-n", host.namespace], ["dev", "eth0"])]

    def shape_links(self) -> str:
        """LINK_TBF on both ends of every host's veth; what was done, as a line. The qdiscs
        go with the veths when the namespaces are deleted."""
        try:
            for h in range(self.count):
                for options, device in self.veth_ends(h):
                    run_ip(["tc", *options, "qdisc", "add", *device, "root", *LINK_TBF])
        except CommandFailed as exc:     # a kernel without sch_tbf: the links stay as they are
            return f"unshaped ({exc})"
        return f"tc {' '.join(LINK_TBF)} on both ends of each host's veth (no delay or loss: no sch_netem here)"

    def link_qdiscs(self, h: int) -> list[str]:
        """`tc -s qdisc show` of both ends of host h's veth, a line each (its rate, bytes sent, overlimits)."""
        lines = []
        for options, device in self.veth_ends(h):
            shown = run_ip(["tc", *options, "-s", "qdisc", "show", *device], check=False).stdout.splitlines()
            lines.append(f"{device[-1]}: " + " ".join(part.strip() for part in shown[:2]))
        return lines

    def node_id(self, h: int) -> str:
        return self.docker(h, "info", "--format", "{{.Swarm.NodeID}}").stdout.strip()

    def ready_nodes(self) -> list[str]:
        lines = self.docker(0, "node", "ls", "--format", "{{.Hostname}} {{.Status}}").stdout.splitlines()
        return [line for line in lines if line.endswith(" Ready")]

    def node_states(self) -> dict[str, str]:
        """Swarm node id -> its status as the manager sees it (Ready, Down)."""
        lines = self.docker(0, "node", "ls", "--format", "{{.ID}} {{.Status}}").stdout.split("\n")
        return dict(line.split(" ", 1) for line in lines if line)

    def running(self, service: str) -> set[str]:
        """The hosts (names) where the manager says `service` has a task running now."""
        lines = self.docker(0, "service", "ps", service, "--filter", "desired-state=running",
                            "--format", "{{.Node}} {{.CurrentState}}").stdout.splitlines()
        return {line.split()[0] for line in lines if " Running " in f"{line} "}

    def ask(self, h: int, service: str, urls: list[str]) -> dict[str, dict]:
        """GET each URL from inside a running task of `service` on host h: url -> its JSON
        answer, or {"error": ...} for one that did not answer."""
        ids = self.docker(h, "ps", "-q", "--filter", f"label=com.docker.swarm.service.name={service}").stdout.split()
        assert ids, f"host {h} runs no task of {service}"
        done = self.docker(h, "exec", ids[0], "python3", "-c", PROBE, *urls, timeout=60)
        assert done.returncode == 0, f"asking from {service} on host {h}: {done.stderr}"
        return json.loads(done.stdout)

    def load_image(self, archive: Path, tag: str) -> float:
        """`docker load` of the archive into every engine at once; the seconds it took."""
        started = time.monotonic()

        def load(h: int) -> subprocess.CompletedProcess[str]:
            return self.docker(h, "load", "-i", str(archive), timeout=600)

        with ThreadPoolExecutor(self.count) as pool:
            for h, done in enumerate(pool.map(load, range(self.count))):
                assert done.returncode == 0, f"host {h}: {done.stderr}"
                assert self.docker(h, "image", "inspect", tag).returncode == 0, f"host {h} has no {tag}"
        return time.monotonic() - started

    def kill(self, h: int) -> None:
        """Host h's engine and everything it runs, SIGKILLed: a host that lost power."""
        ids = self.docker(h, "ps", "-q").stdout.split()
        pids = [int(p) for p in self.docker(h, "inspect", "--format", "{{.State.Pid}}", *ids).stdout.split()
                if p.isdigit() and int(p) > 0] if ids else []
        engine = self.engines[h]
        assert engine is not None and engine.process is not None
        engine.process.kill()
        engine.process.wait(timeout=30)
        for pid in [*run_ip(["ip", "netns", "pids", self.namespace(h)], check=False).stdout.split(), *pids]:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.killed.add(h)

    def close(self, stack: str | None = None) -> list[str]:
        """The stack, the engines, their roots, the namespaces: removed; what went wrong, as lines.

        The one cleanup path, like Hosts.close: idempotent and never raises. Each step's
        failure (a docker call that times out, an engine that will not die) is a line of
        the answer and the later steps still run: a step skipped is an engine, a mount or
        a namespace left behind for good."""
        if self.closed:
            return []
        self.closed = True
        problems: list[str] = []

        def attempt(what: str, step: Callable[[], object]) -> object:
            try:
                return step()
            except Exception as exc:    # any failure is reported; the cleanup goes on
                problems.append(f"{what}: {type(exc).__name__}: {exc}")
                return None

        alive = [h for h, engine in enumerate(self.engines) if engine is not None and h not in self.killed]
        if stack and 0 in alive:       # its tasks stop with their engines below
            attempt(f"stack rm {stack}", lambda: self.docker(0, "stack", "rm", stack, timeout=120))
        for h in reversed(alive):              # workers first: the manager leaves last
            attempt(f"host {h}: swarm leave", lambda h=h: self.docker(h, "swarm", "leave", "--force", timeout=60))

        def stop(h: int) -> list[str]:
            engine = self.engines[h]
            assert engine is not None
            return [f"host {h}: {line}" for line in engine.stop()]

        with ThreadPoolExecutor(max(1, len(alive))) as pool:     # each waits for its containers: at once
            for h, future in [(h, pool.submit(stop, h)) for h in alive]:
                problems += attempt(f"host {h}: stopping its engine", future.result) or []
        for h, engine in enumerate(self.engines):
            if engine is not None and h in self.killed:
                attempt(f"host {h}: unmounting", lambda engine=engine: unmount_under(engine.roots))
        problems += attempt("the namespaces", self.hosts.close) or []
        attempt(f"unmounting under {self.root}", lambda: unmount_under((self.root,)))
        if self.host_state is not None:
            # The engines' rules are their namespaces' and went with them; what the root
            # namespace gained on the way (an empty filter table, seen here) goes too.
            problems += attempt("restoring the root namespace", self.host_state.restore) or []
        shutil.rmtree(self.root, ignore_errors=True)
        if self.root.exists():
            problems.append(f"{self.root} could not be deleted")
        return problems
