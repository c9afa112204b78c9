"""`qmemo bench c`: build and run the C micro-benchmarks (bench_c/), the baseline.

The flags and the console; the run itself is qmemo.bench.c_runner, the file format
qmemo.bench.c_summary (see docs/benchmarks.md). Top level stays light (argparse only).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qmemo.bench.c_runner import STEP_NAMES, VERIFY_ONLY_STEPS   # light: no liboqs, no benchmark runs on import

if TYPE_CHECKING:
    from qmemo.bench.c_baseline import CBaseline
    from qmemo.bench.c_summary import CSummary


def register(parser: argparse.ArgumentParser) -> None:
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true",
                      help="shorter measurements: the whole run in well under a minute")
    size.add_argument("--smoke", action="store_true",
                      help="tiny sizes for the test suite; the figures mean nothing")
    size.add_argument("--verify-only", action="store_true",
                      help="quick sizes, verify steps only (" + ",".join(VERIFY_ONLY_STEPS) + "; Falcon's fast "
                           "verifier without instruction counts): the devnet's first-screen baseline, ~12 s "
                           "(20-25 s with the bench_c build of a first run)")
    parser.add_argument("--if-missing", metavar="SCHEME", default=None,
                        help="do nothing when results/ already holds a baseline of this machine and liboqs "
                             "build with SCHEME's verify rate (devnet.sh's first run)")
    parser.add_argument("--quiet", action="store_true", help="no progress line (also when not on a terminal)")
    parser.add_argument("--brief", action="store_true",
                        help="end with one line (the verify rates and the folder), not the tables")
    parser.add_argument("--out", type=Path, default=None,
                        help="results folder (default: results/<run-id>; results/latest then points to it)")
    parser.add_argument("--results", type=Path, default=None, metavar="DIR",
                        help="where run folders go and --if-missing looks (default: results/)")
    parser.add_argument("--only", default=None, metavar="STEPS", help="comma-separated subset of: " + ",".join(STEP_NAMES))
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from qmemo.bench.c_runner import new_run_folder, parse_only, run_suite
    from qmemo.bench.c_summary import StepRecord
    from qmemo.errors import ConfigError
    from qmemo.paths import RESULTS_DIR

    profile = "smoke" if args.smoke else "quick" if args.quick or args.verify_only else "full"
    if args.verify_only and args.only:
        raise ConfigError("--verify-only chooses its own steps: drop --only")
    only = VERIFY_ONLY_STEPS if args.verify_only else parse_only(args.only)
    console = Console(highlight=False)
    if not console.is_terminal:  # a log or a pipe: do not wrap the tables at 80 columns
        console = Console(highlight=False, width=160)
    results_dir = args.results.resolve() if args.results else RESULTS_DIR
    if args.if_missing and _has_baseline(console, args.if_missing, results_dir):
        return 0
    folder = new_run_folder(profile, args.out, results_dir)
    kind = "verify only, quick sizes" if args.verify_only else f"profile [bold]{profile}[/]"
    console.print(f"qmemo bench c: {kind}, results in {folder.path}")

    def on_step(name: str, record: StepRecord) -> None:
        if name == "validate":
            mark = "[green]ok[/]" if record.ok else "[red]FAILED[/]"
        else:
            mark = "[green]ok[/]" if record.ok else f"[red]exit {record.exit_code}[/]"
        progress.console.print(f"  {name:<18} {mark}  {record.wall_s:6.1f} s")

    with _step_progress(console, quiet=args.quiet) as progress:
        task = progress.add_task("build", total=None)

        def on_start(name: str, number: int, count: int) -> None:
            progress.update(task, description=f"{name:<22} step {number} of {count}", completed=number - 1,
                            total=count)

        result = run_suite(profile, folder, only, on_step, on_start)
    if args.brief:
        _print_brief(console, result.summary, result.out)
    else:
        print_summary(console, result.summary, result.out)
    if result.failed:
        console.print(f"[bold red]failed:[/] {', '.join(result.failed)} (see {result.log_path})")
        return 1
    console.print(f"done in {result.wall_s:.0f} s")
    return 0


def _has_baseline(console: Any, scheme: str, results_dir: Path) -> bool:
    """--if-missing: is there already a baseline of this machine and build with `scheme`? Says which."""
    from qmemo.bench.c_baseline import find_c_baseline
    from qmemo.bench import fingerprint

    baseline = find_c_baseline(scheme, fingerprint.current(), results_dir)
    if baseline is not None:
        console.print(f"qmemo bench c: this machine's C baseline {baseline.run_id} ({baseline.kind}) has "
                      f"{scheme}: nothing to measure")
    return baseline is not None


def _print_brief(console: Any, summary: CSummary, out: Path) -> None:
    """One line: the Falcon-512 and ML-DSA-44 verify rates a devnet is set against, and where they are."""
    from qmemo.bench.c_baseline import CBaseline

    baseline = CBaseline(out / "summary.json", summary)
    parts = []
    for scheme in ("Falcon-512", "ML-DSA-44"):
        rates = [f"{baseline.verify_ops_per_s(scheme):,.0f}/s liboqs"] if baseline.has_verify_rate(scheme) else []
        fast = baseline.fast_verifier(scheme)
        if fast is not None:
            rates.append(f"{fast.ops_per_s:,.0f}/s qMEMO (variable-time)")
        if rates:
            parts.append(f"{scheme} verify {', '.join(rates)}")
    console.print(f"C baseline {summary.run_id} ({baseline.kind}): {'; '.join(parts) or 'no verify rate'}; "
                  f"single core; {out / 'summary.json'}", soft_wrap=True)
    _print_busy_note(console, baseline)


def _print_busy_note(console: Any, baseline: CBaseline) -> None:
    """Say so where the figures are when the run was measured on a busy machine
    (`CBaseline.busy_load`)."""
    load = baseline.busy_load
    if load is None:
        return
    console.print(f"[yellow]note:[/] measured while the load average was {load:.1f} on "
                  f"{baseline.system.cores} cores: the rates are lower than this machine's; run `qmemo bench c` when it "
                  f"is quiet (a full run is preferred over this one)")


def _step_progress(console: Any, *, quiet: bool) -> Any:
    """One live line: the step, k of N, a bar and the elapsed time; off when not on a terminal."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("  {task.description}"), BarColumn(), TimeElapsedColumn(), console=console, transient=True,
                    disable=quiet or not console.is_terminal)


