"""The report's first screen for a sharded devnet run: MEMO's conservative scenario, measured.

The research models the conservative scenario (10,000 TPS over 4 shards, 20% cross-shard)
as a verify load of 3,000 signatures per second per shard, and sets one C core against it.
For each sharded run given to `qmemo report --devnet` this screen puts beside that model
what the run measured, shard by shard:

- the verifies per second each of the shard's nodes carried: its committed TPS times the
  signatures its nodes verified per committed transaction (both `summary.json`'s
  `shards[i]`), and that as a share of the modelled need;
- the CPU per admitted transaction by stage, the shard's nodes pooled (`node-stages.json`,
  qmemo.analysis.report_stages.pooled: each stage's CPU summed over the nodes, over their
  admitted transactions summed);
- the headroom against the modelled need on one core, twice: at the CPU the nodes' verify
  stage spent per verify (the research's question, asked of the nodes), and at the CPU the
  whole node process spent per verify (everything else a node does included).

The model itself is computed (qmemo.analysis.headroom from qmemo.analysis.memo) and cited to
the research's table (memo.CONSERVATIVE_MODEL_SOURCE); every measured figure names its file
and key. Pure apart from `load_sharded_headlines`, which reads the run folders.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from qmemo.analysis.devnet import DevnetRun, command_file
from qmemo.analysis.headline import Cited
from qmemo.analysis.headroom import required_verify_rate, verdict
from qmemo.analysis.markdown import headroom_x, num, percent, table
from qmemo.analysis.memo import CONSERVATIVE_MODEL_SOURCE, CONSERVATIVE_SHARDS, CONSERVATIVE_TPS, CROSS_SHARD_SHARE
from qmemo.analysis.report_stages import COLUMNS, StageCostRow, load_stage_costs, pooled
from qmemo.analysis.results import display_path
from qmemo.load.node_stages import VERIFY_STAGE, NodeStagesFile

MODEL_CODE = "qmemo/analysis/headroom.py `required_verify_rate` on qmemo/analysis/memo.py"


def modelled_need() -> float:
    """The research's verify load per shard in MEMO's conservative scenario with its cross-shard share."""
    return required_verify_rate(CONSERVATIVE_TPS, CONSERVATIVE_SHARDS, CROSS_SHARD_SHARE)


@dataclass(frozen=True, slots=True)
class ShardFigures:
    """One shard's first-screen figures: read from summary.json's `shards[index]` and the
    shard's nodes in node-stages.json (`nodes`: their positions there)."""

    index: int                          # the position in summary.json's `shards`
    shard: int
    committed_tps: Cited
    verifies_per_tx: Cited | None       # None: the run's nodes gave no verify counts
    nodes: tuple[int, ...] = ()
    stages: StageCostRow | None = None  # µs of CPU per admitted transaction by stage, the nodes pooled
    verifies: int = 0                   # signatures the nodes' verify stage checked over the run
    verify_cpu_s: float = 0.0           # what that stage spent on them
    process_cpu_s: float = 0.0          # what the node processes spent in all

    @property
    def verifies_per_s(self) -> float | None:
        """Verifies per second on each of the shard's nodes, in the run's measured window."""
        if self.verifies_per_tx is None:
            return None
        return float(self.committed_tps.value) * float(self.verifies_per_tx.value)

    @property
    def verify_us(self) -> float | None:
        """The nodes' verify stage's CPU per verify (µs)."""
        return self.verify_cpu_s / self.verifies * 1e6 if self.verifies and self.verify_cpu_s > 0 else None

    @property
    def node_us(self) -> float | None:
        """The node processes' whole CPU per verify (µs): every stage, the event loop and all."""
        return self.process_cpu_s / self.verifies * 1e6 if self.verifies and self.process_cpu_s > 0 else None


@dataclass(frozen=True, slots=True)
class ShardedHeadline:
    run: DevnetRun
    need: float                         # modelled verifies/s per shard
    offered_tps: Cited
    committed_tps: Cited
    cross_share: float | None           # cross_shard.planned / counts.planned of summary.json
    shards: tuple[ShardFigures, ...]
    stages_source: Path | None          # node-stages.json, None when the folder has none
    command: str | None = None          # devnet.sh's command line, as typed
    command_source: Path | None = None

    @property
    def is_conservative(self) -> bool:
        """Whether the run was offered MEMO's conservative load (its TPS over its shards)."""
        return (float(self.offered_tps.value) == CONSERVATIVE_TPS and len(self.shards) == CONSERVATIVE_SHARDS
                and self.cross_share is not None and abs(self.cross_share - CROSS_SHARD_SHARE) < 0.02)


