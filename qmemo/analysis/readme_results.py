"""The README's results block: one current figure per row, each with the command that measured it.

    .venv/bin/qmemo report --devnet runs/<a sweep's run folder> --readme README.md

writes the report as usual, then replaces the block between BEGIN and END in README.md
with a table built from the same result folders (the devnet run's headline,
qmemo.analysis.headline; the C baseline's verify rates; MEMO's headroom at those rates)
and copies the report's headline.png to docs/img/ beside it. Nothing in the block is
typed in: rerun the command on new result folders and the block follows them.

`run_context` reads what the run folder says of how it ran (devnet.sh's `command`, the
headline stage's manifest.json: when, and the machine's load average); `results_block`
is pure.
"""

from __future__ import annotations

import datetime
import shutil
from dataclasses import dataclass
from pathlib import Path

import orjson

from qmemo.analysis.devnet import DevnetRun, command_file
from qmemo.analysis.headline import Headline, c_reference
from qmemo.analysis.headroom import Capacity, Scenario, assess
from qmemo.analysis.markdown import num, splice, table
from qmemo.analysis.memo import CONSERVATIVE_SHARDS, CONSERVATIVE_TPS, CROSS_SHARD_SHARE, TARGET_SHARDS, TARGET_TPS
from qmemo.analysis.report_headline import PLOT as HEADLINE_PLOT
from qmemo.analysis.report_memo import devnet_capacities, headroom_cell
from qmemo.analysis.results import FALCON, Results, display_path
from qmemo.errors import ConfigError

BEGIN = "<!-- results:begin (`qmemo report --readme README.md` writes this block; do not edit) -->"
END = "<!-- results:end -->"
IMAGE = Path("docs") / "img" / HEADLINE_PLOT
SCENARIOS = (Scenario("conservative", CONSERVATIVE_TPS, CONSERVATIVE_SHARDS, CROSS_SHARD_SHARE),
             Scenario("target", TARGET_TPS, TARGET_SHARDS, CROSS_SHARD_SHARE))


@dataclass(frozen=True, slots=True)
class RunContext:
    """How a devnet run ran, as its folder says (None: the folder does not say)."""

    command: str | None          # devnet.sh's command line, as typed
    started_utc: str | None      # the headline stage's start
    loadavg: tuple[float, ...] | None   # the machine's load average then (1, 5, 15 min)


def run_context(run: DevnetRun) -> RunContext:
    """devnet.sh's `command` in the run folder, and the manifest.json beside the run's summary."""
    path = command_file(run)
    command = (path.read_text().strip() or None) if path is not None else None
    started, load = None, None
    try:
        manifest = orjson.loads((run.source.parent / "manifest.json").read_bytes())
        started = manifest.get("started_utc")
        load = tuple(manifest.get("machine", {}).get("loadavg") or ()) or None
    except (OSError, orjson.JSONDecodeError):
        pass
    return RunContext(command, started, load)


def _when(started: str | None, run_id: str) -> str:
    """"2026-11-27 12:45 UTC" from the manifest, else from a devnet.sh run id (YYYYMMDD-HHMMSS-pid)."""
    for text, form in ((started, "%Y-%m-%dT%H:%M:%SZ"), (run_id[:15], "%Y%m%d-%H%M%S")):
        try:
            return datetime.datetime.strptime(text or "", form).strftime("%Y-%m-%d %H:%M UTC")
        except ValueError:
            continue
    return "date not recorded"


def _load(loadavg: tuple[float, ...] | list[float] | None, cores: int | None) -> str:
    if not loadavg:
        return "load not recorded"
    busy = cores is not None and loadavg[0] > cores
    return f"load average {loadavg[0]:.1f}" + (f" on {cores} cores: **busy**" if busy else "")


