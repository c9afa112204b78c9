"""The invariants a scenario must keep, evaluated on what the run recorded.

Each check is a pure function of recorded data returning an `InvariantResult` with its
figures, so a recorded run can be judged again and every rule is unit-tested on small
hand-made records. `evaluate()` loads a run folder (the files the runner wrote, see
docs/scenarios.md) and applies every check the manifest calls for.

Never loosen a check to make a scenario pass: a failing invariant is the finding.
"""

from __future__ import annotations

import csv
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from qmemo.api_schema import ProcessFigures, decode_metrics
from qmemo.devnet.growth import FLAT, FLAT_RULE, node_summary
from qmemo.errors import ConfigError
from qmemo.scenario.manifest import Manifest
from qmemo.scenario.verdict import InvariantResult

EXAMPLES = 5   # ids or heights quoted in a failed check's figures
MIB = 2**20

# resources_flat: which samples of a process life are judged, and when there are enough.
# A node (re)started under load fills its mempool, caches and connections for a minute or
# more before its RSS levels out; before the load it idles, and the load's start is a step,
# not a leak. So a life is judged only on what was sampled while the load ran, from
# LIFE_WARMUP_S after the later of its start and the load's; the soak's rule then leaves
# out the first fifth of those as well.
LIFE_WARMUP_S = 120.0
MIN_JUDGED_S = 60.0             # a shorter window fits a slope to one mempool swing
MIN_JUDGED_SAMPLES = 10
RESOURCES_RULE = (f"every process life of every node (one pid and start time), its anonymous resident memory "
                  f"(the whole resident set for a node that does not report it) and open fds, on its samples taken "
                  f"while the load "
                  f"ran, from {LIFE_WARMUP_S:g} s after the later of the life's start and the load's; judged when "
                  f"those span at least {MIN_JUDGED_S:g} s in {MIN_JUDGED_SAMPLES} samples or more, by the soak's "
                  f"rule ({FLAT_RULE}); at least one life must be judged")


@dataclass(frozen=True, slots=True)
class TxRecord:
    """One generator transaction, as transactions.csv has it (times in s from the load's start)."""

    id: str
    intended_s: float
    accepted: bool
    committed_s: float | None


# --- the checks --------------------------------------------------------------------------

def same_tip(tips: Mapping[str, tuple[int, str] | None]) -> InvariantResult:
    """All nodes answer, on the same (height, tip hash)."""
    down = sorted(node for node, tip in tips.items() if tip is None)
    distinct = {tip for tip in tips.values() if tip is not None}
    passed = not down and len(distinct) == 1
    figures = {"tips": {node: (list(tip) if tip else None) for node, tip in sorted(tips.items())}, "down": down}
    if passed:
        height, tip_hash = next(iter(distinct))
        detail = f"all {len(tips)} nodes at height {height}, tip {tip_hash[:16]}.."
    elif down:
        detail = f"{', '.join(down)} did not answer"
    else:
        detail = f"{len(distinct)} different tips: " + ", ".join(f"{h}/{t[:12]}.." for h, t in sorted(distinct))
    return InvariantResult("same_tip", passed, detail, figures)


def same_tip_per_shard(tips: Mapping[str, tuple[int, str] | None], groups: list[list[str]]) -> InvariantResult:
    """A sharded devnet: within each shard, all nodes answer on the same (height, tip hash)."""
    parts = [same_tip({node: tips.get(node) for node in group}) for group in groups]
    detail = "; ".join(f"shard {k}: {part.detail}" for k, part in enumerate(parts))
    return InvariantResult("same_tip", all(part.passed for part in parts), detail,
                           {f"shard-{k}": part.figures for k, part in enumerate(parts)})


