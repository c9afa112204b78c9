"""The report's scheme A/B section: sweeps of different signature schemes side by side.

`qmemo report --devnet A --devnet B ...` with runs of different schemes (docs/schemes.md
runs them) answers "what does this scheme cost the chain end to end": the throughput-
latency curve of each (one line per scheme), the bytes its blocks carry and the share of
the nodes' CPU that went to verifying signatures. The figures come from each stage's
`nodes.json` (qmemo.load.node_record: every node's /metrics before and after the stage,
the blocks the generator saw); the curves from the sweeps themselves.

The verify share is the nodes' verify CPU over their process CPU, summed over nodes,
between the two /metrics documents of a stage. Where the nodes report per-stage CPU
(`stages.by_stage.verify.cpu_s`, docs/api.md) that is the verify CPU; else the wall time
of the verify calls (`verify.seconds`), which includes waiting for the GIL and, on a busy
machine, for a core: an upper bound that can pass 100%. The table says which. The nodes'
CPU per transaction (process CPU over the transactions the stage's blocks carried) needs
no such caveat. A run without nodes.json (written before it existed) shows "-".

Pure apart from `load_scheme_runs`, which reads the files.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from qmemo.analysis import plots
from qmemo.analysis.devnet import DevnetRun
from qmemo.analysis.headline import headline
from qmemo.analysis.markdown import Section, image, num, percent, si_bytes, source_note, table
from qmemo.analysis.results import display_path
from qmemo.api_schema import MetricsSnapshot
from qmemo.errors import DecodeError
from qmemo.load.node_record import NODES_FILE, RunNodes, read_nodes
from qmemo.load.summary import read_sweep

STAGE_CPU = "stage CPU"                   # the nodes' own per-stage CPU accounting
VERIFY_TIME = "verify wall time / CPU"    # verify calls' wall time over process CPU (an upper bound)


@dataclass(frozen=True, slots=True)
class StageCosts:
    """What one run (or sweep stage) cost the nodes."""

    target_tps: float
    blocks: int                           # blocks with transactions
    tx_bytes_per_block: float | None      # mean over those blocks
    tx_bytes_per_tx: float | None
    txs_per_block: float | None
    cpu_us_per_tx: float | None           # the nodes' process CPU (summed) per transaction in the blocks
    verify_cpu_s: float | None            # summed over nodes
    process_cpu_s: float | None
    share_from: str | None                # STAGE_CPU or VERIFY_TIME

    @property
    def verify_share(self) -> float | None:
        if self.verify_cpu_s is None or not self.process_cpu_s:
            return None
        return self.verify_cpu_s / self.process_cpu_s


@dataclass(frozen=True, slots=True)
class SchemeRun:
    run: DevnetRun
    scheme: str | None
    stages: tuple[StageCosts, ...]        # by target rate
    sources: tuple[Path, ...]             # the nodes.json files read
    verifier: str | None = None           # the nodes' verifier setting ("fast" or "liboqs"), from their /metrics

    @property
    def label(self) -> str:
        return self.scheme or self.run.run_id

    @property
    def best(self) -> StageCosts | None:
        """The stage the run's summary stands for (the highest unlimited one), else the last."""
        for stage in self.stages:
            if stage.target_tps == self.run.target_tps:
                return stage
        return self.stages[-1] if self.stages else None


def _verify_cpu(document: MetricsSnapshot) -> tuple[float, str]:
    """The node's verify CPU: its own stage accounting, else the verify calls' wall time."""
    stage = document.stages.by_stage.get("verify")
    if stage is not None:
        return stage.cpu_s, STAGE_CPU
    return sum(document.verify.seconds.values()), VERIFY_TIME


def stage_costs(record: RunNodes, target_tps: float) -> StageCosts:
    """The costs of one stage from its nodes record (differences of the two /metrics)."""
    verify_s = process_s = 0.0
    sources = set()
    measured = False
    for node in record.nodes:
        if node.start is None or node.end is None:
            continue
        (v0, source0), (v1, source1) = _verify_cpu(node.start), _verify_cpu(node.end)
        c0, c1 = node.start.process.cpu_seconds, node.end.process.cpu_seconds
        if source0 != source1 or v1 < v0 or c1 < c0:   # a restart: no difference
            continue
        verify_s += v1 - v0
        process_s += c1 - c0
        sources.add(source1)
        measured = True
    full = [b for b in record.blocks if b.tx_count and b.ours]
    # A block that also held others' transactions: ours stand for all of them, by their mean size.
    block_bytes = [b.our_tx_bytes * b.tx_count / b.ours for b in full]
    txs = sum(b.tx_count for b in full)
    return StageCosts(
        target_tps=target_tps, blocks=len(full),
        tx_bytes_per_block=sum(block_bytes) / len(full) if full else None,
        tx_bytes_per_tx=sum(block_bytes) / txs if txs else None,
        txs_per_block=txs / len(full) if full else None,
        cpu_us_per_tx=process_s / txs * 1e6 if measured and txs else None,
        verify_cpu_s=verify_s if measured else None, process_cpu_s=process_s if measured else None,
        share_from=(STAGE_CPU if sources == {STAGE_CPU} else VERIFY_TIME) if measured else None)


def _stage_folders(run: DevnetRun) -> list[tuple[float, Path]]:
    """(target TPS, folder) of each stage of a sweep, or of the one run."""
    if run.sweep_source is None:
        return [(run.target_tps, run.source.parent)]
    folders = []
    for row in read_sweep(run.sweep_source).rows:
        beside = run.sweep_source.parent / Path(row.run).name   # as qmemo.analysis.devnet reads them
        folders.append((row.target_tps, beside if beside.is_dir() else Path(row.run)))
    return sorted(folders)


