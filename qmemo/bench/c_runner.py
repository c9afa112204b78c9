"""Run the C suite: build bench_c, run every benchmark, validate, write the baseline.

One run fills one folder (`results/<run-id>/` by default): one JSON file per benchmark
(written by the C binary `bench_c/build/qmemo-bench`), `system.json`, `validate.json`
(qmemo.bench.c_validate), the full log `run.log`, and `summary.json` ("qmemo-c-baseline/1",
qmemo.bench.c_summary, composed by qmemo.bench.c_collect). `results/latest` is pointed
at the newest complete run.

It never measures anything itself and never prints: progress goes to the `on_step`
callback the command gives it, everything else to run.log.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from qmemo.bench.c_collect import build_summary, step_record
from qmemo.bench.c_verifiers import FILE as VERIFY_IMPLEMENTATIONS_FILE, run_verify_implementations
from qmemo.bench import fingerprint
from qmemo.bench.c_summary import CSummary, StepRecord, write_summary
from qmemo.bench.c_validate import validate
from qmemo.errors import BenchmarkError, ConfigError, SetupError
from qmemo.paths import BENCH_C_DIR, LIBOQS_DIR, REPO_ROOT, RESULTS_DIR
from qmemo.records import write_record

BINARY = BENCH_C_DIR / "build" / "qmemo-bench"
PROFILES = ("full", "quick", "smoke")

# Called after each step: (step name, its record).
OnStep = Callable[[str, StepRecord], None]
# Called before each step: (step name, its number from 1, how many steps this run has).
OnStart = Callable[[str, int, int], None]


@dataclass(frozen=True, slots=True)
class Step:
    """One invocation of the C binary and the file it writes."""

    name: str                 # also the JSON file's stem
    benchmark: str            # qmemo-bench subcommand
    args: tuple[str, ...]     # flags for the full run
    quick: tuple[str, ...]    # flags replacing `args` under --quick
    smoke: tuple[str, ...]    # flags for --smoke (tests: tiny sizes, figures meaningless)


# Full-run sizes are each benchmark's defaults (see docs/benchmarks.md); the whole run
# takes a few minutes on 2 cores. --quick trims each to well under a minute in all.
STEPS: tuple[Step, ...] = (
    Step("verify", "verify", (), ("--iterations", "2000"), ("--iterations", "200", "--warmup", "0.01")),
    Step("statistical", "statistical", (), ("--trials", "200"),
         ("--trials", "30", "--batch", "10", "--warmup", "0.01")),
    Step("compare", "compare", (), ("--duration", "0.2"), ("--duration", "0.02", "--warmup", "0.01")),
    Step("multicore_verify", "multicore", ("--op", "verify"), ("--op", "verify", "--duration", "0.3"),
         ("--op", "verify", "--duration", "0.05", "--warmup", "0.01")),
    Step("multicore_sign", "multicore", ("--op", "sign"), ("--op", "sign", "--duration", "0.3"),
         ("--op", "sign", "--duration", "0.05", "--warmup", "0.01")),
    Step("pool", "pool", (), ("--iterations", "1000", "--trials", "3"), ("--iterations", "100", "--trials", "2")),
    Step("sizes", "sizes", (), ("--iterations", "1000"), ("--iterations", "50")),
    Step("classical", "classical", (), ("--duration", "0.05", "--warmup", "0.05"), ("--duration", "0.01", "--warmup", "0.01")),
    Step("all", "all", (), ("--duration", "0.05", "--warmup", "0.05"),
         ("--duration", "0.01", "--warmup", "0.005", "--iterations", "1")),
    Step("inspect", "inspect", (), ("--iterations", "1"), ("--iterations", "1")),
    Step("invalid", "invalid", (), ("--duration", "0.1"), ("--duration", "0.01", "--warmup", "0.01")),
)
# Steps that are not one qmemo-bench call: every scheme's verifiers side by side (qmemo.bench.c_verifiers),
# then the check against liboqs's own speed_sig and KATs (qmemo.bench.c_validate).
STEP_NAMES = tuple(s.name for s in STEPS) + ("verify_implementations", "validate")
# The verify-only run (`--verify-only`, the devnet's first-screen baseline): the careful
# Falcon-512 verify figure, every scheme's verify rate and the fast Falcon and ML-DSA verifiers, at the
# quick sizes - a fraction of the whole quick run's time, plus the bench_c build on a first
# run (docs/setup.md, "The first run, timed").
VERIFY_ONLY_STEPS = ("statistical", "classical", "all", "verify_implementations")

# speed_sig rounds interleaved with ours, per profile (odd, so the median is one round);
# speed_sig's shortest duration is 1 s per operation (keypair, sign, verify), so one
# round costs ~11 s for both schemes.
VALIDATE_ROUNDS = {"full": 7, "quick": 3, "smoke": 1}


@dataclass(frozen=True, slots=True)
class SuiteRun:
    """What one run produced: its folder, summary, and the steps that failed."""

    out: Path
    log_path: Path
    summary: CSummary
    failed: tuple[str, ...]
    wall_s: float


def parse_only(text: str | None) -> tuple[str, ...]:
    """The steps named by --only (all of them when None); ConfigError for an unknown one."""
    if text is None:
        return STEP_NAMES
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in STEP_NAMES]
    if unknown or not names:
        raise ConfigError(f"--only: unknown step(s) {', '.join(unknown) or '(none given)'}; "
                          f"choose from {', '.join(STEP_NAMES)}")
    return names


@dataclass(frozen=True, slots=True)
class RunFolder:
    """Where a run goes, and when it started."""

    path: Path
    created: str                 # ISO 8601, UTC, to the second
    in_results: bool             # under results/: a complete run becomes results/latest


def new_run_folder(profile: str, out: Path | None, results_dir: Path = RESULTS_DIR) -> RunFolder:
    """`out`, or a new <results_dir>/<UTC time>[-profile]; ConfigError if it holds files."""
    if profile not in PROFILES:
        raise ConfigError(f"unknown profile {profile!r}; choose from {', '.join(PROFILES)}")
    now = datetime.datetime.now(datetime.timezone.utc)
    stamp = now.strftime("%Y%m%dT%H%M%SZ") + ("" if profile == "full" else f"-{profile}")
    folder = _fresh_dir(results_dir, stamp) if out is None else out.resolve()
    if folder.exists() and any(folder.iterdir()):
        # An old run's files would be read into this run's summary as if measured now.
        raise ConfigError(f"{folder} is not empty: give --out a new folder")
    return RunFolder(folder, now.isoformat(timespec="seconds"), out is None)


def _no_start(name: str, number: int, count: int) -> None:
    pass


def run_suite(profile: str, run_folder: RunFolder, only: tuple[str, ...], on_step: OnStep,
              on_start: OnStart = _no_start) -> SuiteRun:
    """Build and run the suite into `run_folder`. A run of exactly VERIFY_ONLY_STEPS
    times Falcon's verifiers only (no instruction counts, no fn-dsa)."""
    folder = run_folder.path
    folder.mkdir(parents=True, exist_ok=True)
    log_path = folder / "run.log"
    steps: dict[str, StepRecord] = {}
    started = time.monotonic()
    # build and system, then the chosen steps in STEP_NAMES order: what a progress bar counts
    count = 2 + sum(name in only for name in STEP_NAMES)
    numbers = iter(range(1, count + 1))
    with log_path.open("w") as log:
        on_start("build", next(numbers), count)
        build_started = time.monotonic()
        _build(log, log_path)
        on_step("build", step_record(True, 0, time.monotonic() - build_started, ""))
        on_start("system", next(numbers), count)
        code, wall = _run_binary(["list", "--json", str(folder / "system.json")], log)
        on_step("system", step_record(code == 0, code, wall, "system.json"))   # shown, not a step of the summary
        for step in STEPS:
            if step.name in only:
                on_start(step.name, next(numbers), count)
                flags = {"full": step.args, "quick": step.quick, "smoke": step.smoke}[profile]
                argv = [step.benchmark, *flags, "--json", str(folder / f"{step.name}.json")]
                code, wall = _run_binary(argv, log)
                steps[step.name] = step_record(code == 0, code, wall, f"{step.name}.json", argv=argv)
                on_step(step.name, steps[step.name])
        if "verify_implementations" in only:
            on_start("verify_implementations", next(numbers), count)
            started_step = time.monotonic()
            ok, error = run_verify_implementations(folder, profile, log,
                                                   headline_only=set(only) == set(VERIFY_ONLY_STEPS))
            steps["verify_implementations"] = step_record(ok, 0 if ok else 1, time.monotonic() - started_step,
                                                          VERIFY_IMPLEMENTATIONS_FILE, error=error, validation=True)
            on_step("verify_implementations", steps["verify_implementations"])
        if "validate" in only:
            on_start("validate", next(numbers), count)
            steps["validate"] = _validate(folder, profile, log)
            on_step("validate", steps["validate"])
        wall_s = time.monotonic() - started
        summary = build_summary(folder, run_id=folder.name, created=run_folder.created,
                                profile=profile, steps=steps, wall_s=wall_s, only=only, all_steps=STEP_NAMES,
                                fingerprint=fingerprint.current())
        if set(only) == set(VERIFY_ONLY_STEPS):
            summary = dataclasses.replace(summary, command="qmemo bench c --verify-only")
        write_summary(folder / "summary.json", summary)
        log.write(f"\nsummary.json written; total wall time {wall_s:.1f} s\n")
    # Only a complete run becomes "the" baseline readers find; a partial one (--only)
    # stays in its own folder.
    if run_folder.in_results and set(only) == set(STEP_NAMES):
        _point_latest(folder)
    failed = tuple(name for name, record in steps.items() if not record.ok)
    return SuiteRun(folder, log_path, summary, failed, wall_s)


