"""Reading a devnet run folder (`qmemo gen` / devnet.sh) for the report's end-to-end section.

The generator writes its run folder in one schema, qmemo.load.summary, and this module
reads it with the same dataclasses: no second spellings, no figure re-derived. In
particular what limited a run is the writer's verdicts, read from the file; the report
calls a committed rate a capacity only where the chain's throughput saturated. Two
layouts (docs/devnet.md):

    <run>/summary.json           one run ("qmemo-load-summary/3")
    <run>/sweep.json             a sweep ("qmemo-sweep/3"), one stage folder per row,
    <run>/stage-<rate>tps/...    each with its own summary.json
    <run>/gen/...                a devnet.sh run folder: the generator's folder is gen/

Pure parsing apart from `load_devnet_run`, which reads the files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from qmemo.errors import ConfigError, DecodeError
from qmemo.load.shard_summary import CrossShard, Invariants, ShardCounts
from qmemo.load.summary import Latency, LoadSummary, Sweep, read_summary, read_sweep

LATENCY_KINDS = ("intended_to_committed", "sent_to_committed", "sent_to_accepted")
# The report's percentile names, from the file's ("p99.9" reads badly as a key).
_PERCENTILES = {"p50": "p50", "p90": "p90", "p95": "p95", "p99": "p99", "p99_9": "p99.9"}


@dataclass(frozen=True, slots=True)
class SweepPoint:
    """One stage of a sweep: its row of sweep.json (`index` is the row's position there,
    so a figure read from it can be cited as `rows[<index>].<field>`)."""

    target_tps: float
    committed_tps: float
    p50_ms: float | None
    p99_ms: float | None
    throughput_saturated: bool
    # The verify stage's share of the machine's CPU (the row's `survival_ratio`; older sweeps: None).
    verify_share: float | None = None
    latency_saturated: bool = False
    generator_fell_behind: bool = False
    why: str = ""
    index: int = 0
    # Past saturation as well as below it: the row's lost, door_refused (with its share of
    # the planned), agree and reorgs (None where the sweep predates them).
    lost: int = 0
    door_refused: int | None = None
    door_refused_share: float | None = None
    agree: bool | None = None
    reorgs: int | None = None


@dataclass(frozen=True, slots=True)
class DevnetRun:
    source: Path                                  # the summary.json read
    run_id: str
    measured_s: float
    target_tps: float
    committed_tps: float
    counts: Mapping[str, int]                     # planned, sent, ..., rejected (the total)
    latency_ms: Mapping[str, Mapping[str, float]]  # kind -> percentile (p50 .. p99_9, max) -> ms
    generator_fell_behind: bool
    schedule_lag_ms: Mapping[str, float]
    throughput_saturated: bool                    # the writer's verdicts on this run
    latency_saturated: bool
    why: str = ""                                 # those that hold, in words ("" if none)
    sweep: tuple[SweepPoint, ...] = ()
    sweep_source: Path | None = None              # sweep.json, for a sweep folder
    # A sharded devnet's run (qmemo.load.shard_summary, as the writer's summary holds them).
    cross_shard: CrossShard | None = None
    shards: tuple[ShardCounts, ...] = ()
    invariants: Invariants | None = None

    @property
    def committed_share(self) -> float:
        return self.committed_tps / self.target_tps if self.target_tps else float("nan")

    @property
    def saturated(self) -> bool:
        """Whether the chain's throughput fell short of the offered load somewhere in this
        run or its sweep (the writer's `throughput_saturated`): only then is the committed
        rate a capacity, not a lower bound of one. Latency past its bound or a generator
        behind its schedule does not make one: the chain committed all it was offered, or
        the generator, not the chain, set the rate."""
        return self.throughput_saturated or any(p.throughput_saturated for p in self.sweep)

    @property
    def max_committed_tps(self) -> float:
        """The most the chain committed in this run or its sweep: the node's end-to-end rate."""
        return max([self.committed_tps, *(p.committed_tps for p in self.sweep)])


def _percentiles(latency: Latency) -> dict[str, float]:
    """The measured percentiles and max (a kind with no samples has none)."""
    out = {name: value for name, key in _PERCENTILES.items()
           if (value := latency.percentiles_ms.get(key)) is not None}
    if latency.max_ms is not None:
        out["max"] = latency.max_ms
    return out


def devnet_run(summary: LoadSummary, source: Path, run_id: str) -> DevnetRun:
    """The report's view of one run's summary."""
    counts = summary.counts
    return DevnetRun(
        source=source, run_id=run_id, measured_s=summary.measured_s, target_tps=summary.target_tps,
        committed_tps=summary.committed_tps,
        counts={"planned": counts.planned, "sent": counts.sent, "accepted": counts.accepted,
                "committed": counts.committed, "rejected": counts.rejected_total, "lost": counts.lost,
                "failed": counts.failed, "unsent": counts.unsent},
        latency_ms={kind: p for kind in LATENCY_KINDS if (p := _percentiles(getattr(summary.latency_ms, kind)))},
        generator_fell_behind=summary.generator_fell_behind,
        schedule_lag_ms=_percentiles(summary.schedule_lag_ms),
        throughput_saturated=summary.throughput_saturated, latency_saturated=summary.latency_saturated,
        why=summary.why,
        cross_shard=summary.cross_shard, shards=summary.shards or (), invariants=summary.invariants,
    )


def sweep_points(sweep: Sweep) -> tuple[SweepPoint, ...]:
    return tuple(sorted((SweepPoint(r.target_tps, r.committed_tps, r.p50_ms, r.p99_ms, r.throughput_saturated,
                                      r.survival_ratio, r.latency_saturated, r.generator_fell_behind, r.why, i,
                                      r.lost, r.door_refused, r.door_refused_share, r.agree, r.reorgs)
                         for i, r in enumerate(sweep.rows)), key=lambda p: p.target_tps))


def load_devnet_run(run_dir: str | Path) -> DevnetRun:
    """Read `<run_dir>/summary.json`, or a sweep folder's sweep.json and its best stage.

    A devnet.sh run folder (runs/<id>/, the path devnet.sh prints) keeps the generator's
    folder in gen/: it is read there, and the run keeps the devnet.sh folder's name.
    """
    run_dir = Path(run_dir)
    generator_dir = run_dir / "gen"
    if not _is_generator_folder(run_dir) and _is_generator_folder(generator_dir):
        return replace(load_devnet_run(generator_dir), run_id=run_dir.name)
    summary, sweep_file = run_dir / "summary.json", run_dir / "sweep.json"
    try:
        if summary.is_file():
            return devnet_run(read_summary(summary), summary, run_dir.name)
        if sweep_file.is_file():
            return _load_sweep_run(run_dir, sweep_file)
    except (OSError, DecodeError) as exc:
        raise ConfigError(f"cannot read the devnet run {run_dir}: {exc}") from exc
    raise ConfigError(f"{run_dir} is not a devnet run folder: it has no summary.json or sweep.json "
                      "(nor gen/ with one: a devnet.sh run without load has no figures)")


def command_file(run: DevnetRun) -> Path | None:
    """devnet.sh's `command` (the command line as typed) in the run's folder: looked for from
    its summary's folder up to the one named after the run; None for a folder without one
    (a bare `qmemo gen` run)."""
    for folder in (run.source.parent, *run.source.parents):
        if (folder / "command").is_file():
            return folder / "command"
        if folder.name == run.run_id:
            break
    return None


def _is_generator_folder(folder: Path) -> bool:
    return (folder / "summary.json").is_file() or (folder / "sweep.json").is_file()


def limited(point: SweepPoint | DevnetRun) -> bool:
    """Whether any verdict limited a stage or run (a sweep stops at such a stage)."""
    return point.throughput_saturated or point.latency_saturated or point.generator_fell_behind


def held_and_limit(points: Sequence[SweepPoint]) -> tuple[SweepPoint | None, SweepPoint | None]:
    """(the highest stage by offered rate below the first limited one that no verdict
    limited, that first limited stage); either may be None. A sweep runs on past its first
    limited stage, and a stage above it that nothing limited (overload pushed back at the
    door, a quiet minute) is no saturation: only the stages up to the first limited one
    count. The headline (qmemo.analysis.headline) is read from these two."""
    ordered = sorted(points, key=lambda p: p.target_tps)
    first = next((i for i, p in enumerate(ordered) if limited(p)), len(ordered))
    return (ordered[first - 1] if first else None), (ordered[first] if first < len(ordered) else None)


def _load_sweep_run(run_dir: Path, sweep_file: Path) -> DevnetRun:
    """A `qmemo gen --sweep` folder: its sweep, with its headline stage as the run.

    Each row of sweep.json names its stage's folder ("run"); the highest stage no verdict
    limited stands for the run's summary (or, if the first stage was already limited, that
    one), so the run's summary and node-stages.json are the headline stage's.
    """
    sweep = read_sweep(sweep_file)
    if not sweep.rows:
        raise ConfigError(f"{sweep_file} names no stage folders")
    top, above = held_and_limit(sweep_points(sweep))
    stage = top or above
    best = sweep.rows[stage.index] if stage is not None else sweep.rows[-1]
    # The stage beside sweep.json comes first: the folder may have moved since the sweep
    # ran (a fixture, a copy, devnet.sh's gen/), and the path it was written under may
    # now hold another run's stage.
    stage_summary = run_dir / Path(best.run).name / "summary.json"
    if not stage_summary.is_file():
        stage_summary = Path(best.run) / "summary.json"
    run = devnet_run(read_summary(stage_summary), stage_summary, run_dir.name)
    return replace(run, sweep=sweep_points(sweep), sweep_source=sweep_file)