def sharded_transfers(summary: Mapping[str, Any]) -> InvariantResult:
    """A sharded devnet: the generator's invariants from every shard's final state - supply
    conserved, every debited cross-shard transfer credited exactly once (qmemo.load.shard_summary)."""
    checks = summary.get("invariants") or {}
    cross = summary.get("cross_shard") or {}
    passed = bool(checks.get("supply_conserved")) and bool(checks.get("credited_exactly_once")) and \
        cross.get("lost", 1) == 0
    detail = (f"{cross.get('credited', 0):,} of {cross.get('committed', 0):,} debited cross-shard transfers credited, "
              f"{cross.get('lost', '?')} lost; supply conserved: {checks.get('supply_conserved')}, credited exactly "
              f"once: {checks.get('credited_exactly_once')} ({checks.get('accounts_off', '?')} accounts off); "
              f"intended -> credited p99 {cross.get('p99_ms_intended_to_credited')} ms")
    return InvariantResult("cross_shard", passed, detail, {"invariants": checks, "cross_shard": cross})


def accepted_once(transactions: Iterable[TxRecord], chain_ids: Counter[str],
                  evictions: Mapping[str, str | None],
                  missing_status: Mapping[str, int] | None = None) -> InvariantResult:
    """Every accepted transaction is in the chain exactly once, or its node reports it evicted with a reason.

    `evictions` maps an accepted id missing from the chain to the reason `GET /tx/<id>`
    gave (None when no node reported it evicted); `missing_status` counts, for the rest,
    what the nodes said instead (held, pending, unknown, no answer), for the figures.
    """
    accepted = [tx for tx in transactions if tx.accepted]
    once = sum(1 for tx in accepted if chain_ids.get(tx.id, 0) == 1)
    repeated = sorted(tx_id for tx_id, count in chain_ids.items() if count > 1)
    absent = [tx.id for tx in accepted if chain_ids.get(tx.id, 0) == 0]
    evicted = Counter(evictions.get(tx_id) for tx_id in absent if evictions.get(tx_id))
    unexplained = [tx_id for tx_id in absent if not evictions.get(tx_id)]
    passed = not repeated and not unexplained
    figures = {"accepted": len(accepted), "committed_once": once, "in_chain_more_than_once": len(repeated),
               "evicted": dict(evicted), "missing_without_reason": len(unexplained),
               "missing_by_node_status": dict(missing_status or {}),
               "examples_missing": unexplained[:EXAMPLES], "examples_repeated": repeated[:EXAMPLES]}
    detail = (f"{once:,} of {len(accepted):,} accepted committed once, {sum(evicted.values()):,} evicted with a "
              f"reason, {len(unexplained):,} missing without one, {len(repeated):,} in the chain twice or more")
    return InvariantResult("accepted_committed_once", passed, detail, figures)


def final_blocks_kept(observed: Iterable[tuple[str, int, str]],
                      end_chains: Mapping[str, Mapping[int, str] | None],
                      branch_switches: Mapping[str, int] | None = None) -> InvariantResult:
    """No block once final (written to a node's store) was later lost or replaced.

    `observed` holds (node, height, hash) seen at or below a node's final height during the
    run; `end_chains` each node's chain at the end (height -> hash; None if it did not
    answer). Every observation must still be in its node's chain, and no two nodes may
    ever have had different final blocks at one height. `branch_switches` (by node, from
    `branch_switches`) go into the figures and the detail: switching branches above the
    final height is allowed, so they are reported, not judged.
    """
    by_height: dict[int, set[str]] = {}
    lost: list[str] = []
    changed: list[str] = []
    count = 0
    for node, height, block_hash in observed:
        count += 1
        by_height.setdefault(height, set()).add(block_hash)
        chain = end_chains.get(node)
        if chain is None:
            continue      # a node that is down at the end fails same_tip; its history is still compared below
        if height not in chain:
            lost.append(f"{node}@{height}")
        elif chain[height] != block_hash:
            changed.append(f"{node}@{height}")
    conflicts = sorted(h for h, hashes in by_height.items() if len(hashes) > 1)
    passed = not lost and not changed and not conflicts
    figures = {"observations": count, "heights": len(by_height), "lost": len(lost), "changed": len(changed),
               "heights_with_two_final_blocks": len(conflicts), "examples": (lost + changed)[:EXAMPLES],
               "example_heights": conflicts[:EXAMPLES]}
    detail = (f"{count:,} final-block observations over {len(by_height):,} heights: {len(lost)} lost, "
              f"{len(changed)} changed, {len(conflicts)} heights final with two different blocks")
    if branch_switches is not None:
        total = sum(branch_switches.values())
        figures |= {"branch_switches": dict(branch_switches), "branch_switches_total": total}
        detail += f"; {total:,} branch switches (" + ", ".join(f"{node}: {n:,}" for node, n in
                                                            sorted(branch_switches.items())) + ")"
    return InvariantResult("final_blocks_kept", passed, detail, figures)


