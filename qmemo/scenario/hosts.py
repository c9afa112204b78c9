"""Hosts on one machine: a network namespace per node, one for the generator, one for the attacker.

Each host is a namespace with one veth whose other end sits on a bridge in the root
namespace; addresses come from a private /24 chosen for the run (one not routed here
yet). The bridge has the .254 address, so the runner itself (in the root namespace)
reaches every host to sample it. Nothing leaves the machine: the bridge has no uplink
and nothing forwards.

Beside a container engine: dockerd sets the iptables FORWARD policy to DROP, and with
bridge netfilter on (dockerd loads br_netfilter) frames between two ports of our bridge
pass that chain too, so the hosts would not reach each other. When the filter table
exists at start (an engine or a firewall made it), the runner inserts one rule at the
top of FORWARD, `-i <bridge> -o <bridge> -j ACCEPT` (traffic between our own hosts,
nothing else), and deletes it at cleanup; where there is no filter table nothing is
added, so iptables is left exactly as found. (An engine started after a run began is
not seen by that run.)

Every name carries the runner's PID (`qms<pid>...`, namespaces `qms-<pid>-<host>`), so
a sweep at start can remove what an earlier, dead runner left behind without touching a
live one's. `Hosts.close()` is the one cleanup path: it stops every process started
through it (SIGCONT first: a paused process cannot die of SIGTERM), then any process
still inside our namespaces, then deletes the forwarding rule, namespaces, veths and
the bridge. It is idempotent and never raises, so it can run from `finally`, a
signal, or twice. A sweep removes a dead runner's forwarding rule too.

Needs root and iproute2; `require_root_and_netns()` says in one line what is missing.
"""

from __future__ import annotations

import ipaddress
import os
import random
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from qmemo.errors import SetupError

PREFIX = "qms"
_NS_RE = re.compile(rf"^{PREFIX}-(\d+)-")
_LINK_RE = re.compile(rf"^{PREFIX}(\d+)(n\d+|g|a|br)(@\S+)?$")
_FORWARD_RE = re.compile(rf"^-A FORWARD -i ({PREFIX}(\d+)br) -o \1 -j ACCEPT$")
BRIDGE_HOST = 254
GENERATOR_HOST = 200
ATTACKER_HOST = 201
STOP_TIMEOUT_S = 15.0


class CommandFailed(SetupError):
    """An `ip`/`tc` command the runner needs failed (its stderr is the detail)."""

    code = "scenario_host"


