"""A container engine for the tests: the machine's dockerd when one answers, else one started here.

A dockerd started here has its own data root (DATA_ROOT, kept between runs: it is the
image cache that scripts/image.sh's content tags look up), its own exec root, socket
and an empty daemon.json (never the machine's /etc/docker one), a fixed bridge subnet and address pool (172.31.224.0/20, the project's own
range; compose.py's shaped projects use 172.31.231.0/24 inside it), and it is stopped by
its PID. dockerd changes the host as it starts: the iptables filter and nat tables
(FORWARD policy DROP, its chains and NAT rules), net.ipv4.ip_forward, and bridges and
veths of its own. `HostState` records all of that before the start, and `restore()`
puts back exactly what was there: added rules and chains deleted, policies reset,
tables that did not exist deleted (nft), sysctls rewritten, leftover links removed.
Rules naming a scenario runner's interfaces (qms..., qmemo/scenario/hosts.py) are
neither recorded nor touched: a runner that is live beside the tests owns them.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

DATA_ROOT = Path(os.environ.get("QMEMO_TEST_DOCKER_ROOT", "/var/lib/qmemo-docker"))
EXEC_ROOT = Path("/run/qmemo-docker")
SOCKET = EXEC_ROOT / "docker.sock"
BRIDGE_IP = "172.31.230.1/24"
ADDRESS_POOL = "base=172.31.232.0/22,size=26"
SWARM_POOL = "172.31.236.0/22"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 60.0
SYSCTLS = ("net/ipv4/ip_forward", "net/bridge/bridge-nf-call-iptables", "net/bridge/bridge-nf-call-ip6tables")
_DOCKER_LINK = re.compile(r"^(docker0|docker_gwbridge|br-[0-9a-f]{12}|veth[0-9a-f]{7}|vx-\S+)$")
_SCENARIO_RULE = re.compile(r"\bqms")    # an interface of a scenario runner (qms<pid>br, or qms+ of another version)
TOOLS = {"iptables": ("iptables-save", "iptables", "ip"), "ip6tables": ("ip6tables-save", "ip6tables", "ip6")}


class EngineUnavailable(Exception):
    """No engine answers and none could be started here (the message says why)."""


def _run(args: list[str], timeout: float = 60, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False,
                          env={**os.environ, **(env or {})})


# --- the host's state that dockerd changes ------------------------------------------------------------
Table = dict[str, object]     # {"policies": {chain: policy}, "chains": set[str], "rules": list[str]}


def parse_save(text: str) -> dict[str, Table]:
    """iptables-save's text as {table: policies, user chains, rules} (counters and comments dropped)."""
    tables: dict[str, Table] = {}
    table: Table | None = None
    for line in text.splitlines():
        if line.startswith("*"):
            table = tables.setdefault(line[1:], {"policies": {}, "chains": set(), "rules": []})
        elif table is None or not line or line.startswith("#") or line == "COMMIT":
            continue
        elif line.startswith(":"):
            chain, policy = line[1:].split()[:2]
            if policy == "-":
                table["chains"].add(chain)
            else:
                table["policies"][chain] = policy
        elif line.startswith("-A ") and not _SCENARIO_RULE.search(line):
            table["rules"].append(line)
    return tables


