"""The generator's result files: a run's `summary.json` and a sweep's `sweep.json`.

One schema for each, as dataclasses that the writer (qmemo.load.run) fills and the
reader (qmemo.analysis.devnet, for the report) decodes with the same classes
(qmemo.records: strict, a missing or unknown key is an error). What limited a run is
decided here, once, when the summary is made, as three separate verdicts: the chain's
throughput fell short (`throughput_saturated`: the only one that makes the committed
rate a capacity), inclusion latency ran past 3 block intervals (`latency_saturated`: p99 intended->included,
so the wait for finality (a majority building on the block) does not count as saturation), or the
generator fell behind its own schedule (`generator_fell_behind`: then the generator,
not the chain, limited the run). A sweep's first stage that any of them limited marks its saturation
(the stages above it run too, to show what overload does). Readers take the
verdicts from the file instead of re-deriving them. docs/devnet.md describes every field.

Pure: no I/O beyond `read_*`/`write_*` at the bottom, no clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from qmemo.load.agreement import Agreement
from qmemo.load.latency import ACCEPTED, DUPLICATE, REJECTED, LatencySummary, RunCounts, RunSummary, Timings
from qmemo.load.node_stages import Survival
from qmemo.load.shard_summary import CrossShard, Invariants, ShardCounts
from qmemo.records import OMIT_NONE, read_record, write_record

# /2 had one "saturated" for all three reasons; /3 keeps the verdicts apart.
SUMMARY_SCHEMA = "qmemo-load-summary/3"
SWEEP_SCHEMA = "qmemo-sweep/3"

SATURATION_SHARE = 0.9          # committed below 90% of the target: the chain cannot keep up
SATURATION_P99_INTERVALS = 3    # or p99 intended->included beyond 3 block intervals


@dataclass(frozen=True, slots=True)
class Latency:
    """Percentiles of one latency kind, in ms (None: nothing was measured)."""

    count: int
    percentiles_ms: dict[str, float | None]     # "p50", "p90", "p95", "p99", "p99.9"
    max_ms: float | None
    mean_ms: float | None


@dataclass(frozen=True, slots=True)
class Latencies:
    intended_to_committed: Latency
    sent_to_committed: Latency
    sent_to_accepted: Latency
    # First seen in a block, before it was final; then on to final (committed). Absent
    # from files written before finality was on the wire.
    intended_to_included: Latency | None = field(default=None, metadata=OMIT_NONE)
    included_to_committed: Latency | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True, slots=True)
class Counts:
    """What became of every planned transaction (see qmemo.load.latency.RunCounts)."""

    planned: int
    sent: int
    accepted: int
    duplicate: int
    committed: int
    rejected: dict[str, int]                    # by reason
    lost: int
    failed: int
    unsent: int
    rejected_total: int
    accounted: int                              # committed + rejected + lost + failed + unsent
    included: int | None = field(default=None, metadata=OMIT_NONE)  # in a block, final or not (not an outcome)
    # Why the lost ones are not final, as the nodes said at the end (qmemo.load.follower,
    # `lost_reasons`): the counts add up to `lost`. Absent from files written before.
    lost_reasons: dict[str, int] | None = field(default=None, metadata=OMIT_NONE)
    # Of `committed`, those a node reported final only at the end's look-up, after the
    # follower stopped waiting: committed late (their latency: when they were found), not
    # lost. Absent when none were, and from files written before.
    committed_late: int | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True, slots=True)
class DoorAnswers:
    """What the nodes' doors said (qmemo.node.door): batches refused 503 `busy` before being
    read, each offered again in its node's next slot (qmemo.load.sender); slots left unsent
    while a node's wait ran; batches sent back behind a refused one (part of them refused
    for now). A transaction still queued when the slots ran out is rejected `busy_backlog`."""

    refusals: int
    refused_txs: int
    waits: int
    waited_txs: int
    requeues: int
    # Refused batches below one their node took, offered again after the last slot (the node
    # held later nonces of their senders). Absent from files written before.
    gap_offers: int = 0
    # Batches sent as a second one in a slot of a node behind its schedule (its door had
    # made it skip slots). Absent from files written before.
    catch_ups: int = 0


@dataclass(frozen=True, slots=True)
class Failover:
    """The sender's failover (qmemo.load.sender): tries nodes did not answer, batches (and
    their transactions) that went to a node other than their own - resent after a failure,
    or sent there at once while their own node was known to be down - and resends of
    transactions a node refused for now."""

    failovers: int
    failover_txs: int
    node_failures: dict[str, int]               # by node URL
    # Requests that sent again what a node refused for now (full queues, a nonce ahead of
    # what the node has: qmemo.load.sender.RESEND_CODES), and their transactions. None (and
    # absent) in summaries written before the generator resent.
    resends: int | None = field(default=None, metadata=OMIT_NONE)
    resend_txs: int | None = field(default=None, metadata=OMIT_NONE)
    # Transactions sent again after a try whose answer was lost (a reset, a timeout, a 5xx
    # other than 503: the node may have admitted them), each counted once, and how each
    # was resolved in the end (`unknown_resolutions`): the counts add up to the first. None
    # (and absent) in summaries written before the generator told these apart.
    outcome_unknown_resent: int | None = field(default=None, metadata=OMIT_NONE)
    outcome_unknown_resolved: dict[str, int] | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True, slots=True)
class LoadSummary:
    schema: str
    target_tps: float
    committed_tps: float
    measured_s: float
    warmup_s: float
    interrupted: bool
    counts: Counts
    latency_ms: Latencies
    schedule_lag_ms: Latency
    generator_fell_behind: bool                 # the generator, not the chain, limited the run
    throughput_saturated: bool                  # the chain committed < 90% of what was offered
    latency_saturated: bool                     # p99 intended->included beyond 3 block intervals
    why: str                                    # the verdicts that hold, "; "-separated ("" if none)
    # None (and absent from the file) in summaries written before the sender failed over.
    failover: Failover | None = field(default=None, metadata=OMIT_NONE)
    door: DoorAnswers | None = field(default=None, metadata=OMIT_NONE)     # None: written before nodes had a door
    # The verify stage's share of the machine's CPU (P5), from the nodes' stage costs
    # (qmemo.load.node_stages.survival; not the headline's survival against C); None (and
    # absent) when the nodes gave no stage costs, and in summaries written before it.
    survival: Survival | None = field(default=None, metadata=OMIT_NONE)
    # The generator's own CPU over the run - sending, following blocks, the live status,
    # every thread of its process; not the signing before it - in all and per transaction
    # it offered (sent): it shares the cores with the nodes, so every microsecond is theirs
    # to lose. None (and absent) when nothing was sent, and in summaries written before.
    generator_cpu_s: float | None = field(default=None, metadata=OMIT_NONE)
    generator_cpu_us_per_tx: float | None = field(default=None, metadata=OMIT_NONE)
    # A sharded devnet's run (qmemo.load.shards, qmemo.load.shard_summary); absent otherwise.
    cross_shard: CrossShard | None = field(default=None, metadata=OMIT_NONE)
    shards: tuple[ShardCounts, ...] | None = field(default=None, metadata=OMIT_NONE)
    invariants: Invariants | None = field(default=None, metadata=OMIT_NONE)
    # Whether the nodes' final blocks have one hash at every height all of them hold final,
    # and their branch switches during the run, read at its end (qmemo.load.agreement). None
    # (and absent) in summaries written before, and in a sharded run's.
    agreement: Agreement | None = field(default=None, metadata=OMIT_NONE)

    @property
    def limited(self) -> bool:
        """Whether anything limited this run (a sweep's first such stage marks its saturation)."""
        return self.throughput_saturated or self.latency_saturated or self.generator_fell_behind


@dataclass(frozen=True, slots=True)
class SweepRow:
    target_tps: float
    committed_tps: float
    p50_ms: float | None                        # intended -> committed
    p99_ms: float | None
    lost: int
    rejected: int
    failed: int
    throughput_saturated: bool                  # the stage's verdicts, as in its summary
    latency_saturated: bool
    generator_fell_behind: bool
    why: str
    run: str                                    # the stage's run folder
    survival_ratio: float | None = field(default=None, metadata=OMIT_NONE)   # its summary's `survival.ratio`
    generator_cpu_us_per_tx: float | None = field(default=None, metadata=OMIT_NONE)  # its summary's
    # A sharded stage: p99 intended -> committed within shards, intended -> credited across
    # them, and whether the invariants held (qmemo.load.shard_summary).
    intra_p99_ms: float | None = field(default=None, metadata=OMIT_NONE)
    cross_p99_ms: float | None = field(default=None, metadata=OMIT_NONE)
    invariants_hold: bool | None = field(default=None, metadata=OMIT_NONE)
    # Its summary's `agreement`: whether the nodes agree, and their branch switches in the stage.
    agree: bool | None = field(default=None, metadata=OMIT_NONE)
    reorgs: int | None = field(default=None, metadata=OMIT_NONE)
    # Its summary's planned transactions, and those of them rejected `busy_backlog`: refused
    # at the nodes' doors and never taken (qmemo.load.sender). None (and absent) in sweeps
    # written before the sweep ran past saturation.
    planned: int | None = field(default=None, metadata=OMIT_NONE)
    door_refused: int | None = field(default=None, metadata=OMIT_NONE)

    @property
    def limited(self) -> bool:
        return self.throughput_saturated or self.latency_saturated or self.generator_fell_behind

    @property
    def door_refused_share(self) -> float | None:
        """The share of the stage's planned transactions refused at the door."""
        return self.door_refused / self.planned if self.door_refused is not None and self.planned else None


@dataclass(frozen=True, slots=True)
class Sweep:
    schema: str
    rows: tuple[SweepRow, ...]


# How a transaction whose answer was once lost was resolved (`Failover.outcome_unknown_resolved`).
RESOLVED_ACCEPTED = "accepted on a resend"          # the lost try had not admitted it
RESOLVED_DUPLICATE = "duplicate (already admitted)"  # the lost answer had been an accept (or a relay's)
RESOLVED_UNANSWERED = "no answer before the resend window closed"


def unknown_resolutions(flags: bytes | bytearray, timings: Timings) -> dict[str, int]:
    """For the planned transactions flagged in `flags` (qmemo.load.sender's
    `outcome_unknown`), how many ended which way: accepted, duplicate, "rejected: <code>",
    or unanswered (", final in the chain" when a block carried it all the same)."""
    resolved: dict[str, int] = {}
    status, committed, reasons = timings.status, timings.committed, timings.reasons
    index = flags.find(1)
    while index >= 0:
        outcome = status[index]
        if outcome == ACCEPTED:
            key = RESOLVED_ACCEPTED
        elif outcome == DUPLICATE:
            key = RESOLVED_DUPLICATE
        elif outcome == REJECTED:
            key = f"rejected: {reasons.get(index, 'unknown')}"
        else:
            key = RESOLVED_UNANSWERED + (", final in the chain" if not math.isnan(committed[index]) else "")
        resolved[key] = resolved.get(key, 0) + 1
        index = flags.find(1, index + 1)
    return resolved


def _finite(value: float) -> float | None:
    # JSON has no NaN: a latency nothing was measured for is null.
    return None if math.isnan(value) else value


def _latency(summary: LatencySummary) -> Latency:
    return Latency(summary.count, {k: _finite(v) for k, v in summary.percentiles_ms.items()},
                   _finite(summary.max_ms), _finite(summary.mean_ms))


def _counts(counts: RunCounts) -> Counts:
    return Counts(counts.planned, counts.sent, counts.accepted, counts.duplicate, counts.committed,
                  dict(counts.rejected), counts.lost, counts.failed, counts.unsent, counts.rejected_total,
                  counts.accounted, counts.included)


@dataclass(frozen=True, slots=True)
class Verdicts:
    """What limited one run, each verdict on its own."""

    throughput_saturated: bool
    latency_saturated: bool
    generator_fell_behind: bool

    def why(self) -> str:
        names = (("committed < 90% of target", self.throughput_saturated),
                 ("p99 > 3 block intervals", self.latency_saturated),
                 ("generator fell behind", self.generator_fell_behind))
        return "; ".join(name for name, holds in names if holds)


def verdicts(run: RunSummary, target_tps: float, block_interval_s: float) -> Verdicts:
    """The run's verdicts. A run whose generator fell behind offered less than its target,
    so committing less than the target says nothing about the chain: it is never
    throughput-saturated (and so never reported as a capacity)."""
    # Inclusion, not finality: a final transaction waits for a majority of validators to
    # build on its block whatever the load, so only the wait to get into a block shows the chain falling behind
    # (runs recorded before inclusion was tracked fall back to committed).
    measured = run.intended_to_included or run.intended_to_committed
    p99 = measured.percentiles_ms["p99"]
    return Verdicts(
        throughput_saturated=(run.committed_tps < SATURATION_SHARE * target_tps and not run.generator_fell_behind),
        latency_saturated=not p99 <= SATURATION_P99_INTERVALS * block_interval_s * 1e3,  # also NaN: nothing committed
        generator_fell_behind=run.generator_fell_behind,
    )


def load_summary(run: RunSummary, *, target_tps: float, interrupted: bool, block_interval_s: float,
                 failover: Failover | None = None) -> LoadSummary:
    """The summary.json of one run."""
    verdict = verdicts(run, target_tps, block_interval_s)
    return LoadSummary(
        schema=SUMMARY_SCHEMA, target_tps=target_tps, committed_tps=run.committed_tps, measured_s=run.measured_s,
        warmup_s=run.warmup_s, interrupted=interrupted, counts=_counts(run.counts),
        latency_ms=Latencies(_latency(run.intended_to_committed), _latency(run.sent_to_committed),
                             _latency(run.sent_to_accepted),
                             _latency(run.intended_to_included) if run.intended_to_included else None,
                             _latency(run.included_to_committed) if run.included_to_committed else None),
        schedule_lag_ms=_latency(run.schedule_lag), generator_fell_behind=verdict.generator_fell_behind,
        throughput_saturated=verdict.throughput_saturated, latency_saturated=verdict.latency_saturated,
        why=verdict.why(), failover=failover,
    )


def sweep_row(summary: LoadSummary, run_dir: Path) -> SweepRow:
    """One stage of a sweep: its summary's figures and verdict, and where it is."""
    # The sender's name for a transaction refused at the door and never taken; imported
    # here, by the writer's call, so that reading the files loads no HTTP client.
    from qmemo.load.answers import BUSY_BACKLOG

    percentiles = summary.latency_ms.intended_to_committed.percentiles_ms
    return SweepRow(summary.target_tps, summary.committed_tps, percentiles["p50"], percentiles["p99"],
                    summary.counts.lost, summary.counts.rejected_total, summary.counts.failed,
                    summary.throughput_saturated, summary.latency_saturated, summary.generator_fell_behind,
                    summary.why, str(run_dir), summary.survival.ratio if summary.survival else None,
                    summary.generator_cpu_us_per_tx,
                    agree=summary.agreement.agree if summary.agreement else None,
                    reorgs=summary.agreement.reorgs_total if summary.agreement else None,
                    planned=summary.counts.planned, door_refused=summary.counts.rejected.get(BUSY_BACKLOG, 0))


# --- files ------------------------------------------------------------------------------------

def read_summary(path: Path) -> LoadSummary:
    return read_record(LoadSummary, SUMMARY_SCHEMA, path)


def read_sweep(path: Path) -> Sweep:
    return read_record(Sweep, SWEEP_SCHEMA, path)


def write(path: Path, record: LoadSummary | Sweep) -> None:
    write_record(path, record)
