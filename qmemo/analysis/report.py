"""`qmemo report`: REPORT.md, REPORT.html and the plots, from one bench_c results folder and any devnet runs.

The report opens with the answer (report_headline: each devnet run's headline and the
plot that answers it), then the details as a sequence of sections (report_c: what the C
suite measured; report_memo: those figures against MEMO; ...), each a pure function of
the result files plus the plots it draws. This module reads the inputs, runs the sections
in order and writes the folder, one per run so a report never replaces another run's:

    docs/results/<run-id>/REPORT.md      (git-ignored; --out chooses another folder)
    docs/results/<run-id>/REPORT.html    the same Markdown rendered, plots embedded
    docs/results/<run-id>/*.png

where <run-id> is the devnet run's (several runs: their ids joined by "+"), or the C
baseline's when no devnet run is given.

Sharded runs alone need no C baseline: their first screen sets the nodes' measured verify
load against the research's model, not against C. Without one (a fresh clone) the report
still renders; the sections that only the C baseline can fill are left out, and the
answer says so and names the command that measures it.

It never measures anything and never fills in a figure the result files do not hold.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from qmemo.errors import ConfigError
from qmemo.analysis import (
    report_c, report_headline, report_memo, report_py, report_scenario, report_shards, report_shards_headline,
    report_stages, report_verifiers, scheme_ab,
)
from qmemo.analysis.py_bench import PyBenches, load_py_benches
from qmemo.paths import DOCS_RESULTS_DIR
from qmemo.analysis.devnet import DevnetRun, load_devnet_run
from qmemo.analysis.html import render_html
from qmemo.analysis.markdown import Section, anchor
from qmemo.analysis.results import Results, display_path, load_results
from qmemo.analysis.scenario_run import ScenarioRun, load_scenario_run

DEFAULT_OUT_ROOT = DOCS_RESULTS_DIR


@dataclass(frozen=True, slots=True)
class Report:
    out_dir: Path
    markdown_path: Path
    html_path: Path
    sections: tuple[Section, ...]

    @property
    def plots(self) -> tuple[Path, ...]:
        return tuple(self.out_dir / p for s in self.sections for p in s.plots)


def build_sections(results: Results | None, plot_dir: Path, devnet: Sequence[DevnetRun] = (),
                   benches: PyBenches = PyBenches(), scenarios: Sequence[ScenarioRun] = ()) -> list[Section]:
    """Every section in report order, the answer first; plots are written into `plot_dir` as
    they are drawn. `results` None (no C baseline; sharded runs only): the C sections are left out."""
    # A sharded run's committed TPS is every shard's together, not one node's rate: the headline
    # (survival against one C core) is an unsharded run's; a sharded run's first screen is its
    # per-shard verify load against the research's model (report_shards_headline), its details
    # in their own section (report_shards).
    unsharded = [run for run in devnet if not run.shards]
    sharded = report_shards_headline.load_sharded_headlines(devnet)
    if results is None and unsharded:
        raise ConfigError(f"run {', '.join(run.run_id for run in unsharded)} is unsharded: its answer is set "
                          f"against the C baseline, and there is {report_headline.NO_C_BASELINE}: "
                          f"{report_headline.MAKE_C_BASELINE}")
    headlines = report_headline.load_headlines(results, unsharded) if results is not None else []
    single_chain = [entry.headline for entry in headlines]
    c_sections = [
        report_c.environment(results, plot_dir),
        report_c.verification(results, plot_dir),
        report_c.schemes(results, plot_dir),
        report_c.multicore(results, plot_dir),
        report_c.signature_sizes(results, plot_dir),
        report_memo.headroom_section(results, plot_dir, single_chain),
        report_verifiers.verify_implementations_section(results, plot_dir),
        report_memo.hardware_section(results, plot_dir),
        report_memo.footprint_section(results, plot_dir),
    ] if results is not None else []
    sections = [
        report_headline.headline_section(results, plot_dir, headlines, sharded),
        *c_sections,
        report_memo.devnet_section(results, plot_dir, devnet, single_chain),
        report_shards.shards_section(results, devnet),
        # Every node's stage costs are set against a C verify; without one the first screen's
        # per-shard stage table stands alone.
        report_stages.stage_costs_section(results, plot_dir, devnet) if results is not None else None,
        scheme_ab.scheme_ab_section(devnet, plot_dir, report_memo.caption(results)),
        report_py.python_benches_section(benches),
        *(report_scenario.scenario_section(run, plot_dir) for run in scenarios),
    ]
    return [s for s in sections if s is not None]


def title(results: Results | None, devnet: Sequence[DevnetRun]) -> str:
    if devnet or results is None:
        return "qMEMO report: devnet run " + ", ".join(run.run_id for run in devnet)
    return f"qMEMO report: C baseline {results.baseline.run_id}"


def render(results: Results | None, sections: Sequence[Section], devnet: Sequence[DevnetRun],
           benches: PyBenches = PyBenches(), scenarios: Sequence[ScenarioRun] = ()) -> str:
    """The answer first (the first section, before the contents), then what it was read from
    and the details."""
    if results is None:
        inputs = [f"- C baseline: {report_headline.NO_C_BASELINE}; {report_headline.MAKE_C_BASELINE}"]
    else:
        b = results.baseline
        inputs = [f"- C baseline: `{results.summary_source}` (run `{b.run_id}`, {b.created})"]
    inputs += [f"- devnet run: `{display_path(run.sweep_source or run.source)}`" for run in devnet]
    inputs += [f"- scenario run: `{display_path(run.source)}`" for run in scenarios]
    inputs += [f"- {name}: `{display_path(bench.source)}`"
               for name, bench in (("qmemo bench core", benches.core), ("qmemo bench node", benches.node)) if bench]
    answer, details = sections[0], sections[1:]
    contents = [f"{i}. [{s.title}](#{anchor(s.title)})" for i, s in enumerate(details, start=1)]
    header = "\n\n".join([
        f"# {title(results, devnet)}",
        answer.body,
        "## Inputs and contents",
        "Generated by `qmemo report` from these result files (how each figure is measured and computed: "
        "docs/methodology.md):\n" + "\n".join(inputs),
        "\n".join(contents),
    ])
    return "\n\n".join([header, *(s.render() for s in details)]) + "\n"


def default_out_dir(results: Results | None, devnet: Sequence[DevnetRun]) -> Path:
    """docs/results/<run id>: the devnet runs' (joined by "+"), else the C baseline's, so
    a report of one run never lands in (and replaces) another run's folder."""
    name = "+".join(run.run_id for run in devnet) if devnet or results is None else results.baseline.run_id
    return DEFAULT_OUT_ROOT / name.replace("/", "_")