@dataclass
class HostState:
    tables: dict[str, dict[str, Table]] = field(default_factory=dict)   # "iptables"/"ip6tables" -> parsed save
    sysctls: dict[str, str] = field(default_factory=dict)
    links: set[str] = field(default_factory=set)

    @classmethod
    def read(cls) -> HostState:
        state = cls()
        for family, (save, _, _) in TOOLS.items():
            if shutil.which(save):
                state.tables[family] = parse_save(_run([save]).stdout)
        for name in SYSCTLS:
            path = Path("/proc/sys") / name
            if path.exists():
                state.sysctls[name] = path.read_text().strip()
        state.links = _links()
        return state

    def differences(self, other: HostState) -> list[str]:
        """What `other` has that differs from this state, one line each (empty: the same)."""
        lines = []
        for family in sorted(set(self.tables) | set(other.tables)):
            mine, theirs = self.tables.get(family, {}), other.tables.get(family, {})
            for table in sorted(set(mine) | set(theirs)):
                if mine.get(table) != theirs.get(table):
                    lines.append(f"{family} table {table}: {mine.get(table)} became {theirs.get(table)}")
        for name, value in self.sysctls.items():
            if other.sysctls.get(name) != value:
                lines.append(f"sysctl {name}: {value} became {other.sysctls.get(name)}")
        lines += [f"link {name} appeared" for name in sorted(other.links - self.links) if _DOCKER_LINK.match(name)]
        return lines

    def restore(self) -> list[str]:
        """Put back what was recorded; what could not be put back, one line each."""
        now = HostState.read()
        for family, (_, tool, nft_family) in TOOLS.items():
            before = self.tables.get(family, {})
            for table, current in now.tables.get(family, {}).items():
                if table not in before:
                    _run(["nft", "delete", "table", nft_family, table])
                    continue
                old = before[table]
                for rule in current["rules"]:
                    if rule not in old["rules"]:
                        _run([tool, "-t", table, "-D", *shlex.split(rule)[1:]])
                for chain in current["chains"] - old["chains"]:
                    _run([tool, "-t", table, "-F", chain])
                for chain in current["chains"] - old["chains"]:
                    _run([tool, "-t", table, "-X", chain])
                for chain, policy in old["policies"].items():
                    if current["policies"].get(chain) != policy:
                        _run([tool, "-t", table, "-P", chain, policy])
                # A dockerd that finds its rules already there inserts them again ahead of the
                # others: the same rules, another order. Each recorded rule of such a chain is
                # deleted and appended again in its recorded order (a runner's rules stay put).
                kept = [rule for rule in current["rules"] if rule in old["rules"]]
                for chain in {_chain(rule) for rule in old["rules"]}:
                    if _in_chain(kept, chain) != _in_chain(old["rules"], chain):
                        for rule in _in_chain(old["rules"], chain):
                            _run([tool, "-t", table, "-D", *shlex.split(rule)[1:]])
                            _run([tool, "-t", table, *shlex.split(rule)])
        for name, value in self.sysctls.items():
            (Path("/proc/sys") / name).write_text(value + "\n")
        for name in sorted(_links() - self.links):
            if _DOCKER_LINK.match(name):
                _run(["ip", "link", "del", name])
        return self.differences(HostState.read())


def _chain(rule: str) -> str:
    return rule.split()[1]


def _in_chain(rules: list[str], chain: str) -> list[str]:
    return [rule for rule in rules if _chain(rule) == chain]


def _links() -> set[str]:
    out = _run(["ip", "-o", "link", "show"]).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if line.count(":") >= 2}


# --- the engine -------------------------------------------------------------------------------------
@dataclass
class Engine:
    env: dict[str, str]                    # DOCKER_HOST for every client call
    process: subprocess.Popen | None       # the dockerd started here (None: the machine's own)
    host_state: HostState | None           # None: nothing of the host's to put back (or not ours to)
    log: Path | None
    roots: tuple[Path, ...] = (EXEC_ROOT, DATA_ROOT)   # what its mounts live under (unmounted at stop)

    def docker(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return _run(["docker", *args], timeout=timeout, env=self.env)

    def stop(self) -> list[str]:
        """Stop the dockerd started here (by PID) and restore the host; problems as lines."""
        if self.process is None:
            return []
        problems = []
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
                problems.append(f"dockerd (pid {self.process.pid}) did not stop in {STOP_TIMEOUT_S:.0f} s; killed")
        unmount_under(self.roots)
        if self.host_state is not None:
            problems += self.host_state.restore()
        self.process = None
        return problems


def machine_engine() -> Engine | None:
    """The machine's own engine (DOCKER_HOST or the default socket), when one answers."""
    env = {"DOCKER_HOST": os.environ["DOCKER_HOST"]} if os.environ.get("DOCKER_HOST") else {}
    if shutil.which("docker") and _run(["docker", "version", "--format", "{{.Server.Version}}"], 20, env).returncode == 0:
        return Engine(env, None, None, None)
    return None


def is_under(path: str, root: Path) -> bool:
    """`path` is `root` or inside it (by whole components: /x/28241 is not under /x/2824)."""
    return path == str(root) or path.startswith(f"{root}/")


def unmount_under(roots: tuple[Path, ...]) -> None:
    """Lazily unmount every mount below `roots` (an engine's overlays, netns files, secrets), deepest first."""
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()
              if any(is_under(line.split()[1], root) for root in roots)]
    for mount in sorted(mounts, reverse=True):
        _run(["umount", "-l", mount])


