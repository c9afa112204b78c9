"""The nodes' stage costs over a generator run: `node-stages.json` in the run folder.

A node's `/metrics` carries its CPU per stage since it started (`stages`, docs/api.md
"Stage costs"). The generator reads every node's figures when a run starts and when it
ends, and keeps the difference: the CPU each stage of each node spent during the run
(drain included: the blocks that commit the run's transactions), and the transactions
the node admitted in it (a client's and the relayed ones). `qmemo report` reads the file
with the same dataclasses (qmemo.analysis.report_stages): one schema, qmemo.records.

Schema "qmemo-node-stages/1":

    {"schema": ..., "nodes": [{"url", "node", "scheme", "verifier", "admitted",
      "process_cpu_s", "cpu_s": {stage: s, ..., "other": s}, "txs": {stage: n, ...},
      "overrun_cpu_s", "span_s", "event_loop" (each absent in files written before it)}],
     "cores" (absent in files written before it)}

The verify stage's share of the machine's CPU (the project's P5 figure, kept in the files
as `survival`, its first name; the headline's survival against C is another figure,
qmemo.analysis.headline): the verifies the nodes did per
second per core of the machine, over the verify rate one core reaches in the same run
- the nodes' own `verify` stage (CPU per verify, executor jobs included: the pool's
hand-off is part of what a node pays per signature). It is the share of the machine's
CPU that went into the verify stage; what the rest of the node costs is what the ratio
loses. A second ratio counts only the verifies the chain needed: each committed
transaction once on every node (`committed_ratio`); re-verifies (a relay that lost the
race with its block, a branch switch) and rejected transactions fall out of it. Below
saturation both are low by construction (the cores idle part of the time, and a shared
machine's other work is in no node): `node_share`, the verify stage's share of the
nodes' own CPU, is what survives of the CPU the nodes did use.

A node that did not answer, or restarted during the run, is left out. The documents are
the node's own `MetricsSnapshot` (qmemo.api_schema), read by the node client. Nothing
here reads a clock or the network: the generator fetches the /metrics documents
(qmemo.load.run), so `qmemo report` reading this schema imports no HTTP client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from qmemo.api_schema import MetricsSnapshot
from qmemo.node.stages import OTHER, STAGES, VERIFY
from qmemo.records import OMIT_NONE, read_record, write_record

NODE_STAGES_SCHEMA = "qmemo-node-stages/1"
NODE_STAGES_FILE = "node-stages.json"
VERIFY_STAGE = STAGES[VERIFY]


@dataclass(frozen=True, slots=True)
class NodeStageCosts:
    """One node's CPU by stage over one run."""

    url: str
    node: str
    scheme: str
    verifier: str | None
    admitted: int                 # transactions admitted during the run
    process_cpu_s: float          # the process's CPU during the run
    cpu_s: dict[str, float]       # by stage, "other" last: they add up to process_cpu_s + overrun_cpu_s
    txs: dict[str, int]           # transactions each stage handled during the run
    # How far the stages' CPU exceeds the process's over the run ("other" is then 0). A pool
    # job in flight at the first reading is in its process CPU but counts whole in the stages
    # at the end, so up to one such job per thread shows here; more means double counting.
    # None (no key) in a file written before it was kept.
    overrun_cpu_s: float | None = field(default=None, metadata=OMIT_NONE)
    # Wall seconds between the two readings (the node's uptime_s); None in older files.
    span_s: float | None = field(default=None, metadata=OMIT_NONE)
    # The node's event loop ("uvloop" or "asyncio", /metrics process.event_loop); None in older files.
    event_loop: str | None = field(default=None, metadata=OMIT_NONE)

    def us_per_tx(self) -> dict[str, float] | None:
        """CPU µs per admitted transaction by stage (None if it admitted nothing)."""
        if self.admitted <= 0:
            return None
        return {stage: seconds / self.admitted * 1e6 for stage, seconds in self.cpu_s.items()}


@dataclass(frozen=True, slots=True)
class NodeStagesFile:
    schema: str
    nodes: tuple[NodeStageCosts, ...]
    # The machine's logical CPUs the nodes (and the generator) ran on; None in older files.
    cores: int | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True, slots=True)