def final_blocks_kept_per_shard(observed: Iterable[tuple[str, int, str]],
                                end_chains: Mapping[str, Mapping[int, str] | None],
                                groups: list[list[str]],
                                branch_switches: Mapping[str, int] | None = None) -> InvariantResult:
    """A sharded devnet: `final_blocks_kept` within each shard (two shards' blocks at one
    height are two chains' blocks, not a conflict)."""
    observed = list(observed)
    parts = [final_blocks_kept([o for o in observed if o[0] in group],
                               {node: chain for node, chain in end_chains.items() if node in group},
                               None if branch_switches is None
                               else {node: n for node, n in branch_switches.items() if node in group})
             for group in groups]
    detail = "; ".join(f"shard {k}: {part.detail}" for k, part in enumerate(parts))
    return InvariantResult("final_blocks_kept", all(part.passed for part in parts), detail,
                           {f"shard-{k}": part.figures for k, part in enumerate(parts)})


def branch_switches(lines: Iterable[Mapping[str, Any]], nodes: Iterable[str]) -> dict[str, int]:
    """Each node's branch switches over the run, from its metrics timeline lines: the
    highest `blocks.reorgs` seen in each of its process lives (a restarted node counts
    from 0 again), summed over them."""
    highest: dict[str, dict[tuple[int | None, float | None], int]] = {node: {} for node in nodes}
    for line in lines:
        if line.get("metrics") is not None:
            metrics = decode_metrics(line["metrics"], f"metrics/{line['node']}.jsonl at {line['time_s']}")
            life = (metrics.process.pid, metrics.process.started_at_s)
            lives = highest.setdefault(line["node"], {})
            lives[life] = max(lives.get(life, 0), metrics.blocks.reorgs)
    return {node: sum(lives.values()) for node, lives in highest.items()}


def throughput_within(summary: Mapping[str, Any], min_committed_tps: float | None,
                      max_p99_ms: float | None) -> InvariantResult:
    """Committed TPS and p99 intended->included latency within the manifest's bounds.

    Inclusion, not finality: a transaction is final once a majority of validators has
    built on its block, whatever the load, so the bound speaks of the wait to get into a block (the
    final latency is in the generator's summary beside it). Summaries without inclusion
    times fall back to intended->committed."""
    committed_tps = float(summary["committed_tps"])
    latency = summary["latency_ms"]
    p99 = (latency.get("intended_to_included") or latency["intended_to_committed"])["percentiles_ms"]["p99"]
    p99 = math.nan if p99 is None else float(p99)
    problems = []
    if min_committed_tps is not None and not committed_tps >= min_committed_tps:
        problems.append(f"committed {committed_tps:,.1f} TPS < {min_committed_tps:,.1f}")
    if max_p99_ms is not None and not p99 <= max_p99_ms:    # NaN (nothing committed) fails
        problems.append(f"p99 {p99:,.0f} ms > {max_p99_ms:,.0f}")
    figures = {"committed_tps": committed_tps, "p99_ms": p99, "min_committed_tps": min_committed_tps,
               "max_p99_ms": max_p99_ms, "target_tps": summary.get("target_tps")}
    detail = "; ".join(problems) or f"committed {committed_tps:,.1f} TPS, p99 {p99:,.0f} ms"
    return InvariantResult("throughput_within_bounds", not problems, detail, figures)