def launch_dockerd(log: Path, data_root: Path, exec_root: Path, *, bridge_ip: str = BRIDGE_IP,
                   address_pool: str = ADDRESS_POOL, netns: str | None = None, hostname: str | None = None,
                   host_state: HostState | None = None) -> Engine:
    """A dockerd with its own data root, exec root, socket and empty daemon.json (in `exec_root`),
    answering within START_TIMEOUT_S; `netns`: inside that named network namespace (nsenter, which
    keeps the host's /sys and cgroups, where `ip netns exec` would remount /sys), and
    `hostname`: with a UTS namespace of that name (a Swarm node's name is its host's)."""
    socket = exec_root / "docker.sock"
    exec_root.mkdir(parents=True, exist_ok=True)
    data_root.mkdir(parents=True, exist_ok=True)
    socket.unlink(missing_ok=True)
    # An empty configuration of its own: the machine's /etc/docker/daemon.json (mirrors,
    # a storage driver, live-restore, its own address pools) is not the tests' to inherit.
    config = exec_root / "daemon.json"
    config.write_text("{}\n")
    log.parent.mkdir(parents=True, exist_ok=True)
    enter = ["nsenter", f"--net=/var/run/netns/{netns}"] if netns else []
    if hostname:     # every step execs the next: the PID is dockerd's
        enter += ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', hostname]
    with log.open("ab") as out:
        process = subprocess.Popen(
            [*enter, "dockerd", "--config-file", str(config), "--data-root", str(data_root),
             "--exec-root", str(exec_root / "exec"), "--pidfile", str(exec_root / "dockerd.pid"),
             "--host", f"unix://{socket}", "--bip", bridge_ip, "--default-address-pool", address_pool],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            # The image is loaded into each engine, from no registry: a Swarm task's start
            # would otherwise try Docker Hub first (dockerd 20.10's task controller skips
            # that pull only under this variable; --resolve-image never stops the digest look-up).
            env={**os.environ, "DOCKER_SERVICE_PREFER_OFFLINE_IMAGE": "1"})
    engine = Engine({"DOCKER_HOST": f"unix://{socket}"}, process, host_state, log, (exec_root, data_root))
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        if socket.exists() and engine.docker("version", timeout=20).returncode == 0:
            return engine
        time.sleep(0.1)
    problems = engine.stop()
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
    raise EngineUnavailable(f"dockerd did not answer within {START_TIMEOUT_S:.0f} s "
                            f"(exit {process.returncode}); restore: {problems or 'clean'}; log {log}:\n{tail}")


def start_engine(log: Path) -> Engine:
    """The machine's engine if one answers, else a dockerd started here; EngineUnavailable says why not."""
    if (engine := machine_engine()) is not None:
        return engine
    if os.geteuid() != 0:
        raise EngineUnavailable("no container engine answers and starting dockerd needs root")
    missing = [tool for tool in ("dockerd", "docker", "iptables", "nft", "docker-compose") if shutil.which(tool) is None]
    if missing:
        raise EngineUnavailable(f"no container engine answers and {', '.join(missing)} missing "
                                "(scripts/setup.sh installs docker.io, docker-compose, iptables, nftables)")
    return launch_dockerd(log, DATA_ROOT, EXEC_ROOT, host_state=HostState.read())