def write_report(results_dir: str | Path | None = None, devnet_dirs: Sequence[str | Path] = (),
                 out_dir: str | Path | None = None, benches: PyBenches | None = None,
                 scenario_dirs: Sequence[str | Path] = ()) -> Report:
    devnet = [load_devnet_run(d) for d in devnet_dirs]
    results = _c_baseline(results_dir, devnet)
    scenarios = [load_scenario_run(d) for d in scenario_dirs]
    benches = load_py_benches() if benches is None else benches
    out = Path(out_dir) if out_dir is not None else default_out_dir(results, devnet)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot write the report to {out}: {exc.strerror}") from None
    for stale in out.glob("*.png"):  # a plot from an earlier report of this run must not linger
        stale.unlink()
    sections = build_sections(results, out, devnet, benches, scenarios)
    markdown = render(results, sections, devnet, benches, scenarios)
    markdown_path, html_path = out / "REPORT.md", out / "REPORT.html"
    markdown_path.write_text(markdown)
    # The same text, a second renderer: the page carries its plots inside it.
    html_path.write_text(render_html(markdown, out, title(results, devnet)))
    return Report(out, markdown_path, html_path, tuple(sections))


def _c_baseline(results_dir: str | Path | None, devnet: Sequence[DevnetRun]) -> Results | None:
    """The C baseline; None when none was named, none is on this machine and every run given
    is sharded (their report needs none). A folder named but missing, or a run that needs the
    baseline, still refuses (load_results' ConfigError)."""
    try:
        return load_results(results_dir)
    except ConfigError:
        if results_dir is not None or not devnet or any(not run.shards for run in devnet):
            raise
        return None