class Survival:
    """The verify stage's share of the machine's CPU for one run: the verify work the nodes
    did per core-second, over the same run's verify rate per core (the nodes' own verify
    stage). See the module docstring."""

    nodes: int
    cores: int
    verifier: str | None          # the nodes' Falcon verifier ("fast": variable-time; "liboqs": constant-time)
    span_s: float                 # the nodes' mean wall span between the two readings
    verifies: int                 # signatures the nodes verified in it (admission and blocks)
    verify_cpu_s: float           # the CPU their verify stage took for them
    verify_us: float              # verify CPU per verify: the same-run cost of one
    verifies_per_core_s: float    # verifies / span / cores
    ratio: float                  # verifies_per_core_s / (1e6 / verify_us)
    committed_ratio: float | None  # the same with committed_tps * nodes as the verifies (None: not given)
    # The verify stage's share of the nodes' own CPU: what survives of the CPU they used, which
    # (unlike `ratio`) neither idle cores below saturation nor other work on the machine lowers.
    node_share: float | None = field(default=None, metadata=OMIT_NONE)


def survival(costs: NodeStagesFile, committed_tps: float | None = None) -> Survival | None:
    """The run's survival ratio, None where the file cannot give it (an older file without
    spans or cores, no verify done)."""
    nodes = costs.nodes
    spans = [node.span_s for node in nodes]
    verifies = sum(node.txs.get(VERIFY_STAGE, 0) for node in nodes)
    verify_cpu_s = sum(node.cpu_s.get(VERIFY_STAGE, 0.0) for node in nodes)
    if not nodes or not costs.cores or None in spans or verifies <= 0 or verify_cpu_s <= 0:
        return None
    span_s = sum(spans) / len(spans)     # type: ignore[arg-type]
    if span_s <= 0:
        return None
    verify_us = verify_cpu_s / verifies * 1e6
    per_core_s = verifies / span_s / costs.cores
    verifiers = {node.verifier for node in nodes}
    committed = None if committed_tps is None else committed_tps * len(nodes) / costs.cores * verify_us / 1e6
    node_cpu_s = sum(node.process_cpu_s for node in nodes)
    return Survival(len(nodes), costs.cores, verifiers.pop() if len(verifiers) == 1 else "mixed", span_s, verifies,
                    verify_cpu_s, verify_us, per_core_s, per_core_s * verify_us / 1e6, committed,
                    verify_cpu_s / node_cpu_s if node_cpu_s > 0 else None)


def run_costs(url: str, before: MetricsSnapshot, after: MetricsSnapshot) -> NodeStageCosts | None:
    """A node's costs between two of its /metrics documents (None across a restart:
    counters that went back)."""
    b_stages, a_stages = before.stages.by_stage, after.stages.by_stage
    names = [name for name in a_stages if name != OTHER]
    if any(name not in b_stages for name in names):      # two nodes' readings, or a node of other stages
        return None
    cpu = {name: a_stages[name].cpu_s - b_stages[name].cpu_s for name in names}
    txs = {name: a_stages[name].txs - b_stages[name].txs for name in names}
    process = after.stages.process_cpu_s - before.stages.process_cpu_s
    admitted = after.tx.accepted - before.tx.accepted
    span_s = after.uptime_s - before.uptime_s
    if process < 0 or admitted < 0 or span_s < 0 or any(v < 0 for v in cpu.values()):
        return None
    # Read a moment apart, two differences may not nest exactly: "other" never below zero,
    # and what the stages hold beyond the process's CPU is kept, not hidden.
    accounted = sum(cpu.values())
    cpu[OTHER] = max(0.0, process - accounted)
    return NodeStageCosts(url, after.node, after.scheme, after.verify.verifier, admitted, process, cpu, txs,
                          max(0.0, accounted - process), span_s, after.process.event_loop)


def costs_file(urls: Sequence[str], before: Mapping[str, MetricsSnapshot | None],
               after: Mapping[str, MetricsSnapshot | None], cores: int | None = None) -> NodeStagesFile:
    """Every node's costs between the `before` and `after` /metrics documents (by URL; None:
    the node did not answer), on a machine of `cores` logical CPUs."""
    nodes = [run_costs(url, start, end) for url in urls
             if (start := before.get(url)) is not None and (end := after.get(url)) is not None]
    return NodeStagesFile(NODE_STAGES_SCHEMA, tuple(node for node in nodes if node is not None), cores)


def write_node_stages(path: Path, record: NodeStagesFile) -> None:
    write_record(path, record)


def read_node_stages(path: Path) -> NodeStagesFile:
    return read_record(NodeStagesFile, NODE_STAGES_SCHEMA, path, "a node stage-costs file")
