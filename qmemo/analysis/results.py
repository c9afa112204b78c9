"""The report's view of one bench_c results folder: the C baseline plus its per-benchmark files.

`qmemo.bench.c_baseline` reads `summary.json` (the figures every consumer shares);
the report also needs what only the per-benchmark files hold - the full verify
distribution (statistical.json), the signature-length histograms (sizes.json) - so this
module opens those beside it, and names every file by a path a reader can follow
(`results/<run-id>/statistical.json`, never `results/latest/...`).

It also turns a results folder into the capacities and on-chain sizes the pure models
take (`capacities`, `scheme_sizes`). It reads files; it computes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qmemo.bench.c_baseline import CBaseline, find_c_baseline, load_c_baseline
from qmemo.bench.c_files import BenchFile, completed_bench_file
from qmemo.bench.c_summary import System
from qmemo.analysis.footprint import SchemeSizes
from qmemo.analysis.headroom import Capacity
from qmemo.errors import ConfigError, DecodeError, QmemoError, UnknownScheme
from qmemo.paths import REPO_ROOT, RESULTS_DIR

DEFAULT_RESULTS = RESULTS_DIR / "latest"
FALCON = "Falcon-512"  # the scheme every ratio and the headroom are taken against


def display_path(path: Path) -> str:
    """`path` relative to the repository when it lies inside it (links resolved), else absolute."""
    resolved = path.resolve()
    try:
        return str(resolved.relative_to(REPO_ROOT))
    except ValueError:
        return str(resolved)


@dataclass(frozen=True)
class Results:
    baseline: CBaseline
    run_dir: Path                                   # resolved: names the run, not "latest"
    _docs: dict[str, BenchFile | None] = field(default_factory=dict, repr=False, compare=False)

    @property
    def summary_source(self) -> str:
        return display_path(self.run_dir / "summary.json")

    @property
    def system(self) -> System | None:
        return self.baseline.system

    def file(self, name: str) -> Path:
        """The per-benchmark file of step `name` (summary's steps say which; else <name>.json)."""
        step = self.baseline.summary.steps.get(name)
        return self.run_dir / (step.file if step else f"{name}.json")

    def source(self, name: str) -> str:
        return display_path(self.file(name))

    def doc(self, name: str) -> BenchFile | None:
        """A per-benchmark file (qmemo.bench.c_files), or None when the run did not produce
        it or it failed; ConfigError when it is there but unreadable."""
        if name not in self._docs:
            path = self.file(name)
            try:
                self._docs[name] = completed_bench_file(path)
            except (OSError, DecodeError) as exc:
                raise ConfigError(f"cannot read {display_path(path)}: {exc}") from exc
        return self._docs[name]

    def rows(self, name: str) -> list[dict[str, Any]]:
        """The row list of a per-benchmark file (its one key, c_files.ROW_KEY); [] when absent."""
        doc = self.doc(name)
        return doc.rows if doc else []

    def machine_caption(self) -> str:
        """One line naming the machine and build, for plot captions."""
        s = self.system
        if s is None:
            return f"machine not described; run {self.baseline.run_id}"
        path = "AVX2" if s.avx2 else "portable"
        return (f"{s.cpu_model}, {s.cores} cores, {s.kernel}; "
                f"liboqs {s.liboqs_version} ({path}); run {self.baseline.run_id}"
                + (" (quick)" if self.baseline.quick else ""))


def load_results(path: str | Path | None = None) -> Results:
    """The results folder at `path`; by default results/latest, else this machine's best
    run (a first devnet.sh's verify-only baseline never becomes results/latest, and the
    report command devnet.sh prints must work on a fresh clone). ConfigError when there is none."""
    folder = DEFAULT_RESULTS if path is None else Path(path)
    if folder.name == "summary.json":
        folder = folder.parent
    baseline = load_c_baseline(folder / "summary.json")
    if baseline is None and path is None:
        baseline = _this_machines_baseline()
        folder = baseline.path.parent if baseline is not None else folder
    if baseline is None:
        raise ConfigError(f"no C baseline at {folder}: run `.venv/bin/qmemo bench c` "
                          "(or `--quick`) first, or pass --results DIR")
    return Results(baseline, folder.resolve())


def _this_machines_baseline() -> CBaseline | None:
    from qmemo.bench import fingerprint   # reads liboqs's files: only when results/latest is missing

    try:
        return find_c_baseline(FALCON, fingerprint.current(), DEFAULT_RESULTS.parent)
    except (QmemoError, OSError):   # no liboqs here to fingerprint: no run is this machine's
        return None


# --- inputs for the models ------------------------------------------------------------

def capacities(results: Results, scheme: str = FALCON, cores: int | None = None) -> list[Capacity]:
    """Single core (the statistical median) and the measured multicore row: the one with
    `cores` threads, or the most threads measured. Never extrapolated."""
    try:
        single = results.baseline.verify_ops_per_s(scheme)
    except UnknownScheme as exc:
        raise ConfigError(str(exc)) from exc
    from_stats = scheme in results.baseline.single_core
    out = [Capacity("single core", single, results.source("statistical" if from_stats else "all"))]
    rows = results.baseline.multicore("verify")
    if rows and results.baseline.multicore_scheme == scheme:
        picked = [r for r in rows if r.threads == cores] if cores else [max(rows, key=lambda r: r.threads)]
        if not picked:
            measured = ", ".join(str(r.threads) for r in rows)
            raise ConfigError(f"no multicore row with {cores} threads (measured: {measured})")
        row = picked[0]
        if row.threads > 1:
            out.append(Capacity(f"{row.threads} cores (measured)", row.ops_per_s,
                                results.source("multicore_verify"), row.threads))
    return out


def capacities_from_results(path: str | Path | None, scheme: str = FALCON,
                            cores: int | None = None) -> list[Capacity]:
    return capacities(load_results(path), scheme, cores)


def scheme_sizes(results: Results, schemes: list[str] | None = None) -> list[SchemeSizes]:
    """Measured on-chain sizes per scheme: the sizes benchmark's mean and maximum where it
    ran (the Falcon variants), else the mean measured while signing and the declared max."""
    measured = results.baseline.summary.signature_sizes
    out = []
    for key, row in results.baseline.schemes.items():
        if schemes is not None and key not in schemes:
            continue
        if key in measured:
            sizes = measured[key]
            out.append(SchemeSizes(key, row.public_key_bytes, sizes.mean, int(sizes.max),
                                   results.source("sizes")))
        elif row.signature_bytes_mean is not None:
            rates_from = row.rates_from or "all.json"
            out.append(SchemeSizes(key, row.public_key_bytes, row.signature_bytes_mean,
                                   row.signature_bytes_max, results.source(rates_from.removesuffix(".json")),
                                   max_is_declared=True))
    return out