def honest_goodput(transactions: Iterable[TxRecord], windows: list[tuple[float, float]],
                   baseline_tps: float, min_share: float) -> InvariantResult:
    """Honest transactions intended during the floods and committed, per second, against the baseline."""
    merged: list[tuple[float, float]] = []
    for start, end in sorted(windows):            # overlapping floods: count their seconds once
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    windows = merged
    seconds = sum(end - start for start, end in windows)
    inside = [tx for tx in transactions if any(start <= tx.intended_s < end for start, end in windows)]
    committed = sum(1 for tx in inside if tx.committed_s is not None)
    goodput = committed / seconds if seconds > 0 else math.nan
    share = goodput / baseline_tps
    passed = share >= min_share          # NaN fails
    figures = {"flood_seconds": seconds, "honest_planned": len(inside), "honest_committed": committed,
               "goodput_tps": goodput, "baseline_tps": baseline_tps, "share": share, "min_share": min_share}
    detail = f"honest goodput {goodput:,.1f} TPS during floods = {share:.0%} of {baseline_tps:,.0f} (need {min_share:.0%})"
    return InvariantResult("honest_goodput", passed, detail, figures)


def supply_conserved(samples: Iterable[Mapping[str, Any]], nodes: Iterable[str]) -> InvariantResult:
    """Every consistent supply sample (qmemo.scenario.supply: the height did not move while
    the balances were read) equals the genesis total, and every node gave one at the end."""
    consistent = [s for s in samples if s.get("ok") and s.get("consistent")]
    off = [s for s in consistent if s["supply"] != s["expected"]]
    ended = {s["node"] for s in consistent if s.get("at_end")}
    missing_end = sorted(set(nodes) - ended)
    passed = bool(consistent) and not off and not missing_end
    figures = {"samples": len(consistent), "off": len(off), "expected": consistent[0]["expected"] if consistent else None,
               "nodes_without_an_end_sample": missing_end,
               "examples": [{k: s[k] for k in ("node", "height", "supply")} for s in off[:EXAMPLES]]}
    detail = (f"{len(consistent):,} consistent samples, {len(off)} off the genesis total"
              + (f"; no end sample from {', '.join(missing_end)}" if missing_end else ""))
    return InvariantResult("supply_conserved", passed, detail, figures)


def heights_converge(samples: Iterable[Mapping[str, Any]], nodes: Iterable[str], last_fault_end: float,
                     within_s: float) -> InvariantResult:
    """After the last fault ended (wall time), every node answers with heights at most one
    block apart within `within_s`: the first second of samples (`metrics/<node>.jsonl`)
    where that holds."""
    by_second: dict[int, dict[str, int]] = {}
    for line in samples:
        if line["time_s"] >= last_fault_end and line.get("ok") and line.get("status"):
            by_second.setdefault(int(line["time_s"]), {})[line["node"]] = int(line["status"]["height"])
    wanted = set(nodes)
    converged = next((second for second in sorted(by_second) if set(by_second[second]) == wanted
                      and max(by_second[second].values()) - min(by_second[second].values()) <= 1), None)
    after_s = None if converged is None else max(0.0, converged - last_fault_end)
    passed = after_s is not None and after_s <= within_s
    figures = {"converged_after_s": after_s, "within_s": within_s, "last_fault_end": last_fault_end,
               "heights": by_second.get(converged) if converged is not None else None}
    detail = (f"heights within one block {after_s:.0f} s after the last fault ended (bound {within_s:g} s)"
              if after_s is not None else "heights never came within one block after the last fault")
    return InvariantResult("heights_converge", passed, detail, figures)