def print_summary(console: Any, summary: CSummary, out: Path) -> None:
    """The per-scheme table and the headline lines of a CSummary."""
    from rich.table import Table

    table = Table(title=f"C baseline {summary.run_id} ({summary.profile})")
    for column in ("scheme", "impl", "NIST", "sig B (max)", "keygen/s", "sign/s", "verify/s"):
        table.add_column(column, justify="left" if column in ("scheme", "impl") else "right")

    def fmt(v: float | None) -> str:
        return "-" if v is None else f"{v:,.0f}"

    for row in summary.schemes.values():
        table.add_row(row.scheme, row.implementation or "", f"L{row.nist_level}" if row.nist_level else "-",
                      fmt(row.signature_bytes_max), fmt(row.keygen_per_s), fmt(row.sign_per_s),
                      fmt(row.verify_per_s))
    console.print(table)
    falcon = summary.single_core_verify.get("Falcon-512")
    if falcon and falcon.statistical:
        s = falcon.statistical
        console.print(f"Falcon-512 verify, single core: median {s.ops_per_s:,.0f} ops/s, "
                      f"{s.median_us_per_op:.2f} µs/op (P99 of trials {s.p99_us_per_op:.2f} µs), "
                      f"{s.tsc_ticks_per_op:,.0f} TSC ticks/op")
    v = summary.validate
    if v:
        ratios = ", ".join(f"{k} {r.ratio:.3f}" + ("" if r.within_tolerance else " [red](outside "
                           f"±{v.tolerance:.0%})[/]") + f" (fastest rounds: {r.ratio_of_minimums:.3f})"
                           for k, r in v.ratios.items())
        console.print(f"validate: ours/speed_sig verify medians (same workload): {ratios}; KAT "
                      f"{v.kat.verdict} ({v.kat.schemes} schemes)")
        effects = ", ".join(f"{k} {r.ring_effect:.3f}" for k, r in v.ratios.items())
        console.print(f"          cost of the default ring of distinct signatures vs one repeated: {effects}")
    _print_verify_implementations(console, summary)
    insp = summary.inspect
    if insp:
        console.print(f"inspect: {'ok' if insp.ok else '[red]SURPRISES[/]'}, {insp.notes} note(s)")
    from qmemo.bench.c_baseline import CBaseline

    _print_busy_note(console, CBaseline(out / "summary.json", summary))
    console.print(f"summary: {out / 'summary.json'}")


def _print_verify_implementations(console: Any, summary: CSummary) -> None:
    """Every scheme's verifiers of the run, side by side (same run, so the ratios compare)."""
    from rich.table import Table

    from qmemo.analysis.report_verifiers import mode, timing

    if not summary.verify_implementations:
        return
    table = Table(title="Verify implementations (one run; x liboqs = the same scheme's liboqs verify; "
                        "FN-DSA is a speed reference, not signature-compatible)")
    for column in ("scheme", "mode", "timing", "verify/s", "µs/op", "x liboqs", "instr/verify"):
        table.add_column(column, justify="left" if column in ("scheme", "mode", "timing") else "right")
    for row in summary.verify_implementations:
        table.add_row(row.scheme, mode(row), timing(row),
                      "-" if row.ops_per_s is None else f"{row.ops_per_s:,.0f}",
                      "-" if row.us_per_op is None else f"{row.us_per_op:.2f}",
                      "-" if row.ratio_to_liboqs is None else f"{row.ratio_to_liboqs:.2f}",
                      "-" if row.instructions_per_verify is None else f"{row.instructions_per_verify:,}")
    console.print(table)
    from qmemo.bench.c_verifiers import conformance_lines

    for line in conformance_lines(summary.verify_implementations):
        console.print(line, soft_wrap=True)