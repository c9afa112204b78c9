"""`qmemo bench c`: build bench_c, run every C benchmark, validate, write the C baseline.

One command produces `results/<run-id>/`: one JSON file per benchmark (written by the
C binary `bench_c/build/qmemo-bench`), `system.json`, `validate.json`, the full log
`run.log`, and `summary.json` ("qmemo-c-baseline/1", read by
`qmemo.analysis.c_baseline`). `results/latest` is pointed at the newest run.

Validation runs liboqs's own tools in the same session: `speed_sig` interleaved with
our `verify` benchmark (the ratio of the two medians), and `kat_sig` for every scheme
built, its output hashed and compared with the `kats.json` shipped in the same liboqs
source, as liboqs's tests/test_kat.py does.

This module never measures anything itself and never invents a figure: every number
in summary.json is copied from a file a benchmark wrote, and "files" says which.
Its top level stays light (argparse only); the work happens inside `run`.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
BENCH_DIR = REPO_ROOT / "bench_c"
BINARY = BENCH_DIR / "build" / "qmemo-bench"
LIBOQS = REPO_ROOT / ".deps" / "liboqs"
RESULTS = REPO_ROOT / "results"

SUMMARY_SCHEMA = "qmemo-c-baseline/1"
VALIDATE_SCHEMA = "qmemo-c-validate/1"

# The two schemes validated against speed_sig, and the message length speed_sig
# signs (its sig_speed_wrapper hard-codes 50 bytes): ours uses the same for the ratio.
VALIDATE_SCHEMES = ("Falcon-512", "ML-DSA-44")
SPEED_SIG_MSG_BYTES = 50
# bench_c's default ring of distinct signed messages (QB_RING_DEFAULT in workload.h).
RING_DEFAULT = 64
# The acceptance bound on |our median / speed_sig's median - 1|.
VALIDATE_TOLERANCE = 0.10


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
STEP_NAMES = tuple(s.name for s in STEPS) + ("validate",)

# speed_sig rounds interleaved with ours, per profile (odd, so the median is one round);
# speed_sig's shortest duration is 1 s per operation (keypair, sign, verify), so one
# round costs ~11 s for both schemes.
VALIDATE_ROUNDS = {"full": 7, "quick": 3, "smoke": 1}


def register(parser: argparse.ArgumentParser) -> None:
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true",
                      help="shorter measurements: the whole run in well under a minute")
    size.add_argument("--smoke", action="store_true",
                      help="tiny sizes for the test suite; the figures mean nothing")
    parser.add_argument("--out", type=Path, default=None,
                        help="results folder (default: results/<run-id>; results/latest then points to it)")
    parser.add_argument("--only", default=None, metavar="STEPS",
                        help="comma-separated subset of: " + ",".join(STEP_NAMES))
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    profile = "smoke" if args.smoke else "quick" if args.quick else "full"
    only = _parse_only(args.only)
    suite = Suite(profile, args.out, only)
    return suite.run()


def _parse_only(text: str | None) -> tuple[str, ...]:
    from qmemo.errors import ConfigError

    if text is None:
        return STEP_NAMES
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in STEP_NAMES]
    if unknown or not names:
        raise ConfigError(f"--only: unknown step(s) {', '.join(unknown) or '(none given)'}; "
                          f"choose from {', '.join(STEP_NAMES)}")
    return names


class Suite:
    """One run of the suite into one results folder."""

    def __init__(self, profile: str, out: Path | None, only: tuple[str, ...]) -> None:
        import datetime

        self.profile = profile
        self.only = only
        now = datetime.datetime.now(datetime.timezone.utc)
        self.created = now.isoformat(timespec="seconds")
        stamp = now.strftime("%Y%m%dT%H%M%SZ") + ("" if profile == "full" else f"-{profile}")
        self.in_results = out is None
        self.out = _fresh_dir(RESULTS, stamp) if out is None else out.resolve()
        self.run_id = self.out.name
        self.log_path = self.out / "run.log"
        self.steps: dict[str, dict[str, Any]] = {}

    # --- running ------------------------------------------------------------------

    def run(self) -> int:
        import time

        from rich.console import Console

        console = Console(highlight=False)
        if not console.is_terminal:  # a log or a pipe: do not wrap the tables at 80 columns
            console = Console(highlight=False, width=160)
        if self.out.exists() and any(self.out.iterdir()):
            # An old run's files would be read into this run's summary as if measured now.
            from qmemo.errors import ConfigError

            raise ConfigError(f"{self.out} is not empty: give --out a new folder")
        self.out.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        with self.log_path.open("w") as self.log:
            console.print(f"qmemo bench c: profile [bold]{self.profile}[/], results in {self.out}")
            self._build(console)
            self._run_binary("system", ["list", "--json", str(self.out / "system.json")], console, record=False)
            for step in STEPS:
                if step.name in self.only:
                    flags = {"full": step.args, "quick": step.quick, "smoke": step.smoke}[self.profile]
                    self._run_binary(step.name, [step.benchmark, *flags, "--json",
                                                 str(self.out / f"{step.name}.json")], console)
            if "validate" in self.only:
                self._validate(console)
            wall_s = time.monotonic() - started
            summary = build_summary(self.out, run_id=self.run_id, created=self.created, profile=self.profile,
                                    steps=self.steps, wall_s=wall_s, only=self.only)
            _write_json(self.out / "summary.json", summary)
            self.log.write(f"\nsummary.json written; total wall time {wall_s:.1f} s\n")
        # Only a complete run becomes "the" baseline readers find; a partial one (--only)
        # stays in its own folder.
        if self.in_results and set(self.only) == set(STEP_NAMES):
            _point_latest(self.out)
        _print_summary(console, summary, self.out)
        failed = [name for name, s in self.steps.items() if not s["ok"]]
        if failed:
            console.print(f"[bold red]failed:[/] {', '.join(failed)} (see {self.log_path})")
            return 1
        console.print(f"done in {wall_s:.0f} s")
        return 0

    def _build(self, console: Any) -> None:
        import subprocess

        from qmemo.errors import BenchmarkError, SetupError

        if not (LIBOQS / "include" / "oqs" / "oqs.h").exists():
            raise SetupError(f"liboqs is not installed in {LIBOQS}: run scripts/setup.sh first")
        self.log.write(f"$ make -C {BENCH_DIR}\n")
        self.log.flush()
        done = subprocess.run(["make", "-C", str(BENCH_DIR)], stdout=self.log, stderr=subprocess.STDOUT)
        if done.returncode != 0:
            raise BenchmarkError(f"building bench_c failed (make exit {done.returncode}); see {self.log_path}")
        console.print("  build        ok")

    def _run_binary(self, name: str, argv: list[str], console: Any, *, record: bool = True) -> int:
        import subprocess
        import time

        command = [str(BINARY), *argv]
        self.log.write(f"\n$ {' '.join(command)}\n")
        self.log.flush()
        started = time.monotonic()
        done = subprocess.run(command, stdout=self.log, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
        wall = time.monotonic() - started
        if record:
            self.steps[name] = {"ok": done.returncode == 0, "exit_code": done.returncode,
                                "wall_s": round(wall, 3), "file": f"{name}.json", "argv": argv}
        mark = "[green]ok[/]" if done.returncode == 0 else f"[red]exit {done.returncode}[/]"
        console.print(f"  {name:<18} {mark}  {wall:6.1f} s")
        return done.returncode

    # --- validation ---------------------------------------------------------------

    def _validate(self, console: Any) -> None:
        import time

        started = time.monotonic()
        try:
            result = validate(self.out, rounds=VALIDATE_ROUNDS[self.profile], log=self.log)
            ok = result["ok"]
            error = None
        except Exception as exc:  # recorded, shown, and the run reports failure
            result, ok, error = None, False, f"{type(exc).__name__}: {exc}"
            self.log.write(f"validate failed: {error}\n")
        if result is not None:
            _write_json(self.out / "validate.json", result)
        wall = time.monotonic() - started
        self.steps["validate"] = {"ok": ok, "exit_code": 0 if ok else 1, "wall_s": round(wall, 3),
                                  "file": "validate.json", "error": error}
        mark = "[green]ok[/]" if ok else "[red]FAILED[/]"
        console.print(f"  {'validate':<18} {mark}  {wall:6.1f} s")


def _fresh_dir(parent: Path, stem: str) -> Path:
    """parent/stem, or parent/stem-2, -3... if a run started in the same second."""
    candidate, n = parent / stem, 1
    while candidate.exists():
        n += 1
        candidate = parent / f"{stem}-{n}"
    return candidate


def _point_latest(run_dir: Path) -> None:
    """Make results/latest a relative symlink to run_dir, replaced atomically."""
    import os

    link = run_dir.parent / "latest"
    tmp = run_dir.parent / f".latest-{os.getpid()}"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(run_dir.name)
    os.replace(tmp, link)


def _write_json(path: Path, data: Any) -> None:
    import json

    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=2, allow_nan=False) + "\n")
    tmp.replace(path)


def _read_json(path: Path) -> Any:
    import json

    return json.loads(path.read_text())


# --- validate: speed_sig and kat_sig --------------------------------------------------

def parse_speed_sig(text: str) -> dict[str, dict[str, float]]:
    """speed_sig's table rows as {operation: {iterations, total_s, mean_us, stdev_us, ...}}.

    A row looks like `verify | 21530 | 1.000 | 46.449 | 30.615 | 120457 | 79354`
    (ds_benchmark.h's PRINT_TIMER_AVG: iterations, total seconds, mean and population
    stdev in microseconds, mean and stdev of its cycle counter).
    """
    rows: dict[str, dict[str, float]] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.split("|")]
        if len(cells) == 7 and cells[0] in ("keypair", "sign", "verify"):
            try:
                numbers = [float(c) for c in cells[1:]]
            except ValueError:
                continue
            rows[cells[0]] = dict(zip(("iterations", "total_s", "mean_us", "stdev_us", "mean_ticks", "stdev_ticks"),
                                      numbers))
    return rows


def kat_digest(output: bytes) -> str:
    """sha256 of kat_sig's output, newlines normalised as liboqs's tests/test_kat.py does."""
    import hashlib

    return hashlib.sha256(output.replace(b"\r\n", b"\n")).hexdigest()


def validate(out: Path, *, rounds: int, log: Any) -> dict[str, Any]:
    """Run speed_sig and our verify interleaved, then kat_sig for every built scheme."""
    import statistics
    import subprocess
    import tempfile

    from qmemo.errors import BenchmarkError

    speed_sig, kat_sig = LIBOQS / "bin" / "speed_sig", LIBOQS / "bin" / "kat_sig"
    kats_path = LIBOQS / "share" / "liboqs" / "kats.json"
    for tool in (speed_sig, kat_sig, kats_path):
        if not tool.exists():
            raise BenchmarkError(f"{tool} is missing: run scripts/setup.sh (it installs liboqs's tools)")

    def call(argv: list[str]) -> subprocess.CompletedProcess[bytes]:
        log.write(f"\n$ {' '.join(argv)}\n")
        log.flush()
        done = subprocess.run(argv, capture_output=True, cwd=REPO_ROOT)
        log.write(done.stdout.decode(errors="replace"))
        log.write(done.stderr.decode(errors="replace"))
        if done.returncode != 0:
            raise BenchmarkError(f"{' '.join(argv)} exited {done.returncode}")
        return done

    # Each round runs three measurements back to back, rotating their order so drift in
    # the machine's load does not always favour one: speed_sig; our verify on one
    # signature verified over and over (speed_sig's workload: the harness check); our
    # verify on the default ring of 64 distinct signatures (what the suite reports).
    per_scheme: dict[str, list[dict[str, float]]] = {s: [] for s in VALIDATE_SCHEMES}
    default_ring: list[int] = []
    with tempfile.TemporaryDirectory() as tmp:
        ours_json = Path(tmp) / "verify.json"

        def ours(scheme: str, ring: int | None, iterations: int) -> float:
            # ring None: the binary's own default ring, whose size its JSON reports.
            ring_flag = [] if ring is None else ["--ring", str(ring)]
            call([str(BINARY), "verify", "--alg", scheme, "--msg-bytes", str(SPEED_SIG_MSG_BYTES), *ring_flag,
                  "--iterations", str(iterations), "--json", str(ours_json)])
            doc = _read_json(ours_json)
            if ring is None:
                default_ring.append(int(doc["params"]["ring"]))
            return doc["results"]["schemes"][0]["us_per_op"]

        for r in range(rounds):
            for scheme in VALIDATE_SCHEMES:
                # As many verifications as speed_sig did in its one second of the previous
                # round (10,000 before it has run).
                previous = per_scheme[scheme][-1] if per_scheme[scheme] else None
                iterations = int(previous["speed_sig_iterations"]) if previous else 10_000
                sample: dict[str, float] = {"round": r + 1, "ours_iterations": iterations}
                sides = ["speed_sig", "ours_same_signature", "ours_ring"]
                for side in sides[r % 3:] + sides[:r % 3]:
                    if side == "speed_sig":
                        rows = parse_speed_sig(call([str(speed_sig), "--duration", "1", scheme]).stdout.decode())
                        if "verify" not in rows:
                            raise BenchmarkError(f"speed_sig printed no verify row for {scheme}")
                        sample["speed_sig_us_per_op"] = rows["verify"]["mean_us"]
                        sample["speed_sig_iterations"] = rows["verify"]["iterations"]
                        sample["speed_sig_stdev_us"] = rows["verify"]["stdev_us"]
                    elif side == "ours_same_signature":
                        sample["ours_same_signature_us_per_op"] = ours(scheme, 1, iterations)
                    else:
                        sample["ours_ring_us_per_op"] = ours(scheme, None, iterations)
                per_scheme[scheme].append(sample)

    ratios: dict[str, dict[str, Any]] = {}
    for scheme, samples in per_scheme.items():
        def median(key: str) -> float:
            return statistics.median(s[key] for s in samples)

        theirs, same, ring = median("speed_sig_us_per_op"), median("ours_same_signature_us_per_op"), \
            median("ours_ring_us_per_op")
        ratios[scheme] = {
            "speed_sig_median_us_per_op": theirs,
            "ours_median_us_per_op": same,
            "ratio": same / theirs,
            "within_tolerance": abs(same / theirs - 1) <= VALIDATE_TOLERANCE,
            "ours_ring_median_us_per_op": ring,
            "ring_ratio": ring / theirs,
            "ring_effect": ring / same,
            # Noise on a shared machine only ever adds time: the fastest round of each
            # side is a second, load-robust estimate of the same ratio.
            "ratio_of_minimums": min(x["ours_same_signature_us_per_op"] for x in samples)
            / min(x["speed_sig_us_per_op"] for x in samples),
            "rounds": samples,
        }

    kats = _read_json(kats_path)
    listing = call([str(BINARY), "list", "--alg", "pq"]).stdout.decode()
    built = [line.split()[0] for line in listing.splitlines()[1:] if line.strip()]
    kat_rows = []
    for scheme in built:
        got = kat_digest(call([str(kat_sig), scheme]).stdout)
        expected = kats.get(scheme, {}).get("single")
        kat_rows.append({"scheme": scheme, "expected": expected, "got": got, "match": got == expected})
    kat_ok = bool(kat_rows) and all(r["match"] for r in kat_rows)

    # The KAT decides "ok": a library whose output differs from liboqs's known answers
    # is not the library we mean to measure. A ratio outside the tolerance is reported
    # (and shown in red) but does not fail the run: on a machine shared with other work
    # it says the session was noisy, not that the measurement is wrong.
    return {
        "schema": VALIDATE_SCHEMA,
        "ok": kat_ok,
        "ratios_within_tolerance": all(r["within_tolerance"] for r in ratios.values()),
        "method": (f"{rounds} round(s); in each, liboqs speed_sig --duration 1 <scheme>, our verify benchmark "
                   "on one signature repeated (--ring 1, speed_sig's workload) and on the default ring of "
                   f"{default_ring[0]} distinct signatures, all with {SPEED_SIG_MSG_BYTES}-byte messages as speed_sig "
                   "signs, run back to back in rotating order. ratio = median over rounds of our us/op (--ring 1) "
                   "/ median of speed_sig's mean us/op; ring_effect = ours on the ring / ours on one signature"),
        "tolerance": VALIDATE_TOLERANCE,
        "speed_sig": str(speed_sig),
        "ratios": ratios,
        "kat": {
            "verdict": "pass" if kat_ok else "fail",
            "method": "sha256 of `kat_sig <scheme>` output (\\r\\n -> \\n) == kats.json[scheme]['single'], "
                      "as liboqs tests/test_kat.py",
            "kats_json": str(kats_path),
            "schemes": kat_rows,
        },
    }


# --- summary.json ---------------------------------------------------------------------

def _load_result(out: Path, name: str) -> dict[str, Any] | None:
    """A benchmark's JSON if it exists and completed ("ok": true), else None."""
    path = out / f"{name}.json"
    if not path.exists():
        return None
    try:
        data = _read_json(path)
    except ValueError:
        return None
    return data if data.get("ok", True) else None