def sharded_headline(run: DevnetRun, costs: NodeStagesFile | None, costs_source: Path | None,
                     command: str | None = None, command_source: Path | None = None) -> ShardedHeadline:
    """A sharded run's first-screen figures from its summary (`run`), its node-stages file
    (`costs`, read from `costs_source`) and devnet.sh's command line."""
    source = run.source
    nodes_at = {node.url: i for i, node in enumerate(costs.nodes)} if costs is not None else {}
    shards = []
    for index, counts in enumerate(run.shards):
        mine = tuple(nodes_at[url] for url in counts.nodes if url in nodes_at)
        members = [costs.nodes[i] for i in mine] if costs is not None else []
        shards.append(ShardFigures(
            index=index, shard=counts.shard,
            committed_tps=Cited(counts.committed_tps, source, ("shards", index, "committed_tps")),
            verifies_per_tx=None if counts.verifies_per_committed_tx is None else
            Cited(counts.verifies_per_committed_tx, source, ("shards", index, "verifies_per_committed_tx")),
            nodes=mine, stages=pooled(f"shard {counts.shard}", members, None) if members else None,
            verifies=sum(node.txs.get(VERIFY_STAGE, 0) for node in members),
            verify_cpu_s=sum(node.cpu_s.get(VERIFY_STAGE, 0.0) for node in members),
            process_cpu_s=sum(node.process_cpu_s for node in members)))
    planned = run.counts.get("planned", 0)
    cross_share = run.cross_shard.planned / planned if run.cross_shard is not None and planned else None
    return ShardedHeadline(run, modelled_need(), Cited(run.target_tps, source, ("target_tps",)),
                           Cited(run.committed_tps, source, ("committed_tps",)), cross_share, tuple(shards),
                           costs_source if costs is not None else None, command, command_source)


def load_sharded_headlines(runs: Sequence[DevnetRun]) -> list[ShardedHeadline]:
    """The first-screen figures of each sharded run, with the node-stages.json beside its
    summary and devnet.sh's `command` of its folder."""
    out = []
    for run in runs:
        if not run.shards:
            continue
        path, costs = load_stage_costs(run)
        command_path = command_file(run)
        command = (command_path.read_text().strip() or None) if command_path is not None else None
        out.append(sharded_headline(run, costs, path, command, command_path))
    return out


# --- the screen ---------------------------------------------------------------------------

def _range(values: Sequence[float | None], shown: Callable[[float], str]) -> str:
    """"low-high" of the values as shown (one figure where both show alike; "-" for none)."""
    present = [v for v in values if v is not None]
    if not present:
        return "-"
    low, high = shown(min(present)), shown(max(present))
    return low if low == high else f"{low}-{high}"


def _headroom(rate_per_s: float | None, need: float) -> str:
    if rate_per_s is None:
        return "-"
    x = rate_per_s / need
    return f"{headroom_x(x)} {verdict(x)}"


def summary_line(line: ShardedHeadline) -> str:
    """The bold sentence the run's screen opens with."""
    need = line.need
    per_s = [s.verifies_per_s for s in line.shards]
    shares = [v / need if v is not None else None for v in per_s]
    verify = [1e6 / s.verify_us / need if s.verify_us else None for s in line.shards]
    node = [1e6 / s.node_us / need if s.node_us else None for s in line.shards]
    text = (f"**Run `{line.run.run_id}`, {len(line.shards)} shards: {num(float(line.committed_tps.value), 1)} TPS "
            f"committed of {num(float(line.offered_tps.value))} offered; a shard's nodes verified "
            f"{_range(per_s, num)} signatures/s each, {_range(shares, lambda v: percent(v, 0))} of the research's "
            f"modelled {num(need)}/s per shard")
    if any(v is not None for v in verify):
        text += (f"; on one core their verify stage covers that model {_range(verify, headroom_x)} over, a whole "
                 f"node {_range(node, headroom_x)}")
    return text + ".**"


def scenario_note(line: ShardedHeadline) -> str:
    """What the run was, and what the model is."""
    command = (f"Command: `{line.command}` (`{display_path(line.command_source)}`)."
               if line.command and line.command_source else "")
    share = percent(line.cross_share, 0) if line.cross_share is not None else "-"
    offered = (f"{num(float(line.offered_tps.value))} TPS over {len(line.shards)} shards with {share} of transfers "
               f"planned cross-shard (`{display_path(line.offered_tps.source)}` `target_tps`, `shards`, "
               "`cross_shard.planned` / `counts.planned`)")
    if line.is_conservative:
        offered = f"The run was offered MEMO's conservative load: {offered}."
    else:
        offered = (f"**Not MEMO's conservative load**: this run was offered {offered}; "
                   f"`./devnet.sh --scenario memo-conservative` offers {num(CONSERVATIVE_TPS)} over "
                   f"{CONSERVATIVE_SHARDS}. Its measured figures are set against the same per-shard model.")
    counts, checks = line.run.counts, line.run.invariants
    outcome = (f"Of {num(counts.get('planned'))} planned: {num(counts.get('committed'))} final, "
               f"{num(counts.get('rejected'))} refused, {num(counts.get('lost'))} lost"
               + (f"; supply conserved and every transfer credited once: **{'yes' if checks.hold else 'NO'}**"
                  if checks is not None else "")
               + (f"; limited by: {line.run.why}" if line.run.why else "")
               + f" (`{display_path(line.run.source)}` `counts`, `invariants`, `why`).")
    offered = f"{offered} {outcome}"
    model = (f"**The model**: {num(CONSERVATIVE_TPS)} TPS / {CONSERVATIVE_SHARDS} shards x (1 + "
             f"{percent(CROSS_SHARD_SHARE, 0)} cross-shard) = **{num(line.need)} verifies/s per shard**: "
             f"{CONSERVATIVE_MODEL_SOURCE}; computed by {MODEL_CODE}.")
    return "\n\n".join(part for part in (command, offered, model) if part)