def results_block(results: Results, line: Headline, run: DevnetRun, context: RunContext, regenerate: str) -> str:
    """The block: the devnet's headline, the C verify rates, MEMO's headroom, each with the
    run that measured it (its command, date and the machine's load under the table); the
    headline plot under it."""
    b = results.baseline
    system = b.system
    cores = system.cores if system else None
    committed = float(line.committed_tps.value)
    if line.is_capacity:
        saturation = f"**{num(committed)} TPS** committed at saturation"
    else:
        saturation = f"**{num(committed)} TPS** held; saturation not reached (a lower bound)"
    if line.limit is not None and line.limit.offered_tps != line.offered_tps:
        saturation += f"; the next stage ({num(float(line.limit.offered_tps.value))} offered): {line.limit.why.value}"
    survival = line.survival
    rows = [("devnet: committed TPS at saturation (3 nodes and the generator on this machine)", saturation, "A"),
            ("survival against C: committed TPS / one C core of the nodes' verifier",
             "-" if survival is None else
             f"**{'at least ' if not line.is_capacity else ''}{survival:.3f}** ({line.timing})", "A"),
            ("p99 intended → final at that stage",
             "-" if line.p99_final_ms is None else f"**{float(line.p99_final_ms.value) / 1e3:.2f} s**", "A")]
    caps: list[Capacity] = []
    for verifier in ("liboqs", "fast"):
        reference = c_reference(b, FALCON, verifier)
        if reference is not None:
            rate = float(reference.verify_per_s.value)
            rows.append((f"{FALCON} verify, one core: {reference.row} ({reference.timing})",
                         f"**{num(rate)}/s**", "B"))
            caps.append(Capacity(f"1 core, {verifier}", rate, results.summary_source))
    caps += devnet_capacities([line])
    for scenario in SCENARIOS:
        cells = [f"{'devnet node end to end' if c.label.startswith('devnet') else c.label}: "
                 f"{headroom_cell(assess(scenario, c))}" for c in caps]
        rows.append((f"headroom, MEMO {scenario.name} ({num(scenario.tps)} TPS over {scenario.shards} shards, "
                     f"{scenario.cross_shard_share:.0%} cross-shard: {num(scenario.required_verify_rate)} verifies/s "
                     "per shard)", "; ".join(cells), "A, B"))
    devnet_cmd = f"`{context.command}`" if context.command else "devnet.sh (its command is not in the run folder)"
    runs = [f"- **A**: {devnet_cmd}; run `{run.run_id}` (`{display_path(run.sweep_source or run.source)}`), "
            f"{_when(context.started_utc, run.run_id)}, {_load(context.loadavg, cores)}.",
            f"- **B**: `{b.summary.command}`; run `{b.run_id}` (`{results.summary_source}`), "
            f"{_when(b.created[:19] + 'Z' if b.created else None, b.run_id)}, "
            f"{_load(system.loadavg_at_start if system else None, cores)}."]
    machine = f"{system.cpu_model}, {system.cores} cores" if system else "machine not described"
    return "\n\n".join([
        f"On {machine}, from the result folders below by `{regenerate}` (definitions: "
        "[docs/methodology.md](docs/methodology.md), \"The headline\"; the run's full report goes to "
        f"`docs/results/{run.run_id}/`).",
        table(("figure", "value", "run"), rows, "llc"),
        "\n".join(runs),
        f"![Where the devnet saturates, and what a transaction costs there]({IMAGE.as_posix()})",
    ])


def update_readme(readme: Path, block: str, report_dir: Path) -> None:
    """Splice `block` into `readme` between the markers and copy the headline plot beside it;
    the README is left untouched when it lacks the markers."""
    try:
        text = readme.read_text()
    except OSError as exc:
        raise ConfigError(f"--readme: cannot read {readme}: {exc.strerror}") from None
    updated = splice(text, block, BEGIN, END, str(readme))
    image = readme.parent / IMAGE
    image.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(report_dir / HEADLINE_PLOT, image)
    readme.write_text(updated)


def write_readme_block(readme: Path, results_dir: str | Path | None, devnet_dir: str | Path, report_dir: Path,
                       regenerate: str) -> None:
    """Read the result folders (as `qmemo report` did) and put their block into `readme`."""
    from qmemo.analysis.devnet import load_devnet_run
    from qmemo.analysis.report_headline import load_headlines
    from qmemo.analysis.results import load_results

    results = load_results(results_dir)
    run = load_devnet_run(devnet_dir)
    [entry] = load_headlines(results, [run])
    update_readme(readme, results_block(results, entry.headline, run, run_context(run), regenerate), report_dir)
