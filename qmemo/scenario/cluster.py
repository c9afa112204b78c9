"""The running devnet inside the namespaces, and the perturbations done to it.

`Cluster` starts each node in its namespace with the same command every time (so a
restart is the same node on the same data), and carries out one perturbation at a
time: `perturb()` acts now and returns the follow-up (resume, restart, reconnect, heal)
with the time it is due, which the runner's timeline then executes. Every action is a
line in `timeline.jsonl` with the time it actually happened.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from qmemo.errors import NodeApiError
from qmemo.net.client import base_url, open_clients
from qmemo.scenario import links, relay
from qmemo.scenario.argv import NODE_PORT, node_arguments, node_peers, node_shard
from qmemo.scenario.hosts import Hosts, Process, stop_process
from qmemo.scenario.manifest import Manifest, Perturbation
from qmemo.scenario.observe import SAMPLE_TIMEOUT_S


@dataclass
class FollowUp:
    at_s: float
    what: str
    run: Callable[[], None]


@dataclass
class Cluster:
    manifest: Manifest
    hosts: Hosts
    devnet: Path
    run_dir: Path
    links_backend: str = "netem"         # or "relay": delays by qmemo.scenario.relay, peers via 127.0.0.1
    t0: float = 0.0                      # wall time of the load's start (the timeline's zero)
    nodes: dict[int, Process] = field(default_factory=dict)
    relays: dict[int, Process] = field(default_factory=dict)
    overrides: dict[frozenset[str], str] = field(default_factory=dict)

    def url(self, i: int) -> str:
        return base_url(self.hosts.hosts[f'node-{i}'].address, NODE_PORT)

    @property
    def urls(self) -> dict[str, str]:
        return {f"node-{i}": self.url(i) for i in range(self.manifest.network.nodes)}

    def peer_url(self, i: int, j: int) -> str:
        """How node i reaches node j: directly, or through its relay."""
        return base_url("127.0.0.1", relay.listen_port(j)) if self.links_backend == "relay" else self.url(j)

    def start_relay(self, i: int) -> None:
        """Node i's relay to every peer, with the one-way delay of the current profile between their zones."""
        network = self.manifest.network
        specs = []
        for j in range(network.nodes):
            if j != i:
                profile = self.manifest.profiles[network.profile_between(network.zones[i], network.zones[j],
                                                                         self.overrides)]
                specs += ["--peer", f"{j}={self.hosts.hosts[f'node-{j}'].address}:{NODE_PORT}:"
                                    f"{profile.delay_ms:g}:{profile.jitter_ms:g}"]
        self.relays[i] = self.hosts.spawn(f"node-{i}", f"relay-{i}", [sys.executable, "-m", "qmemo.scenario.relay",
                                                                      *specs],
                                          self.run_dir / "logs" / f"relay-{i}.log")

    def start_node(self, i: int) -> None:
        network = self.manifest.network
        same, others = node_peers(network, i)     # a sharded devnet: peers in its shard, receipts from the others
        command = [str(Path(sys.executable).parent / "qmemo"),
                   *node_arguments(i, str(self.devnet), str(self.devnet / f"data/node-{i}"),
                                   self.hosts.hosts[f"node-{i}"].address, [self.peer_url(i, j) for j in same],
                                   verify_threads=1, shard=node_shard(network, i),
                                   shard_peers=[self.url(j) for j in others])]
        self.nodes[i] = self.hosts.spawn(f"node-{i}", f"node-{i}", command, self.run_dir / "logs" / f"node-{i}.log")

    def healthy(self, i: int) -> bool:
        return asyncio.run(_ready(self.url(i)))

    def record(self, what: str, **details: object) -> None:
        line = {"t_s": round(time.time() - self.t0, 3) if self.t0 else None, "time_s": time.time(),
                "what": what, **details}
        with (self.run_dir / "timeline.jsonl").open("ab") as out:
            out.write(orjson.dumps(line) + b"\n")

    # --- perturbations ----------------------------------------------------------------------

    def next_producer(self, shard: int = 0) -> int:
        """The node of the primary producer of `shard`'s next block, from the first of its nodes that answers."""
        network = self.manifest.network
        members = network.shard_nodes(shard)
        for i in members:
            height = asyncio.run(_height(self.url(i)))
            if height is not None:
                return members[height % network.per_shard]   # block h+1: validator h mod n
        return members[0]

    @property
    def shard_urls(self) -> list[dict[str, str]]:
        """Each shard's nodes, by name: every shard keeps its own chain and tip."""
        network = self.manifest.network
        return [{f"node-{i}": self.url(i) for i in network.shard_nodes(k)} for k in range(network.shards)]

    def perturb(self, p: Perturbation) -> list[FollowUp]:
        nodes = (self.next_producer(p.shard),) if p.producer else p.nodes
        end = p.end_s
        if p.action == "kill":
            for i in nodes:
                self.nodes[i].popen.kill()
                self.nodes[i].popen.wait(timeout=10)
            self.record("kill -9", nodes=list(nodes), restart_at_s=end)
            return [FollowUp(end, f"restart {list(nodes)}", lambda: self._restart(nodes))]
        if p.action == "restart":
            for i in nodes:
                problems = stop_process(self.nodes[i])
                self.record("clean stop", node=i, exit=self.nodes[i].popen.returncode, problems=problems)
            return [FollowUp(end, f"restart {list(nodes)}", lambda: self._restart(nodes))]
        if p.action == "pause":
            for i in nodes:
                self.nodes[i].popen.send_signal(signal.SIGSTOP)
                self.nodes[i].paused = True
            self.record("SIGSTOP", nodes=list(nodes))
            return [FollowUp(end, f"SIGCONT {list(nodes)}", lambda: self._resume(nodes))]
        if p.action == "disconnect":
            for i in nodes:
                self.hosts.set_link(f"node-{i}", up=False)
            self.record("link down", nodes=list(nodes))
            return [FollowUp(end, f"link up {list(nodes)}", lambda: self._reconnect(nodes))]
        if p.action == "partition":
            self._partition(p.groups, on=True)
            self.record("partition", groups=[list(g) for g in p.groups])
            return [FollowUp(end, "heal", lambda: self._partition(p.groups, on=False))]
        if p.action == "profile":
            if p.zones is None or p.profile is None:      # the parser never lets this through
                return []
            self.overrides[frozenset(p.zones)] = p.profile
            links.apply(self.hosts, self.manifest.network, self.manifest.profiles, self.overrides,
                        netem=self.links_backend == "netem")
            if self.links_backend == "relay":      # new delays: new relays (open connections are cut)
                for i in range(self.manifest.network.nodes):
                    stop_process(self.relays[i])
                    self.start_relay(i)
            self.record("link profile", zones=list(p.zones), profile=p.profile)
            return []
        return []          # floods run as their own processes (runner.start_floods)

    def _restart(self, nodes: tuple[int, ...]) -> None:
        for i in nodes:
            self.start_node(i)
        self.record("restart", nodes=list(nodes))

    def _resume(self, nodes: tuple[int, ...]) -> None:
        for i in nodes:
            self.nodes[i].popen.send_signal(signal.SIGCONT)
            self.nodes[i].paused = False
        self.record("SIGCONT", nodes=list(nodes))

    def _reconnect(self, nodes: tuple[int, ...]) -> None:
        for i in nodes:
            self.hosts.set_link(f"node-{i}", up=True)
        self.record("link up", nodes=list(nodes))

    def _partition(self, groups: tuple[tuple[int, ...], ...], on: bool) -> None:
        """Blackhole routes between nodes of different groups (the generator still reaches all)."""
        for group in groups:
            for i in group:
                for j in range(self.manifest.network.nodes):
                    if j not in group:
                        self.hosts.blackhole(f"node-{i}", self.hosts.hosts[f"node-{j}"].address, on)
        if not on:
            self.record("heal", groups=[list(g) for g in groups])


async def _ready(url: str) -> bool:
    async with open_clients([url], SAMPLE_TIMEOUT_S) as (client,):
        try:
            return (await client.health()).ready
        except NodeApiError:
            return False


async def _height(url: str) -> int | None:
    async with open_clients([url], timeout_s=2.0) as (client,):
        try:
            return (await client.status()).height
        except NodeApiError:
            return None
