"""A finished scenario run folder (docs/scenarios.md, "The run folder"), read for the report.

`load_scenario_run(dir)` reads what `qmemo scenario run` wrote - the effective manifest,
`timeline.jsonl`, `metrics/node-*.jsonl`, `gen/transactions.csv`, `invariants.json` and,
when there, `propagation.json` - and `per_second()` turns it into the timeline the report
draws: committed transactions per second and the p99 latency of each second's
transactions (generator), each node's committed transactions per second and its blocks
not yet final (node metrics), and the perturbations with their times.

Reads files only; never measures, never fills in a figure the files do not hold.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from qmemo.api_schema import decode_metrics, decode_status
from qmemo.errors import ConfigError, DecodeError
from qmemo.scenario.verdict import Verdict, read as read_verdict

# Timeline entries that are bookkeeping, not something done to the network.
# A flood is drawn from its schedule ("flood scheduled": at_s, for_s), not from when its
# process happened to exit.
_NOT_PERTURBATIONS = {"nodes healthy", "load started", "load finished", "mempools drained", "flood finished"}


@dataclass(frozen=True, slots=True)
class Event:
    """Something done to the network, `t_s` seconds after the load started."""

    t_s: float
    label: str


@dataclass(frozen=True, slots=True)
class Second:
    """One second of the run, from the load's start."""

    t_s: int
    committed: int                         # generator transactions committed in this second
    p99_ms: float | None                   # p99 intended->committed of the ones intended in it
    intended: int


@dataclass(frozen=True, slots=True)
class NodeSample:
    t_s: float
    ok: bool
    committed_total: int | None
    height: int | None
    final_height: int | None


@dataclass(frozen=True, slots=True)
class ScenarioRun:
    source: Path
    manifest: dict[str, Any]               # the effective manifest (manifest.json)
    verdict: Verdict | None                # None: a `qmemo scenario propagation` folder
    events: tuple[Event, ...] = ()
    seconds: tuple[Second, ...] = ()
    nodes: dict[str, tuple[NodeSample, ...]] = field(default_factory=dict)
    propagation: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return str(self.manifest.get("name", self.verdict.scenario if self.verdict else "propagation"))


def _json_lines(path: Path) -> list[dict[str, Any]]:
    try:
        return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not JSON lines: {exc}") from None


def _json(path: Path) -> Any:
    try:
        return orjson.loads(path.read_bytes())
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not JSON: {exc}") from None


def event_label(line: dict[str, Any]) -> str:
    """A short label for a timeline entry: what, and to whom."""
    what = str(line["what"])
    for key in ("nodes", "node", "groups", "zones"):
        if key in line:
            value = line[key]
            if key == "zones" and isinstance(value, list):
                what += " " + "/".join(str(v) for v in value)
            elif key in ("nodes", "node"):
                # "SIGSTOP node-1", "kill -9 nodes 0,1,2": a bare [1] reads as a footnote.
                names = value if isinstance(value, list) else [value]
                what += (f" node-{names[0]}" if len(names) == 1 else
                         " nodes " + ",".join(str(v) for v in names))
            else:
                what += " " + str(value).replace(" ", "")
    if "profile" in line:
        what += f" -> {line['profile']}"
    return what


def read_events(path: Path) -> tuple[tuple[Event, ...], float | None]:
    """The perturbations of a timeline, and the load's start as wall time (None if unknown)."""
    events, t0 = [], None
    for line in _json_lines(path):
        if line.get("t_s") is None:
            continue
        if t0 is None:
            t0 = float(line["time_s"]) - float(line["t_s"])
        if line["what"] == "flood scheduled":
            start = float(line["at_s"])
            events += [Event(start, f"flood {line['kind']} {line['rate']:g}/s"),
                       Event(start + float(line["for_s"]), "flood ends")]
        elif line["what"] not in _NOT_PERTURBATIONS:
            events.append(Event(float(line["t_s"]), event_label(line)))
    return tuple(sorted(events, key=lambda e: e.t_s)), t0


def per_second(rows: list[tuple[float, float | None]]) -> tuple[Second, ...]:
    """(intended_s, committed_s or None) per transaction -> one `Second` per second of the run."""
    committed: dict[int, int] = defaultdict(int)
    latencies: dict[int, list[float]] = defaultdict(list)
    intended: dict[int, int] = defaultdict(int)
    for intended_s, committed_s in rows:
        second = int(math.floor(intended_s))
        intended[second] += 1
        if committed_s is not None:
            committed[int(math.floor(committed_s))] += 1
            latencies[second].append((committed_s - intended_s) * 1000.0)
    if not intended:
        return ()
    last = max([*intended, *committed])
    return tuple(Second(t, committed.get(t, 0), _p99(latencies.get(t, [])), intended.get(t, 0))
                 for t in range(0, last + 1))


def _p99(values: list[float]) -> float | None:
    """The nearest-rank 99th percentile (None for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]


def read_transactions(path: Path) -> list[tuple[float, float | None]]:
    try:
        with path.open(newline="") as handle:
            return [(float(row["intended_s"]), float(row["committed_s"]) if row["committed_s"] else None)
                    for row in csv.DictReader(handle)]
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    except (KeyError, ValueError) as exc:
        raise ConfigError(f"{path} is not a generator transactions.csv: {exc}") from None


def read_node_samples(path: Path, t0: float) -> tuple[NodeSample, ...]:
    """A node's timeline (qmemo.scenario.observe: each line its /status and /metrics, null
    where it did not answer), decoded with the node's own document classes."""
    samples = []
    for number, line in enumerate(_json_lines(path), 1):
        where = f"{path} line {number}"
        try:
            status = decode_status(line["status"], f"{where}: status") if line["status"] is not None else None
            metrics = decode_metrics(line["metrics"], f"{where}: metrics") if line["metrics"] is not None else None
            samples.append(NodeSample(round(float(line["time_s"]) - t0, 3), bool(line["ok"]),
                                      metrics.tx.committed if metrics else None, status.height if status else None,
                                      status.final_height if status else None))
        except KeyError as exc:
            raise ConfigError(f"{where} has no {exc}: not a scenario metrics timeline") from None
        except DecodeError as exc:
            raise ConfigError(str(exc)) from None
    return tuple(samples)


def load_scenario_run(run_dir: str | Path) -> ScenarioRun:
    """Everything the report shows of one run folder (or of a `qmemo scenario propagation`
    folder: its propagation.json alone); ConfigError naming the file if one is missing or bad."""
    run_dir = Path(run_dir)
    if not (run_dir / "invariants.json").is_file():
        if (run_dir / "propagation.json").is_file():
            return ScenarioRun(run_dir, {}, None, propagation=_json(run_dir / "propagation.json"))
        raise ConfigError(f"{run_dir} is neither a finished scenario run folder (no invariants.json) "
                          "nor a propagation folder (no propagation.json)")
    manifest = _json(run_dir / "manifest.json").get("effective", {})
    verdict = read_verdict(run_dir)
    events, t0 = read_events(run_dir / "timeline.jsonl")
    transactions = run_dir / "gen" / "transactions.csv"
    seconds = per_second(read_transactions(transactions)) if transactions.is_file() else ()
    nodes = {path.stem: read_node_samples(path, t0) for path in sorted((run_dir / "metrics").glob("*.jsonl"))} \
        if t0 is not None else {}
    propagation = _json(run_dir / "propagation.json") if (run_dir / "propagation.json").is_file() else None
    return ScenarioRun(run_dir, manifest, verdict, events, seconds, nodes, propagation)