def _rate_row(row: dict[str, Any]) -> dict[str, Any]:
    keys = ("scheme", "name", "library", "implementation", "post_quantum", "nist_level", "suf_cma",
            "public_key_bytes", "secret_key_bytes", "signature_bytes_max", "signature_bytes_mean",
            "keygen_per_s", "sign_per_s", "verify_per_s")
    out = {k: row.get(k) for k in keys}
    if "verify_preparsed_per_s" in row:
        out["verify_preparsed_per_s"] = row["verify_preparsed_per_s"]
    return out


def build_summary(out: Path, *, run_id: str, created: str, profile: str, steps: dict[str, dict[str, Any]],
                  wall_s: float, only: tuple[str, ...] = STEP_NAMES) -> dict[str, Any]:
    """Compose summary.json from the per-benchmark files in `out` (see docs/benchmarks.md)."""
    files: dict[str, str] = {}
    results = {name: _load_result(out, name) for name in
               ("system", *(s.name for s in STEPS))}
    validate_path = out / "validate.json"
    validation = _read_json(validate_path) if validate_path.exists() else None

    system_doc = results["system"] or next((r for r in results.values() if r), None)
    system = None
    if system_doc is not None:
        s = system_doc["system"]
        system = {
            "cpu_model": s["cpu_model"], "cores": s["cores_online"], "avx2": s["liboqs_avx2_active"],
            "cpu_flags": s["cpu_flags"], "governor": s["governor"], "kernel": s["kernel"],
            "compiler": s["compiler"], "cflags": s["cflags"], "liboqs_version": s["liboqs_version"],
            "openssl_version": s["openssl_version"], "libsodium_version": s["libsodium_version"],
            "libsecp256k1_version": s["libsecp256k1_version"], "tsc_hz": s["tsc"]["hz"],
            "tsc_source": s["tsc"]["source"], "tsc_invariant": s["tsc"]["invariant"],
            "loadavg_at_start": s["loadavg"],
        }
        files["system"] = "system.json" if results["system"] else "(first benchmark file)"

    # Every scheme: sizes from `list` (all built), rates from `all` (and `classical`).
    schemes: dict[str, dict[str, Any]] = {}
    if results["system"]:
        for row in results["system"]["results"]["schemes"]:
            schemes[row["scheme"]] = _rate_row(row)
    for source in ("all", "classical"):
        if results[source]:
            for row in results[source]["results"]["rows"]:
                merged = schemes.get(row["scheme"], {}) | {k: v for k, v in _rate_row(row).items() if v is not None}
                merged["rates_from"] = f"{source}.json"
                schemes[row["scheme"]] = merged
            files[f"schemes ({source})"] = f"{source}.json"

    single_core: dict[str, dict[str, Any]] = {}
    if results["statistical"]:
        for row in results["statistical"]["results"]["schemes"]:
            single_core[row["scheme"]] = {
                "ops_per_s": row["median_ops_per_s"],
                "median_us_per_op": row["median_us_per_op"],
                "p99_us_per_op": row["p99_us_per_op"],
                "tsc_ticks_per_op": row["median_tsc_ticks_per_op"],
                "cv": row["ops_per_s"]["cv"],
                "iqr_ops_per_s": row["ops_per_s"]["iqr"],
                "jarque_bera": row["ops_per_s"]["jarque_bera"],
                "jarque_bera_us_per_op": row["us_per_op"]["jarque_bera"],
                "recommendation": row["recommendation"],
                "trials": row["trials"], "batch": row["batch"],
                "file": "statistical.json",
            }
        files["single_core_verify"] = "statistical.json"
    if results["verify"]:
        for row in results["verify"]["results"]["schemes"]:
            single_core.setdefault(row["scheme"], {})["single_pass"] = {
                "ops_per_s": row["ops_per_s"], "us_per_op": row["us_per_op"],
                "tsc_ticks_per_op": row["tsc_ticks_per_op"], "iterations": row["iterations"],
                "file": "verify.json",
            }
        files["single_core_verify.single_pass"] = "verify.json"

    multicore: dict[str, Any] = {}
    for op in ("verify", "sign"):
        doc = results[f"multicore_{op}"]
        if doc:
            multicore[op] = {
                "scheme": doc["results"]["scheme"],
                "rows": [{k: r[k] for k in ("threads", "ops_per_s", "per_thread_ops_per_s", "speedup", "efficiency")}
                         for r in doc["results"]["rows"]],
                "file": f"multicore_{op}.json",
            }
            files[f"multicore.{op}"] = f"multicore_{op}.json"

    pool = None
    if results["pool"]:
        p = results["pool"]["results"]
        pool = {"scheme": p["scheme"], "tasks_per_block": p["tasks_per_block"], "blocks": p["blocks"],
                "speedup": p["speedup"], "file": "pool.json"}
        for mode in ("sequential", "pool"):
            m = p[mode]
            pool[mode] = {"workers": m["workers"], "ops_per_s": m["ops_per_s"], "block_ms_median": m["block_ms_median"],
                          "latency_us_p50": m["latency_us"]["median"], "latency_us_p99": m["latency_us"]["p99"]}
        files["pool"] = "pool.json"

    sizes: dict[str, dict[str, Any]] = {}
    if results["sizes"]:
        for row in results["sizes"]["results"]["schemes"]:
            sizes[row["scheme"]] = {k: row[k] for k in ("signatures", "mean", "stdev", "min", "max", "p99",
                                                         "signature_bytes_max", "fixed_length")}
            if row["scheme"] in schemes:
                schemes[row["scheme"]]["signature_bytes_mean_sizes"] = row["mean"]
        files["signature_sizes"] = "sizes.json"

    compare = None
    if results["compare"]:
        compare = {"ratios": results["compare"]["results"].get("ratios", []), "file": "compare.json"}
        files["compare"] = "compare.json"

    invalid: dict[str, dict[str, Any]] = {}
    if results["invalid"]:
        for row in results["invalid"]["results"]["schemes"]:
            invalid[row["scheme"]] = {c["case"]: {"ops_per_s": c["ops_per_s"],
                                                  "cost_relative_to_valid": c["cost_relative_to_valid"]}
                                      for c in row["cases"]}
        files["invalid"] = "invalid.json"

    inspect = None
    inspect_path = out / "inspect.json"
    if inspect_path.exists():  # read even when it failed: its surprises are the point
        doc = _read_json(inspect_path)
        res = doc.get("results", {})
        inspect = {"ok": bool(doc.get("ok")), "surprises": res.get("surprises"), "notes": res.get("notes"),
                   "surprise_list": [t for s in res.get("schemes", []) for t in s.get("surprises", [])],
                   "note_list": [t for s in res.get("schemes", []) for t in s.get("notes", [])],
                   "file": "inspect.json"}
        files["inspect"] = "inspect.json"

    validate_summary = None
    if validation is not None:
        validate_summary = {
            "ok": validation["ok"],
            "tolerance": validation["tolerance"],
            "ratios_within_tolerance": validation["ratios_within_tolerance"],
            "ratios": {k: {"ratio": v["ratio"], "ours_median_us_per_op": v["ours_median_us_per_op"],
                           "speed_sig_median_us_per_op": v["speed_sig_median_us_per_op"],
                           "within_tolerance": v["within_tolerance"], "ring_effect": v["ring_effect"],
                           "ratio_of_minimums": v["ratio_of_minimums"],
                           "ours_ring_median_us_per_op": v["ours_ring_median_us_per_op"],
                           "rounds": len(v["rounds"])}
                       for k, v in validation["ratios"].items()},
            "kat": {"verdict": validation["kat"]["verdict"],
                    "schemes": len(validation["kat"]["schemes"]),
                    "failed": [r["scheme"] for r in validation["kat"]["schemes"] if not r["match"]]},
            "file": "validate.json",
        }
        files["validate"] = "validate.json"

    return {
        "schema": SUMMARY_SCHEMA,
        "run_id": run_id,
        "created": created,
        "quick": profile != "full",
        "profile": profile,
        "command": "qmemo bench c" + ("" if profile == "full" else f" --{profile}")
        + ("" if set(only) == set(STEP_NAMES) else f" --only {','.join(only)}"),
        "complete": set(only) == set(STEP_NAMES),
        "wall_s": round(wall_s, 1),
        "system": system,
        "schemes": schemes,
        "single_core_verify": single_core,
        "multicore": multicore,
        "pool": pool,
        "signature_sizes": sizes,
        "compare": compare,
        "invalid": invalid,
        "inspect": inspect,
        "validate": validate_summary,
        "steps": steps,
        "files": files,
    }