def all_planned_final(summary: Mapping[str, Any]) -> InvariantResult:
    """Every transaction the generator planned is final exactly once: none failed, lost in a
    queue, refused or left unsent - a crash strands no sender behind a nonce gap."""
    counts = summary["counts"]
    passed = counts["committed"] == counts["planned"]
    figures = {key: counts.get(key) for key in ("planned", "committed", "failed", "lost", "unsent", "rejected",
                                                "lost_reasons")}
    failover = summary.get("failover") or {}
    figures["outcome_unknown_resent"] = failover.get("outcome_unknown_resent")
    figures["outcome_unknown_resolved"] = failover.get("outcome_unknown_resolved")
    detail = (f"{counts['committed']:,} of {counts['planned']:,} planned final; failed {counts['failed']:,}, "
              f"lost {counts['lost']:,}, refused {sum(counts['rejected'].values()):,}, unsent {counts['unsent']:,}")
    return InvariantResult("all_planned_final", passed, detail, figures)


def resources_flat(samples: Mapping[str, Iterable[tuple[float, ProcessFigures]]],
                   load_window: tuple[float, float]) -> InvariantResult:
    """RSS and open file descriptors flat after warm-up (`RESOURCES_RULE`), on every process life of every node.

    `samples` holds each node's (sampler's wall time, `/metrics`' process figures);
    `load_window` the wall times the load started and finished. A node's samples split
    into lives by (pid, started_at_s): a restart begins a new life, whose lower RSS is no
    trend of the old one's. Every life long enough is judged by the soak's rule
    (qmemo.devnet.growth); it holds when every judged life is flat, and fails when no life
    at all could be judged: a chaos run too short to tell, or nodes that predate the
    figures, proves nothing about growth.
    """
    nodes: dict[str, dict[str, list[dict[str, Any]]]] = {}
    unnamed = 0
    for node, node_samples in sorted(samples.items()):
        lives: dict[tuple[int, float], list[tuple[float, ProcessFigures]]] = {}
        for time_s, process in node_samples:
            if process.pid is None or process.started_at_s is None or process.open_fds is None:
                unnamed += 1        # a node before these figures, or no /proc: nothing to judge by
                continue
            lives.setdefault((process.pid, process.started_at_s), []).append((time_s, process))
        nodes[node] = {"judged": [], "too_short": []}
        for (pid, started_at_s), life in sorted(lives.items(), key=lambda item: item[0][1]):
            figures = _judge_life(pid, started_at_s, sorted(life, key=lambda sample: sample[0]), load_window)
            nodes[node]["judged" if "verdict" in figures else "too_short"].append(figures)
    judged = [(node, life) for node, lives in nodes.items() for life in lives["judged"]]
    growing = [(node, life) for node, life in judged if life["verdict"] != FLAT]
    too_short = sum(len(lives["too_short"]) for lives in nodes.values())
    without = sorted(node for node, lives in nodes.items() if not lives["judged"])
    figures = {"rule": RESOURCES_RULE, "lives_judged": len(judged), "lives_growing": len(growing),
               "lives_too_short": too_short, "nodes_without_a_judged_life": without,
               "samples_without_pid_start_or_fds": unnamed, "nodes": nodes}
    if not judged:
        detail = (f"no process life could be judged: none ran {MIN_JUDGED_S:g} s under load past its "
                  f"{LIFE_WARMUP_S:g} s warm-up ({too_short} lives too short")
        detail += f"; {unnamed:,} samples without pid, start time or open fds)" if unnamed else ")"
    elif growing:
        detail = "growing: " + "; ".join(f"{node} {_life_line(life)}" for node, life in growing[:EXAMPLES]) + \
            f" ({len(judged) - len(growing)} of {len(judged)} judged lives flat)"
    else:
        detail = (f"{len(judged)} process lives judged, all flat (RSS at most "
                  f"{max(life['rss_slope_share_per_hour'] for _, life in judged):+.0%}/h, fds at most "
                  f"{max(life['fds_slope_per_hour'] for _, life in judged):+.1f}/h); {too_short} too short to judge"
                  + (f"; none judged on {', '.join(without)}" if without else ""))
    return InvariantResult("resources_flat", bool(judged) and not growing, detail, figures)


