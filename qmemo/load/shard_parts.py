"""A sharded run's parts: each shard's plan and timings as the run goes, and the figures
made of them at the end (qmemo.load.shards runs it; qmemo.load.shard_summary holds the
records). Pure but for `write_csv`.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qmemo.load.follower import FollowState
from qmemo.load.latency import STATUS_NAMES, Timings, summarize_latencies
from qmemo.load.sender import SendProgress
from qmemo.load.shard_summary import CrossShard, ShardCounts, Transfer
from qmemo.load.shard_workload import ShardWorkload


@dataclass
class ShardPart:
    """One shard's part of the run, as it goes."""

    index: int
    nodes: list[str]
    work: ShardWorkload
    timings: Timings
    state: FollowState | None = None
    progress: SendProgress | None = None
    credited: Any = None            # array of credit times (NaN: not yet), for its cross-shard transfers
    uncredited: dict[int, bytes] | None = None   # its cross-shard transfers not seen credited yet -> receipt id
    moves: Moves | None = None      # what each transaction moves, when kept apart from its signed batches


@dataclass(frozen=True, slots=True)
class Moves:
    """Each planned transaction's sender, recipient, amount and fee, as signed (a fleet's
    part decodes its batches once, so that its parent checks the invariants without them)."""

    senders: list[bytes]
    recipients: list[bytes]
    amounts: list[int]
    fees: list[int]


def moves_of(work: ShardWorkload) -> Moves:
    """The moves of a shard's plan, decoded from its signed batches."""
    from qmemo.core.transaction import Transaction
    from qmemo.frames import decode_frames

    txs: list[Any] = [None] * len(work.ids)
    for batch in work.batches:
        for i, encoding in zip(range(batch.first, batch.last), decode_frames(batch.body, batch.last - batch.first)):
            txs[i] = Transaction.decode(encoding)
    return Moves([tx.sender for tx in txs], [tx.recipient for tx in txs], [tx.amount for tx in txs],
                 [tx.fee for tx in txs])


def merge(parts: list[Timings]) -> Timings:
    """One Timings of every shard's transactions (shard by shard; each is in its own order)."""
    merged = Timings([t for part in parts for t in part.intended])
    offset = 0
    for part in parts:
        n = len(part)
        for name in ("due", "sent", "accepted", "included", "committed"):
            getattr(merged, name)[offset:offset + n] = getattr(part, name)
        merged.status[offset:offset + n] = part.status
        merged.reasons.update({offset + i: reason for i, reason in part.reasons.items()})
        offset += n
    return merged


def _window(shard: ShardPart, i: int, warmup_s: float, end_s: float) -> bool:
    return warmup_s <= shard.timings.intended[i] < end_s


def _finite(value_ms: float) -> float | None:
    return None if math.isnan(value_ms) else value_ms


def cross_figures(shards: list[ShardPart], warmup_s: float, end_s: float) -> CrossShard:
    planned = committed = credited = 0
    to_credit, debit_to_credit = [], []
    for shard in shards:
        t = shard.timings
        for i in shard.work.receipt_ids:
            planned += 1
            if math.isnan(t.committed[i]):
                continue
            committed += 1
            if math.isnan(shard.credited[i]):
                continue
            credited += 1
            if _window(shard, i, warmup_s, end_s):
                to_credit.append(shard.credited[i] - t.intended[i])
                debit_to_credit.append(shard.credited[i] - t.committed[i])
    i2c, c2c = summarize_latencies(to_credit), summarize_latencies(debit_to_credit)
    return CrossShard(planned, committed, credited, committed - credited, _finite(i2c.percentiles_ms["p50"]),
                      _finite(i2c.percentiles_ms["p99"]), _finite(i2c.max_ms), _finite(c2c.percentiles_ms["p99"]))


def intra_p99(shards: list[ShardPart], warmup_s: float, end_s: float, only: ShardPart | None = None) -> float | None:
    values = [shard.timings.committed[i] - shard.timings.intended[i]
              for shard in shards if only is None or shard is only
              for i in range(len(shard.timings))
              if shard.work.destinations[i] == shard.index and not math.isnan(shard.timings.committed[i])
              and _window(shard, i, warmup_s, end_s)]
    return _finite(summarize_latencies(values).percentiles_ms["p99"])


def shard_counts(shard: ShardPart, shards: list[ShardPart], metrics: dict[str, Any], warmup_s: float,
                  end_s: float) -> ShardCounts:
    t = shard.timings
    committed = sum(1 for i in range(len(t)) if not math.isnan(t.committed[i]))
    in_window = sum(1 for i in range(len(t)) if not math.isnan(t.committed[i]) and _window(shard, i, warmup_s, end_s))
    credited_in = sum(1 for other in shards for i in other.work.receipt_ids
                      if other.work.destinations[i] == shard.index and not math.isnan(other.credited[i]))
    ratios = []
    for url in shard.nodes:
        before, after = metrics["before"].get(url), metrics["after"].get(url)
        if before is None or after is None:
            continue
        verified = after.stages.by_stage["verify"].txs - before.stages.by_stage["verify"].txs
        chain_committed = after.tx.committed - before.tx.committed
        if chain_committed > 0:
            ratios.append(verified / chain_committed)
    return ShardCounts(
        shard=shard.index, chain_id=shard.work.chain_id, nodes=tuple(shard.nodes), planned=len(t),
        committed=committed, cross_planned=len(shard.work.receipt_ids), credited_in=credited_in,
        committed_tps=in_window / max(end_s - warmup_s, 1e-9), p99_ms_intra=intra_p99(shards, warmup_s, end_s, shard),
        verifies_per_committed_tx=sum(ratios) / len(ratios) if ratios else None,
        modelled_verifies_per_tx=1 + (credited_in / committed if committed else 0.0))


def transfers(shards: list[ShardPart], late_final: set[tuple[int, int]],
              late_credited: set[tuple[int, int]]) -> list[Transfer]:
    """The run's transfers final on their source shard, with what the plan says of them
    (final: seen so by the follower, or by the chain after the run; credited likewise)."""
    out = []
    for shard in shards:
        t, moves = shard.timings, shard.moves or moves_of(shard.work)
        for i in range(len(t)):
            if math.isnan(t.committed[i]) and (shard.index, i) not in late_final:
                continue
            cross = shard.work.destinations[i] != shard.index
            credited = not math.isnan(shard.credited[i]) or (shard.index, i) in late_credited
            out.append(Transfer(moves.senders[i], moves.recipients[i], moves.amounts[i], moves.fees[i], cross,
                                not cross or credited))
    return out


def write_csv(path: Path, shards: list[ShardPart]) -> None:
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["shard", "index", "id", "destination", "intended_s", "sent_s", "accepted_s", "committed_s",
                         "credited_s", "status", "reason"])
        for shard in shards:
            t = shard.timings
            for i in range(len(t)):
                writer.writerow([shard.index, i, shard.work.ids[i].hex(), shard.work.destinations[i],
                                 *(_cell(v[i]) for v in (t.intended, t.sent, t.accepted, t.committed, shard.credited)),
                                 STATUS_NAMES[t.status[i]], t.reasons.get(i, "")])


def _cell(value: float) -> str:
    return "" if math.isnan(value) else f"{value:.6f}"