def _nodes(positions: Sequence[int]) -> str:
    """`nodes[3-5]` for a run of positions, else each one."""
    if not positions:
        return "-"
    if list(positions) == list(range(positions[0], positions[0] + len(positions))) and len(positions) > 1:
        return f"`nodes[{positions[0]}-{positions[-1]}]`"
    return ", ".join(f"`nodes[{i}]`" for i in positions)


def verifies_table(line: ShardedHeadline) -> str:
    """Per shard: the verify load measured, its share of the model, and the headroom on one core."""
    rows = []
    for s in line.shards:
        per_s = s.verifies_per_s
        rows.append((
            str(s.shard), num(float(s.committed_tps.value), 1),
            num(float(s.verifies_per_tx.value), 3) if s.verifies_per_tx else "-",
            f"**{num(per_s, 1)}**" if per_s is not None else "-",
            percent(per_s / line.need) if per_s is not None else "-",
            num(s.verify_us, 1), _headroom(1e6 / s.verify_us if s.verify_us else None, line.need),
            num(s.node_us, 1), _headroom(1e6 / s.node_us if s.node_us else None, line.need),
            f"`shards[{s.index}]`; {_nodes(s.nodes)}"))
    summary = display_path(line.run.source)
    stages = (f"`{display_path(line.stages_source)}` (the shard's `nodes[j]`: µs per verify = `cpu_s.verify` / "
              "`txs.verify`, and for the whole node `process_cpu_s` / `txs.verify`, each summed over them)"
              if line.stages_source else "no node-stages.json: no CPU figures")
    return "\n\n".join([
        table(("shard", "committed TPS", "verifies / committed tx", "verifies/s per node (measured)",
               f"of the modelled {num(line.need)}/s", "verify stage µs per verify",
               "headroom, verify stage on 1 core", "whole node µs per verify", "headroom, whole node on 1 core",
               "read from"), rows, "lrrrrrlrll"),
        f"_Read from: `{summary}` (the shard's `shards[i]`: `committed_tps`, `verifies_per_committed_tx`); "
        f"{stages}._"])


def stages_table(line: ShardedHeadline) -> str:
    """Per shard: µs of CPU per admitted transaction, stage by stage, the shard's nodes pooled."""
    if line.stages_source is None:
        return (f"No `node-stages.json` beside `{display_path(line.run.source)}`: no stage costs "
                "(a run folder from before the generator kept them, or its nodes did not answer).")
    source = display_path(line.stages_source)
    rows = [(str(s.shard), num(s.stages.admitted), *(num(s.stages.us_per_tx[c], 1) for c in COLUMNS),
             f"**{num(s.stages.total_us, 1)}**", _nodes(s.nodes))
            for s in line.shards if s.stages is not None]
    return "\n\n".join([
        table(("shard", "admitted", *COLUMNS, "total", "read from"), rows, "l" + "r" * (len(COLUMNS) + 2) + "l"),
        f"_Read from: `{source}` (the shard's `nodes[j]`: each stage's `cpu_s` summed over them / their "
        "`admitted` summed)._"])


def sharded_block(line: ShardedHeadline) -> str:
    return "\n\n".join([
        summary_line(line),
        scenario_note(line),
        verifies_table(line),
        "Verifies/s per node = committed TPS x verifies per committed transaction (transactions and receipts "
        "the nodes' verify pools checked, mean over the shard's nodes). Headroom = the verifies one core gives "
        f"at that CPU per verify / the modelled {num(line.need)}/s (meets at >= 2x, tight from 1x, short below); "
        "the whole node's CPU per verify holds its fixed costs too, which weigh more at a low offered rate.",
        "**CPU per admitted transaction by stage** (µs; each shard's nodes pooled, over the run from its start "
        "to its drain):",
        stages_table(line),
    ])