def run_ip(args: list[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run one iproute2 command; a failure raises with the command and its stderr."""
    result = subprocess.run(args, capture_output=True, text=True, check=False, timeout=30)
    if check and result.returncode != 0:
        raise CommandFailed(f"`{' '.join(args)}` failed: {result.stderr.strip() or result.returncode}")
    return result


def require_root_and_netns() -> None:
    """Raise SetupError with one line saying why scenarios cannot run here."""
    if os.geteuid() != 0:
        raise SetupError("qmemo scenario needs root (network namespaces, veth, tc): run it as root")
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            raise SetupError(f"qmemo scenario needs `{tool}` (Debian package iproute2)")
    if run_ip(["ip", "netns", "list"], check=False).returncode != 0:
        raise SetupError("`ip netns` does not work here (no network-namespace support)")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def forward_rule(bridge: str) -> list[str]:
    """The FORWARD rule (iptables arguments after the chain) that lets our bridge's ports talk."""
    return ["-i", bridge, "-o", bridge, "-j", "ACCEPT"]


def _filter_rules() -> list[str] | None:
    """`iptables-save -t filter`'s lines, or None when there is no iptables or no filter table."""
    if shutil.which("iptables-save") is None:
        return None
    result = run_ip(["iptables-save", "-t", "filter"], check=False)
    lines = [line for line in result.stdout.splitlines() if line and not line.startswith("#")]
    return lines if result.returncode == 0 and lines else None


def _our_forward_rules() -> list[tuple[str, int]]:
    """(bridge, runner pid) of every forwarding rule a runner added."""
    return [(m.group(1), int(m.group(2))) for line in (_filter_rules() or []) if (m := _FORWARD_RE.match(line))]


def sweep_stale() -> list[str]:
    """Remove namespaces, links and forwarding rules of ours whose runner is dead; return what was removed."""
    removed = []
    for bridge, pid in _our_forward_rules():
        if not _pid_alive(pid):
            run_ip(["iptables", "-D", "FORWARD", *forward_rule(bridge)], check=False)
            removed.append(f"iptables FORWARD rule for {bridge}")
    for line in run_ip(["ip", "netns", "list"], check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        match = _NS_RE.match(name)
        if match and not _pid_alive(int(match.group(1))):
            _kill_namespace_processes(name)
            run_ip(["ip", "netns", "del", name], check=False)
            removed.append(f"netns {name}")
    for line in run_ip(["ip", "-o", "link", "show"], check=False).stdout.splitlines():
        parts = line.split(":")
        if len(parts) < 2:
            continue
        name = parts[1].strip()
        match = _LINK_RE.match(name)
        if match and not _pid_alive(int(match.group(1))):
            run_ip(["ip", "link", "del", name.split("@")[0]], check=False)
            removed.append(f"link {name.split('@')[0]}")
    return removed


def _kill_namespace_processes(namespace: str) -> None:
    """SIGKILL what still runs inside one of our namespaces (only ever ours: the name is ours)."""
    pids = run_ip(["ip", "netns", "pids", namespace], check=False).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGCONT)
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def choose_subnet() -> ipaddress.IPv4Network:
    """A 10.231.X.0/24 that no address or route on this machine uses yet."""
    used = run_ip(["ip", "-4", "-o", "addr", "show"], check=False).stdout
    used += run_ip(["ip", "-4", "route", "show", "table", "all"], check=False).stdout
    candidates = list(range(256))
    random.Random(os.getpid()).shuffle(candidates)
    for x in candidates:
        if f"10.231.{x}." not in used:
            return ipaddress.IPv4Network(f"10.231.{x}.0/24")
    raise SetupError("no free 10.231.X.0/24 for the scenario network")


@dataclass
class Host:
    name: str             # "node-0", "gen", "attacker"
    namespace: str
    veth: str             # the root-namespace end, on the bridge
    address: str


@dataclass
class Process:
    name: str
    popen: subprocess.Popen
    paused: bool = False


@dataclass
class Hosts:
    """The run's namespaces, bridge and processes; `close()` removes all of it."""

    subnet: ipaddress.IPv4Network
    pid: int = field(default_factory=os.getpid)
    hosts: dict[str, Host] = field(default_factory=dict)
    processes: list[Process] = field(default_factory=list)
    bridge: str = ""
    forwarding: bool = False          # our FORWARD rule is in place (to delete at close)
    closed: bool = False

    @property
    def bridge_address(self) -> str:
        return str(self.subnet.network_address + BRIDGE_HOST)

    def create(self, node_count: int) -> None:
        """The bridge, then one namespace per node, the generator's and the attacker's."""
        self.bridge = f"{PREFIX}{self.pid}br"
        run_ip(["ip", "link", "add", self.bridge, "type", "bridge"])
        run_ip(["ip", "addr", "add", f"{self.bridge_address}/24", "dev", self.bridge])
        run_ip(["ip", "link", "set", self.bridge, "up"])
        if _filter_rules() is not None:      # an engine's or a firewall's FORWARD chain may drop our frames
            self.forwarding = True           # set first: a failed insert is still tried at close
            run_ip(["iptables", "-I", "FORWARD", "1", *forward_rule(self.bridge)])
        for i in range(node_count):
            self._add_host(f"node-{i}", f"n{i}", i + 1)
        self._add_host("gen", "g", GENERATOR_HOST)
        self._add_host("attacker", "a", ATTACKER_HOST)

    def _add_host(self, name: str, tag: str, host_number: int) -> None:
        host = Host(name, f"{PREFIX}-{self.pid}-{name}", f"{PREFIX}{self.pid}{tag}",
                    str(self.subnet.network_address + host_number))
        self.hosts[name] = host          # registered first: a half-made host is cleaned up too
        run_ip(["ip", "netns", "add", host.namespace])
        run_ip(["ip", "link", "add", host.veth, "type", "veth", "peer", "name", "eth0", "netns", host.namespace])
        run_ip(["ip", "link", "set", host.veth, "master", self.bridge, "up"])
        run_ip(["ip", "-n", host.namespace, "addr", "add", f"{host.address}/24", "dev", "eth0"])
        run_ip(["ip", "-n", host.namespace, "link", "set", "eth0", "up"])
        run_ip(["ip", "-n", host.namespace, "link", "set", "lo", "up"])

    def spawn(self, host: str, name: str, command: list[str], log: Path, env: dict[str, str] | None = None) -> Process:
        """Start `command` inside `host`'s namespace (`ip netns exec` execs it: same PID)."""
        log.parent.mkdir(parents=True, exist_ok=True)
        with log.open("ab") as out:
            popen = subprocess.Popen(["ip", "netns", "exec", self.hosts[host].namespace, *command],
                                     stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
                                     start_new_session=True)   # a terminal's Ctrl-C reaches the runner only
        process = Process(name, popen)
        self.processes.append(process)
        return process

    def set_link(self, host: str, up: bool) -> None:
        run_ip(["ip", "link", "set", self.hosts[host].veth, "up" if up else "down"])

    def blackhole(self, host: str, address: str, on: bool) -> None:
        run_ip(["ip", "-n", self.hosts[host].namespace, "route", "add" if on else "del", "blackhole",
                f"{address}/32"], check=on)

    def close(self) -> list[str]:
        """Stop every process, remove every namespace and link; what went wrong, as lines."""
        if self.closed:
            return []
        self.closed = True
        problems: list[str] = []
        problems += stop_processes(self.processes)
        for host in self.hosts.values():
            _kill_namespace_processes(host.namespace)
            if run_ip(["ip", "netns", "del", host.namespace], check=False).returncode != 0:
                problems.append(f"could not delete namespace {host.namespace}")
            run_ip(["ip", "link", "del", host.veth], check=False)   # usually gone with its peer
        if self.forwarding and self.bridge in [b for b, _ in _our_forward_rules()]:
            if run_ip(["iptables", "-D", "FORWARD", *forward_rule(self.bridge)], check=False).returncode != 0:
                problems.append(f"could not delete the iptables FORWARD rule for {self.bridge}")
        if self.bridge and run_ip(["ip", "link", "del", self.bridge], check=False).returncode != 0:
            problems.append(f"could not delete bridge {self.bridge}")
        return problems


def stop_process(process: Process, timeout_s: float = STOP_TIMEOUT_S) -> list[str]:
    return stop_processes([process], timeout_s)


def stop_processes(processes: list[Process], timeout_s: float = STOP_TIMEOUT_S) -> list[str]:
    """SIGCONT + SIGTERM to each (by PID), wait for all together, then SIGKILL (reported) what is left."""
    alive = [p for p in processes if p.popen.poll() is None]
    for process in alive:
        try:
            process.popen.send_signal(signal.SIGCONT)    # a stopped process would never act on SIGTERM
            process.popen.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout_s
    while any(p.popen.poll() is None for p in alive) and time.monotonic() < deadline:
        time.sleep(0.05)
    problems = []
    for process in alive:
        if process.popen.poll() is None:
            process.popen.kill()
            process.popen.wait(timeout=10)
            problems.append(f"{process.name} (pid {process.popen.pid}) did not stop in {timeout_s:.0f} s; killed")
    return problems


def leftovers(pid: int) -> list[str]:
    """Namespaces, links and forwarding rules of runner `pid` that still exist (for tests: should be none)."""
    found = [line.split()[0] for line in run_ip(["ip", "netns", "list"], check=False).stdout.splitlines()
             if line.startswith(f"{PREFIX}-{pid}-")]
    for line in run_ip(["ip", "-o", "link", "show"], check=False).stdout.splitlines():
        parts = line.split(":")
        if len(parts) > 1 and (m := _LINK_RE.match(parts[1].strip())) and int(m.group(1)) == pid:
            found.append(parts[1].strip())
    found += [f"iptables FORWARD rule for {bridge}" for bridge, owner in _our_forward_rules() if owner == pid]
    return found