def _judge_life(pid: int, started_at_s: float, life: list[tuple[float, ProcessFigures]],
                load_window: tuple[float, float]) -> dict[str, Any]:
    """One life's figures (times in s from the load's start), with the soak rule's verdict
    and figures if it was long enough to judge."""
    load_started, load_finished = load_window
    judged_from = max(started_at_s, load_started) + LIFE_WARMUP_S
    window = [{"t_s": time_s, "rss_bytes": _memory(process), "fds": process.open_fds}
              for time_s, process in life if judged_from <= time_s <= load_finished]
    memory = "anonymous" if all(process.rss_anon_bytes is not None for _, process in life) else "resident"
    span_s = window[-1]["t_s"] - window[0]["t_s"] if window else 0.0
    figures: dict[str, Any] = {"pid": pid, "memory": memory, "started_s": round(started_at_s - load_started, 1),
                               "samples": len(life), "judged_from_s": round(judged_from - load_started, 1),
                               "judged_s": round(span_s, 1), "judged_samples": len(window)}
    if span_s < MIN_JUDGED_S or len(window) < MIN_JUDGED_SAMPLES:
        return figures
    summary = node_summary(window)
    return {**figures,
            "rss_first_mib": round(summary["rss_first_bytes"] / MIB, 1),
            "rss_last_mib": round(summary["rss_last_bytes"] / MIB, 1),
            "rss_max_mib": round(summary["rss_max_bytes"] / MIB, 1),
            "rss_slope_mib_per_hour": round(summary["rss_slope_bytes_per_hour"] / MIB, 1),
            "rss_slope_share_per_hour": round(summary["rss_slope_share_per_hour"], 4),
            "fds_first": summary["fds_first"], "fds_last": summary["fds_last"],
            "fds_slope_per_hour": round(summary["fds_slope_per_hour"], 1), "verdict": summary["verdict"]}


def _memory(process: ProcessFigures) -> int:
    """The memory a life is judged by: the anonymous part of the resident set where the node
    reports it. The whole resident set also counts the store's memory-mapped file pages,
    page cache that grows with what the node reads (up to the map's size), not a leak; a
    node that predates the figure is judged by its whole resident set, and says so."""
    return process.rss_anon_bytes if process.rss_anon_bytes is not None else process.rss_bytes


def _life_line(life: Mapping[str, Any]) -> str:
    return (f"pid {life['pid']} from {life['started_s']:g} s ({life['judged_s']:g} s judged): {life['memory']} RSS "
            f"{life['rss_first_mib']:g} -> {life['rss_last_mib']:g} MiB, {life['rss_slope_share_per_hour']:+.0%}/h; "
            f"fds {life['fds_first']} -> {life['fds_last']}, {life['fds_slope_per_hour']:+g}/h")


def last_fault_end(timeline: Iterable[Mapping[str, Any]]) -> float | None:
    """Wall time when the last fault was undone (restart, SIGCONT, heal, link up), from timeline.jsonl."""
    ends = [line["time_s"] for line in timeline if line["what"] in ("restart", "SIGCONT", "heal", "link up")]
    return max(ends, default=None)


# --- reading a run folder ------------------------------------------------------------------

def load_window(timeline: Iterable[Mapping[str, Any]]) -> tuple[float, float]:
    """Wall times the load started and finished, from timeline.jsonl (the runner records both before judging)."""
    times = {line["what"]: line["time_s"] for line in timeline if line["what"] in ("load started", "load finished")}
    if len(times) != 2:
        raise ConfigError(f"timeline.jsonl: no 'load started' and 'load finished' (has {sorted(times)})")
    return times["load started"], times["load finished"]


