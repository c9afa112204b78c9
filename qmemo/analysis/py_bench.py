"""Reading `qmemo bench core` and `qmemo bench node` result files for the report.

Both benchmarks write one JSON document each (results/core-bench-<time>.json,
results/node-bench-<time>.json; schemas "qmemo-core-bench/1" and "qmemo-node-bench/1",
made by qmemo.bench.core_bench and qmemo.bench.node_figures). This module picks the
file (the newest by default, or the one the user names), checks its schema and lifts out
the figures the report prints, each kept with the file it came from. It never computes a
figure the benchmark did not write.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import orjson

from qmemo.bench.core_bench import SCHEMA as CORE_SCHEMA
from qmemo.bench.core_bench import STEPS as CORE_STEPS
from qmemo.bench.node_figures import SCHEMA as NODE_SCHEMA
from qmemo.analysis.results import display_path
from qmemo.errors import ConfigError
from qmemo.paths import RESULTS_DIR

T = TypeVar("T")
CORE_PATTERN = "core-bench-*.json"
NODE_PATTERN = "node-bench-*.json"


@dataclass(frozen=True, slots=True)
class CoreScheme:
    scheme: str
    implementation: str
    transaction_bytes: int
    median_us: Mapping[str, float]          # step key (core_bench.STEPS) -> median us per transaction
    verify_share_of_cold_validation: float


@dataclass(frozen=True, slots=True)
class CoreBench:
    source: Path
    transactions: int
    repeat: int
    schemes: tuple[CoreScheme, ...]


@dataclass(frozen=True, slots=True)
class NodeRun:
    threads: int
    admitted_per_s: float
    admitted_per_cpu_s: float | None
    node_cores_busy: float
    node_cpu_us_per_tx: float
    ratio_to_c_single_core: float | None


@dataclass(frozen=True, slots=True)
class NodeHeadline:
    """The node benchmark's same-run ratio: the one-thread node against its verifier's native loop."""

    verifier: str
    threads: int                            # the node run it is read from (1 when the file has one)
    reference: str                          # which native loop (node_figures.NATIVE_LOOPS)
    same_run_verify_per_s: float
    ratio: float | None
    ceiling: float | None                   # node_figures.ceiling's ratio (None: a file from before it)
    ceiling_verify_us: float | None
    ceiling_decode_hash_us: float | None


@dataclass(frozen=True, slots=True)
class NodeBench:
    source: Path
    scheme: str
    transactions: int
    c_verify_per_s: float | None            # the C single-core rate the run compared with
    c_source: str | None                    # the C summary.json it came from
    c_baseline_note: str                    # its source and run, or why there was none
    runs: tuple[NodeRun, ...]
    speedup_2_vs_1_threads: float | None
    breakdown_us_per_tx: Mapping[str, float]
    headline: NodeHeadline | None = None    # None: a document from before the headline


def newest(pattern: str, folder: Path = RESULTS_DIR) -> Path | None:
    """The newest result file matching `pattern`: the names carry a sortable UTC time."""
    found = sorted(folder.glob(pattern))
    return found[-1] if found else None


def _document(path: Path, schema: str, command: str) -> dict[str, Any]:
    try:
        document = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise ConfigError(f"cannot read the `{command}` result {path}: {exc}") from None
    if not isinstance(document, dict) or document.get("schema") != schema:
        found = document.get("schema") if isinstance(document, dict) else None
        raise ConfigError(f"{path} is not a `{command}` result ({schema}): its schema is {found!r}; re-run `{command}`")
    return document


def read_core_bench(path: Path) -> CoreBench:
    document = _document(path, CORE_SCHEMA, "qmemo bench core")
    try:
        schemes = tuple(
            CoreScheme(name, r["implementation"], r["transaction_bytes"],
                       {key: r["per_transaction_us"][key]["median_us"] for key, _ in CORE_STEPS},
                       r["verify_share_of_cold_validation"])
            for name, r in document["schemes"].items())
        parameters = document["parameters"]
        return CoreBench(path, parameters["transactions"], parameters["repeat"], schemes)
    except (KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: a `qmemo bench core` result without {exc}; re-run `qmemo bench core`") from None


def read_node_bench(path: Path) -> NodeBench:
    document = _document(path, NODE_SCHEMA, "qmemo bench node")
    try:
        baseline = document["c_baseline"]
        c_source = display_path(Path(baseline["source"])) if "ops_per_s" in baseline else None
        note = (f"from `{c_source}`, run `{baseline['run_id']}`{', quick' if baseline.get('quick') else ''}"
                if c_source else f"no C baseline at the time: {baseline.get('missing') or baseline.get('error')}")
        # With several rounds, each thread count's median run (files from before rounds: every run).
        runs = tuple(NodeRun(r["threads"], r["admitted_per_s"], r["admitted_per_cpu_s"], r["node_cores_busy"],
                             r["node_cpu_us_per_tx"], r["ratio_to_c_single_core"])
                     for r in document["runs"] if r.get("median", True))
        parameters = document["parameters"]
        return NodeBench(path, parameters["scheme"], parameters["txs"], baseline.get("ops_per_s"), c_source, note, runs,
                         document["speedup_2_vs_1_threads"], document["admission_breakdown_us_per_tx"],
                         _headline(document.get("headline")))
    except (KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"{path}: a `qmemo bench node` result without {exc}; re-run `qmemo bench node`") from None


def _headline(head: Mapping[str, Any] | None) -> NodeHeadline | None:
    """The file's `headline` (None: a file from before it); its `ceiling`, when there, whole."""
    if head is None:
        return None
    top = head.get("ceiling")
    ceiling = (None, None, None) if top is None else \
        (top["ratio"], top["verify_us_per_tx"], top["decode_hash_us_per_tx"])
    return NodeHeadline(head["verifier"], head["threads"], head["reference"], head["same_run_verify_per_s"],
                        head["ratio"], *ceiling)


@dataclass(frozen=True, slots=True)
class PyBenches:
    """The `qmemo bench core` and `qmemo bench node` results the report carries (None: none)."""

    core: CoreBench | None = None
    node: NodeBench | None = None
    unread: tuple[str, ...] = ()   # why a default (newest) file was passed over


def load_py_benches(core_file: str | Path | None = None, node_file: str | Path | None = None,
                    results_root: Path = RESULTS_DIR) -> PyBenches:
    """The named files (an unreadable one is an error), else the newest of each in
    `results_root`: an unreadable default, say an old format, costs only its part of the
    section, with the reason, and not the whole report."""
    unread: list[str] = []

    def pick(named: str | Path | None, pattern: str, read: Callable[[Path], T]) -> T | None:
        if named:
            return read(Path(named))
        found = newest(pattern, results_root)
        if found is None:
            return None
        try:
            return read(found)
        except ConfigError as exc:
            unread.append(str(exc))
            return None

    core = pick(core_file, CORE_PATTERN, read_core_bench)
    node = pick(node_file, NODE_PATTERN, read_node_bench)
    return PyBenches(core, node, tuple(unread))