# --- console --------------------------------------------------------------------------

def _print_summary(console: Any, summary: dict[str, Any], out: Path) -> None:
    from rich.table import Table

    table = Table(title=f"C baseline {summary['run_id']} ({summary['profile']})")
    for column in ("scheme", "impl", "NIST", "sig B (max)", "keygen/s", "sign/s", "verify/s"):
        table.add_column(column, justify="left" if column in ("scheme", "impl") else "right")

    def fmt(v: Any) -> str:
        return "-" if v is None else f"{v:,.0f}"

    for row in summary["schemes"].values():
        level = row.get("nist_level")
        table.add_row(row["scheme"], row.get("implementation") or "", f"L{level}" if level else "-",
                      fmt(row.get("signature_bytes_max")), fmt(row.get("keygen_per_s")),
                      fmt(row.get("sign_per_s")), fmt(row.get("verify_per_s")))
    console.print(table)
    falcon = summary["single_core_verify"].get("Falcon-512")
    if falcon and "ops_per_s" in falcon:
        console.print(f"Falcon-512 verify, single core: median {falcon['ops_per_s']:,.0f} ops/s, "
                      f"{falcon['median_us_per_op']:.2f} us/op (P99 of trials {falcon['p99_us_per_op']:.2f} us), "
                      f"{falcon['tsc_ticks_per_op']:,.0f} TSC ticks/op")
    v = summary["validate"]
    if v:
        ratios = ", ".join(f"{k} {r['ratio']:.3f}" + ("" if r["within_tolerance"] else " [red](outside "
                           f"±{v['tolerance']:.0%})[/]") + f" (fastest rounds: {r['ratio_of_minimums']:.3f})"
                           for k, r in v["ratios"].items())
        console.print(f"validate: ours/speed_sig verify medians (same workload): {ratios}; KAT "
                      f"{v['kat']['verdict']} ({v['kat']['schemes']} schemes)")
        effects = ", ".join(f"{k} {r['ring_effect']:.3f}" for k, r in v["ratios"].items())
        console.print(f"          cost of {RING_DEFAULT} distinct signatures vs one repeated: {effects}")
    insp = summary["inspect"]
    if insp:
        console.print(f"inspect: {'ok' if insp['ok'] else '[red]SURPRISES[/]'}, {insp['notes']} note(s)")
    console.print(f"summary: {out / 'summary.json'}")