def process_samples(lines: Iterable[Mapping[str, Any]],
                    nodes: Iterable[str]) -> dict[str, list[tuple[float, ProcessFigures]]]:
    """Each node's (sampler's time, process figures) from its metrics timeline lines, the
    /metrics documents decoded with the node's own schema."""
    out: dict[str, list[tuple[float, ProcessFigures]]] = {node: [] for node in nodes}
    for line in lines:
        if line.get("metrics") is not None:
            metrics = decode_metrics(line["metrics"], f"metrics/{line['node']}.jsonl at {line['time_s']}")
            out.setdefault(line["node"], []).append((line["time_s"], metrics.process))
    return out


def read_transactions(path: Path) -> list[TxRecord]:
    records = []
    with Path(path).open(newline="") as rows:
        for row in csv.DictReader(rows):
            committed = float(row["committed_s"]) if row["committed_s"] else None
            records.append(TxRecord(row["id"], float(row["intended_s"]),
                                    row["status"] == "accepted" or committed is not None, committed))
    return records


def read_jsonl(path: Path) -> list[Any]:
    if not path.exists():
        return []
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def not_judged(manifest: Manifest) -> dict[str, str]:
    """Invariants `manifest` has and asks to leave out, each with the reason. `evaluate()`
    skips them; the runner records them in the verdict and prints them, so that a run
    which left a check out is not read as one that passed it."""
    if manifest.chaos is not None and not manifest.chaos.judge_resources:
        return {"resources_flat": "left out by chaos.judge_resources = false"}
    return {}


def evaluate(run_dir: Path, manifest: Manifest) -> list[InvariantResult]:
    """Every invariant of `manifest` over the run folder the runner filled, but those it leaves out (`not_judged`)."""
    run_dir = Path(run_dir)
    end = orjson.loads((run_dir / "chain" / "end.json").read_bytes())
    tips = {node: (tuple(tip) if tip else None) for node, tip in end["tips"].items()}
    network = manifest.network
    groups = [[f"node-{i}" for i in network.shard_nodes(k)] for k in range(network.shards)]
    results = [same_tip_per_shard(tips, groups) if network.shards > 1 else same_tip(tips)]
    transactions = read_transactions(run_dir / "gen" / "transactions.csv")
    chain_ids = Counter((run_dir / "chain" / "tx-ids.txt").read_text().split())
    results.append(accepted_once(transactions, chain_ids, end["evictions"], end["missing_status"]))
    observed = [(o["node"], o["height"], o["hash"]) for o in read_jsonl(run_dir / "chain" / "final-observed.jsonl")]
    end_chains = {node: ({int(h): block_hash for h, block_hash in chain.items()} if chain is not None else None)
                  for node, chain in end["chains"].items()}
    nodes = list(end["tips"])
    samples = [line for node in nodes for line in read_jsonl(run_dir / "metrics" / f"{node}.jsonl")]
    switches = branch_switches(samples, nodes)
    results.append(final_blocks_kept_per_shard(observed, end_chains, groups, switches) if network.shards > 1
                   else final_blocks_kept(observed, end_chains, switches))
    summary = orjson.loads((run_dir / "gen" / "summary.json").read_bytes())
    bounds = manifest.invariants
    results.append(throughput_within(summary, bounds.min_committed_tps, bounds.max_p99_ms))
    if network.shards > 1:
        results.append(sharded_transfers(summary))
    if manifest.chaos is not None:
        results.append(supply_conserved(read_jsonl(run_dir / "chain" / "supply.jsonl"), nodes))
        timeline = read_jsonl(run_dir / "timeline.jsonl")
        ended = last_fault_end(timeline)
        results.append(heights_converge(samples, nodes, ended if ended is not None else 0.0, bounds.settle_s))
        results.append(all_planned_final(summary))
        if "resources_flat" not in not_judged(manifest):
            results.append(resources_flat(process_samples(samples, nodes), load_window(timeline)))
    if manifest.floods:
        windows = [(f.at_s, f.end_s) for f in manifest.floods]
        # The parser requires both bounds for a flood scenario; 0 here would only make the check fail.
        results.append(honest_goodput(transactions, windows, bounds.goodput_baseline_tps or math.nan,
                                      bounds.min_goodput_share or math.inf))
    return results
