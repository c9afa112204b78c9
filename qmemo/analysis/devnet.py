"""Reading a devnet run folder (`qmemo gen` / devnet.sh) for the report's end-to-end section.

The devnet writes its run folder independently of the report (issue 6), so this reader
is tolerant: it takes the fields below from `summary.json` where it finds them, under a
few spellings, and leaves out what is missing instead of failing. Only the two TPS
figures are required. Expected layout (documented in docs/methodology.md):

    <run>/summary.json
      run_id                     str    (default: the folder's name)
      scheme, nodes, duration_s         optional context
      target_tps                 number the schedule's rate   (also tps.target, config.tps)
      committed_tps              number committed transactions / s    (also tps.committed)
      counts                     {planned, sent, accepted, rejected, committed, lost}
                                  (rejected may be a per-reason mapping: it is summed)
      latency_ms                 {intended_to_committed | sent_to_committed | sent_to_accepted:
                                  {p50, p90, p95, p99, p99_9, max}}  (latency_s is converted)
                                 or the kinds at the top level as {percentiles_ms: {p50, ..,
                                  "p99.9"}, max_ms} (the shape of qmemo.load.latency.RunSummary)
      verify_ops_per_s_per_core  number node-side verifications per busy core (/metrics)
      schedule_lag_ms            {p99, max} (or schedule_lag in the shape above);
                                 generator_fell_behind: bool
      sweep                      [{target_tps, committed_tps, latency_ms: {intended_to_committed: {p50, p99}}}]
    <run>/sweep.json             the same list of sweep points, if not inside summary.json

Pure parsing apart from `load_devnet_run`, which reads the files.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from qmemo.errors import ConfigError

LATENCY_KINDS = ("intended_to_committed", "sent_to_committed", "sent_to_accepted")
PERCENTILES = ("p50", "p90", "p95", "p99", "p99_9", "max")
# A run that committed less than this share of what it offered ran the chain at its limit.
SATURATION_SHARE = 0.9
# Other spellings of a percentile key we accept: "p99.9" and "p999" are both common.
_PERCENTILE_ALIASES = {"p99_9": ("p99_9", "p99.9", "p999"), "p50": ("p50", "median")}


@dataclass(frozen=True, slots=True)
class SweepPoint:
    target_tps: float
    committed_tps: float
    p50_ms: float | None
    p99_ms: float | None


@dataclass(frozen=True, slots=True)
class DevnetRun:
    source: Path                                  # the summary.json read
    run_id: str
    scheme: str | None
    nodes: int | None
    duration_s: float | None
    target_tps: float
    committed_tps: float
    counts: Mapping[str, int]
    latency_ms: Mapping[str, Mapping[str, float]]  # kind -> percentile -> ms
    verify_rate_per_core: float | None
    generator_fell_behind: bool | None
    schedule_lag_ms: Mapping[str, float]
    sweep: tuple[SweepPoint, ...]
    sweep_source: Path | None = None              # sweep.json when the sweep was not in summary.json

    @property
    def committed_share(self) -> float:
        return self.committed_tps / self.target_tps if self.target_tps else float("nan")

    @property
    def saturated(self) -> bool:
        """Whether the chain fell short of the offered load somewhere in this run (committed
        below SATURATION_SHARE of target): only then is the committed rate a capacity, not a
        lower bound of one."""
        points = [(self.target_tps, self.committed_tps), *((p.target_tps, p.committed_tps) for p in self.sweep)]
        return any(committed < SATURATION_SHARE * target for target, committed in points)

    @property
    def max_committed_tps(self) -> float:
        """The most the chain committed in this run or its sweep: the node's end-to-end rate."""
        return max([self.committed_tps, *(p.committed_tps for p in self.sweep)])


def _get(data: Mapping[str, Any], *paths: str) -> Any:
    """The value at the first dotted path present in `data`, else None (a key that itself
    contains a dot, like "p99.9", is matched whole first)."""
    for path in paths:
        if path in data:
            return data[path]
        node: Any = data
        for key in path.split("."):
            if not isinstance(node, Mapping) or key not in node:
                break
            node = node[key]
        else:
            return node
    return None


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def parse_percentiles(data: Any, scale: float = 1.0) -> dict[str, float]:
    """{p50: .., p99: ..} from a mapping, under the accepted spellings, times `scale`.
    Also takes the generator's own shape: {percentiles_ms: {p50: ..}, max_ms: ..}."""
    if not isinstance(data, Mapping):
        return {}
    if isinstance(data.get("percentiles_ms"), Mapping):
        return {**parse_percentiles(data["percentiles_ms"]),
                **({"max": float(data["max_ms"])} if _number(data.get("max_ms")) is not None else {})}
    out = {}
    for name in PERCENTILES:
        value = _number(_get(data, *_PERCENTILE_ALIASES.get(name, (name,))))
        if value is not None:
            out[name] = value * scale
    return out