def verifier_label(scheme: str | None, verifier: str | None) -> str | None:
    """Which code verified, and what its time depends on: a rate never stands without it."""
    from qmemo.crypto.schemes import backend_of, canonical_name
    from qmemo.errors import UnknownScheme

    if scheme is None or verifier is None:
        return None
    try:
        backend = backend_of(canonical_name(scheme), verifier)
    except UnknownScheme:
        return verifier
    return {"falcon-vt": "qMEMO fast (variable-time hash-to-point, cached keys)",
            "mldsa-vt": "qMEMO (variable-time: cached keys)",
            "liboqs": "liboqs (constant-time hash-to-point)" if scheme.startswith("Falcon") else "liboqs"
            }.get(backend, backend)


def load_scheme_run(run: DevnetRun) -> SchemeRun:
    """The run with each stage's costs (stages without a readable nodes.json are left out)."""
    stages, sources, scheme, verifier = [], [], None, None
    for target, folder in _stage_folders(run):
        try:
            record = read_nodes(folder / NODES_FILE)
        except (FileNotFoundError, DecodeError):
            continue
        scheme = scheme or record.scheme
        verifier = verifier or next((node.end.verify.verifier for node in record.nodes if node.end is not None), None)
        stages.append(stage_costs(record, target))
        sources.append(folder / NODES_FILE)
    return SchemeRun(run, scheme, tuple(stages), tuple(sources), verifier)


def _source(scheme: SchemeRun) -> str:
    """The files a row came from: a sweep's stage records as one pattern, else the file itself."""
    if scheme.run.sweep_source is not None and scheme.sources:
        return f"{display_path(scheme.run.sweep_source.parent)}/stage-*/{NODES_FILE}"
    return display_path(scheme.sources[0] if scheme.sources else scheme.run.source)


def scheme_ab_section(runs: Sequence[DevnetRun], plot_dir: Path, caption: str) -> Section | None:
    """Side by side when two or more runs were given; None otherwise (nothing to compare)."""
    if len(runs) < 2:
        return None
    schemes = [load_scheme_run(run) for run in runs]
    rows = []
    for s in schemes:
        best = s.best
        line = headline(s.run)      # the run's headline saturation, as "The answer" states it
        rows.append((s.label, verifier_label(s.scheme, s.verifier), s.run.run_id,
                     ("" if line.is_capacity else "≥") + num(float(line.committed_tps.value)), line.outcome,
                     num(best.target_tps) if best else None, num(s.run.latency_ms.get("intended_to_committed", {}).get("p99"), 0),
                     num(best.txs_per_block) if best else None, num(best.tx_bytes_per_tx) if best else None,
                     si_bytes(best.tx_bytes_per_block) if best else None, num(best.cpu_us_per_tx) if best else None,
                     percent(best.verify_share) if best else None, best.share_from if best else None))
    body = [
        "Each run's sweep (or single run) side by side, with the verifier its nodes ran and what that "
        "verifier's time depends on (a variable-time verifier is faster, and says so). Committed TPS at "
        "saturation: each run's headline (\"The answer\"), the highest stage no verdict limited, marked ≥ where "
        "saturation was not reached (a lower bound); saturation: saturated, not reached, generator bound (the "
        "stage above was limited only by the generator) or limited (the first stage already was). The per-block "
        "and CPU figures are those of the stage the run stands for (the same stage): transaction bytes per block "
        "is the mean over blocks that held "
        "transactions; node CPU per transaction is the nodes' process CPU in that stage, summed over nodes, over "
        "the transactions its blocks carried (every node admits or validates each one); verify share is the nodes' "
        "verify CPU over their process CPU (`stage CPU`: the nodes' own per-stage accounting; `verify wall time / "
        "CPU`: the wall time of the verify calls, which includes waiting for the GIL and, on a busy machine, for a "
        "core - an upper bound that can pass 100%).",
        table(("scheme", "verifier (timing)", "run", "committed TPS at saturation", "saturation",
               "stage it stands for (TPS)", "p99 ms (that stage)", "txs per block", "bytes per tx",
               "tx bytes per block", "node CPU µs per tx", "verify share of CPU", "share from"),
              rows, "lllrl" + "r" * 7 + "l"),
        source_note(*(_source(s) for s in schemes)),
    ]
    by_stage = [(s.label, num(c.target_tps), c.blocks, num(c.txs_per_block), si_bytes(c.tx_bytes_per_block),
                 num(c.cpu_us_per_tx), percent(c.verify_share), c.share_from) for s in schemes for c in s.stages]
    if by_stage:
        body += ["### Per stage", table(("scheme", "target TPS", "blocks", "txs per block", "tx bytes per block",
                                         "node CPU µs per tx", "verify share of CPU", "share from"), by_stage,
                                        "lrrrrrrl")]
    labels = [s.label for s in schemes]
    # Two runs of one scheme (a repeat, another verifier) each keep their line.
    curves = {(s.label if labels.count(s.label) == 1 else f"{s.label} ({s.run.run_id})"):
              [(p.target_tps, p.committed_tps, p.p50_ms, p.p99_ms) for p in s.run.sweep]
              for s in schemes if s.run.sweep}
    plot_names: tuple[str, ...] = ()
    if curves:
        name = "schemes_throughput_latency.png"
        plots.throughput_latency(plot_dir / name, curves, caption)
        body.append(image(name, "throughput against latency, one line per scheme"))
        plot_names = (name,)
    return Section("Schemes side by side", "\n\n".join(body), plot_names)