def _build(log: IO[str], log_path: Path) -> None:
    if not (LIBOQS_DIR / "include" / "oqs" / "oqs.h").exists():
        raise SetupError(f"liboqs is not installed in {LIBOQS_DIR}: run scripts/setup.sh first")
    # One job per core: from nothing, the build is most of a verify-only run's time, and its
    # 29 objects are independent (docs/setup.md, "The first run, timed").
    command = ["make", "-C", str(BENCH_C_DIR), f"-j{os.cpu_count() or 1}"]
    log.write(f"$ {' '.join(command)}\n")
    log.flush()
    done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise BenchmarkError(f"building bench_c failed (make exit {done.returncode}); see {log_path}")


def _run_binary(argv: list[str], log: IO[str]) -> tuple[int, float]:
    """Run qmemo-bench with `argv`, its output into the log: (exit code, wall seconds)."""
    command = [str(BINARY), *argv]
    log.write(f"\n$ {' '.join(command)}\n")
    log.flush()
    started = time.monotonic()
    done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
    return done.returncode, time.monotonic() - started


def _validate(folder: Path, profile: str, log: IO[str]) -> StepRecord:
    started = time.monotonic()
    try:
        result = validate(BINARY, rounds=VALIDATE_ROUNDS[profile], log=log)
        ok, error = result.ok, None
    except Exception as exc:  # noqa: BLE001 - any failure of the checks is recorded; the run goes on to its summary
        result, ok, error = None, False, f"{type(exc).__name__}: {exc}"
        log.write(f"validate failed: {error}\n")
    if result is not None:
        write_record(folder / "validate.json", result)
    return step_record(ok, 0 if ok else 1, time.monotonic() - started, "validate.json", error=error,
                       validation=True)


def _fresh_dir(parent: Path, stem: str) -> Path:
    """parent/stem, or parent/stem-2, -3... if a run started in the same second."""
    candidate, n = parent / stem, 1
    while candidate.exists():
        n += 1
        candidate = parent / f"{stem}-{n}"
    return candidate


def _point_latest(run_dir: Path) -> None:
    """Make results/latest a relative symlink to run_dir, replaced atomically."""
    link = run_dir.parent / "latest"
    tmp = run_dir.parent / f".latest-{os.getpid()}"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(run_dir.name)
    os.replace(tmp, link)