def parse_latencies(data: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Latency percentiles in ms per kind, from latency_ms (or latency_s, converted), or
    from the kinds at the top level in the generator's {percentiles_ms, max_ms} shape."""
    for key, scale in (("latency_ms", 1.0), ("latency_s", 1e3)):
        block = data.get(key)
        if isinstance(block, Mapping):
            return {kind: p for kind in LATENCY_KINDS if (p := parse_percentiles(block.get(kind), scale))}
    return {kind: p for kind in LATENCY_KINDS if (p := parse_percentiles(data.get(kind)))}


def _count(value: Any) -> int | None:
    """A count, or the total of a per-reason breakdown ({"bad_signature": 3, ...})."""
    if isinstance(value, Mapping):
        return sum(int(v) for v in value.values() if _number(v) is not None)
    number = _number(value)
    return int(number) if number is not None else None


def parse_sweep(points: Any) -> tuple[SweepPoint, ...]:
    if isinstance(points, Mapping):
        points = points.get("points", points.get("rows"))   # rows: `qmemo gen --sweep`'s sweep.json
    if not isinstance(points, list):
        return ()
    out = []
    for point in points:
        if not isinstance(point, Mapping):
            continue
        target = _number(_get(point, "target_tps", "tps.target"))
        committed = _number(_get(point, "committed_tps", "tps.committed"))
        if target is None or committed is None:
            continue
        latency = parse_latencies(point).get("intended_to_committed", {})
        p50 = latency.get("p50", _number(point.get("p50_ms")))
        p99 = latency.get("p99", _number(point.get("p99_ms")))
        out.append(SweepPoint(target, committed, p50, p99))
    return tuple(sorted(out, key=lambda p: p.target_tps))


def parse_devnet_summary(data: Mapping[str, Any], source: Path, sweep: Any = None,
                         sweep_source: Path | None = None) -> DevnetRun:
    """A DevnetRun from a parsed summary.json; ConfigError when the TPS figures are missing."""
    target = _number(_get(data, "target_tps", "tps.target", "config.target_tps", "config.tps"))
    committed = _number(_get(data, "committed_tps", "tps.committed"))
    if target is None or committed is None:
        raise ConfigError(f"{source} has no target_tps/committed_tps: is it a devnet run's summary.json?")
    counts = _get(data, "counts")
    nodes = _number(_get(data, "nodes", "config.nodes"))
    behind = _get(data, "generator_fell_behind", "schedule_lag.behind")
    return DevnetRun(
        source=source,
        run_id=str(_get(data, "run_id") or source.parent.name),
        scheme=_get(data, "scheme", "config.scheme"),
        nodes=int(nodes) if nodes is not None else None,
        duration_s=_number(_get(data, "duration_s", "config.duration_s")),
        target_tps=target,
        committed_tps=committed,
        counts={k: c for k, v in counts.items() if (c := _count(v)) is not None} if isinstance(counts, Mapping) else {},
        latency_ms=parse_latencies(data),
        verify_rate_per_core=_number(_get(data, "verify_ops_per_s_per_core", "verify.ops_per_s_per_core")),
        generator_fell_behind=behind if isinstance(behind, bool) else None,
        schedule_lag_ms=parse_percentiles(_get(data, "schedule_lag_ms", "schedule_lag")),
        sweep=parse_sweep(sweep if sweep is not None else data.get("sweep")),
        sweep_source=sweep_source if sweep is not None else source,
    )


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc


def load_devnet_run(run_dir: str | Path) -> DevnetRun:
    """Read `<run_dir>/summary.json` (and `sweep.json` when present)."""
    run_dir = Path(run_dir)
    summary = run_dir / "summary.json"
    sweep_file = run_dir / "sweep.json"
    if not summary.is_file() and sweep_file.is_file():
        return _load_sweep_run(run_dir, sweep_file)
    if not summary.is_file():
        raise ConfigError(f"{run_dir} is not a devnet run folder: it has no summary.json")
    data = _read_json(summary)
    if not isinstance(data, Mapping):
        raise ConfigError(f"{summary} is not a JSON object")
    if sweep_file.is_file() and "sweep" not in data:
        return parse_devnet_summary(data, summary, _read_json(sweep_file), sweep_file)
    return parse_devnet_summary(data, summary)


def _load_sweep_run(run_dir: Path, sweep_file: Path) -> DevnetRun:
    """A `qmemo gen --sweep` folder: its sweep, with the highest unsaturated stage as the run.

    Each row of sweep.json names its stage's folder ("run"); the stage that committed the
    most without saturating stands for the run's summary (or the highest if all saturated).
    """
    sweep = _read_json(sweep_file)
    rows = sweep.get("rows") if isinstance(sweep, Mapping) else None
    stages = [r for r in rows or [] if isinstance(r, Mapping) and isinstance(r.get("run"), str)]
    if not stages:
        raise ConfigError(f"{sweep_file} names no stage folders")
    calm = [r for r in stages if not r.get("saturated")] or stages
    best = max(calm, key=lambda r: _number(r.get("committed_tps")) or 0.0)
    stage_summary = Path(best["run"]) / "summary.json"
    if not stage_summary.is_absolute() or not stage_summary.is_file():
        stage_summary = run_dir / Path(best["run"]).name / "summary.json"
    data = _read_json(stage_summary)
    if not isinstance(data, Mapping):
        raise ConfigError(f"{stage_summary} is not a JSON object")
    return replace(parse_devnet_summary(data, stage_summary, sweep, sweep_file), run_id=run_dir.name)
