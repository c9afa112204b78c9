"""Compose the C baseline's summary from the files one run of the suite left in its folder.

Each benchmark of bench_c writes its own JSON ("qmemo-c-bench/1", see docs/benchmarks.md)
and the validator writes validate.json; `build_summary` copies the figures the readers
need into one `CSummary` (qmemo.bench.c_summary) and notes in `files` where each came
from. It never invents a figure: a benchmark that did not run or did not finish leaves
its section empty. What it cannot read from the folder - the run's id, start time,
profile, wall time and per-step bookkeeping - the runner passes in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qmemo.bench.c_summary import (
    SUMMARY_SCHEMA, BinaryRun, Compare, CompareRatio, CSummary, InvalidCase, Inspect, KatSummary, Multicore,
    MulticoreRow, Pool, PoolMode, SchemeRow, SignatureSizes, SingleCoreEntry, SinglePass, StatisticalVerify,
    StepRecord, System, Fingerprint, ValidateRatio, ValidateSummary, ValidationRun, VerifyImplementation,
)
from qmemo.bench.c_verifiers import FILE as VERIFY_IMPLEMENTATIONS_FILE, read_rows as read_verify_implementations
from qmemo.bench.c_files import BenchFile, completed_bench_file, read_bench_file
from qmemo.bench.c_validate import Validation, read_validation
from qmemo.errors import DecodeError
from qmemo.records import from_json

# Every benchmark file a full run writes, by step name (the runner's STEPS, in order).
BENCHMARK_FILES = ("verify", "statistical", "compare", "multicore_verify", "multicore_sign", "pool", "sizes",
                   "classical", "all", "inspect", "invalid")
_RATE_KEYS = ("scheme", "name", "library", "implementation", "post_quantum", "nist_level", "suf_cma",
              "public_key_bytes", "secret_key_bytes", "signature_bytes_max", "signature_bytes_mean",
              "keygen_per_s", "sign_per_s", "verify_per_s", "verify_preparsed_per_s")


def _load_result(out: Path, name: str) -> BenchFile | None:
    """A benchmark's file if it exists and completed ("ok": true), else None (also when
    it cannot be read: a benchmark that crashed mid-file did not produce one)."""
    try:
        return completed_bench_file(out / f"{name}.json")
    except DecodeError:
        return None


def step_record(ok: bool, exit_code: int, wall_s: float, file: str, *, argv: list[str] | None = None,
                error: str | None = None, validation: bool = False) -> StepRecord:
    """The runner's record of one step: a binary run (argv) or the validation (error)."""
    return StepRecord(ok, exit_code, round(wall_s, 3), file,
                      binary=BinaryRun(tuple(argv)) if argv is not None else None,
                      validation=ValidationRun(error) if validation else None)


def _system(doc: BenchFile) -> System:
    s = doc.system
    return System(
        cpu_model=s["cpu_model"], cores=s["cores_online"], avx2=s["liboqs_avx2_active"], cpu_flags=s["cpu_flags"],
        governor=s["governor"], kernel=s["kernel"], compiler=s["compiler"], cflags=s["cflags"],
        liboqs_version=s["liboqs_version"], openssl_version=s["openssl_version"],
        libsodium_version=s["libsodium_version"], libsecp256k1_version=s["libsecp256k1_version"],
        tsc_hz=s["tsc"]["hz"], tsc_source=s["tsc"]["source"], tsc_invariant=s["tsc"]["invariant"],
        loadavg_at_start=list(s["loadavg"]),
    )


def _schemes(results: dict[str, BenchFile | None], files: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Every scheme: sizes from `list` (all built), rates from `all` (and `classical`)."""
    rows: dict[str, dict[str, Any]] = {}
    if results["system"]:
        for row in results["system"].rows:
            rows[row["scheme"]] = {k: row.get(k) for k in _RATE_KEYS if k in row or k != "verify_preparsed_per_s"}
    for source in ("all", "classical"):
        if results[source]:
            for row in results[source].rows:
                rates = {k: row[k] for k in _RATE_KEYS if row.get(k) is not None}
                rows[row["scheme"]] = rows.get(row["scheme"], {}) | rates | {"rates_from": f"{source}.json"}
            files[f"schemes ({source})"] = f"{source}.json"
    return rows


def _single_core(results: dict[str, BenchFile | None], files: dict[str, str]) -> dict[str, SingleCoreEntry]:
    stats: dict[str, StatisticalVerify] = {}
    passes: dict[str, SinglePass] = {}
    if results["statistical"]:
        for row in results["statistical"].rows:
            stats[row["scheme"]] = StatisticalVerify(
                ops_per_s=row["median_ops_per_s"], median_us_per_op=row["median_us_per_op"],
                p99_us_per_op=row["p99_us_per_op"], tsc_ticks_per_op=row["median_tsc_ticks_per_op"],
                cv=row["ops_per_s"]["cv"], iqr_ops_per_s=row["ops_per_s"]["iqr"],
                jarque_bera=row["ops_per_s"]["jarque_bera"], jarque_bera_us_per_op=row["us_per_op"]["jarque_bera"],
                recommendation=row["recommendation"], trials=row["trials"], batch=row["batch"],
                file="statistical.json")
        files["single_core_verify"] = "statistical.json"
    if results["verify"]:
        for row in results["verify"].rows:
            passes[row["scheme"]] = SinglePass(row["ops_per_s"], row["us_per_op"], row["tsc_ticks_per_op"],
                                               row["iterations"], "verify.json")
        files["single_core_verify.single_pass"] = "verify.json"
    return {scheme: SingleCoreEntry(stats.get(scheme), passes.get(scheme)) for scheme in [*stats, *passes]}


def _multicore(results: dict[str, BenchFile | None], files: dict[str, str]) -> dict[str, Multicore]:
    out: dict[str, Multicore] = {}
    for op in ("verify", "sign"):
        doc = results[f"multicore_{op}"]
        if doc:
            rows = tuple(MulticoreRow(r["threads"], r["ops_per_s"], r["per_thread_ops_per_s"], r["speedup"],
                                      r["efficiency"]) for r in doc.rows)
            out[op] = Multicore(doc.results["scheme"], rows, f"multicore_{op}.json")
            files[f"multicore.{op}"] = f"multicore_{op}.json"
    return out


def _pool(doc: BenchFile) -> Pool:
    p = doc.results

    def mode(name: str) -> PoolMode:
        m = p[name]
        return PoolMode(m["workers"], m["ops_per_s"], m["block_ms_median"], m["latency_us"]["median"],
                        m["latency_us"]["p99"])

    return Pool(p["scheme"], p["tasks_per_block"], p["blocks"], p["speedup"], "pool.json", mode("sequential"),
                mode("pool"))


def _inspect(out: Path) -> Inspect | None:
    path = out / "inspect.json"
    if not path.exists():
        return None
    doc = read_bench_file(path)   # read even when it failed: its surprises are the point
    res = doc.results or {}
    return Inspect(doc.ok, res.get("surprises"), res.get("notes"),
                   tuple(t for s in doc.rows for t in s.get("surprises", [])),
                   tuple(t for s in doc.rows for t in s.get("notes", [])), "inspect.json")


def _validate(validation: Validation) -> ValidateSummary:
    ratios = {k: ValidateRatio(v.ratio, v.ours_median_us_per_op, v.speed_sig_median_us_per_op, v.within_tolerance,
                               v.ring_effect, v.ratio_of_minimums, v.ours_ring_median_us_per_op, len(v.rounds))
              for k, v in validation.ratios.items()}
    kat = validation.kat
    return ValidateSummary(validation.ok, validation.tolerance, validation.ratios_within_tolerance, ratios,
                           KatSummary(kat.verdict, len(kat.schemes), tuple(r.scheme for r in kat.schemes if not r.match)),
                           "validate.json")


def build_summary(out: Path, *, run_id: str, created: str, profile: str, steps: dict[str, StepRecord],
                  wall_s: float, only: tuple[str, ...], all_steps: tuple[str, ...],
                  fingerprint: Fingerprint | None = None) -> CSummary:
    """The summary of the run in `out` (see docs/benchmarks.md). `only` is the steps run,
    `all_steps` every step there is (a run of them all is "complete"); `fingerprint` the
    machine and liboqs build the runner measured on (qmemo.bench.fingerprint)."""
    files: dict[str, str] = {}
    results = {name: _load_result(out, name) for name in ("system", *BENCHMARK_FILES)}
    validate_path = out / "validate.json"

    system_doc = results["system"] or next((r for r in results.values() if r), None)
    if system_doc is not None:
        files["system"] = "system.json" if results["system"] else "(first benchmark file)"
    scheme_rows = _schemes(results, files)
    single_core = _single_core(results, files)
    multicore = _multicore(results, files)
    pool = None
    if results["pool"]:
        pool = _pool(results["pool"])
        files["pool"] = "pool.json"
    sizes: dict[str, SignatureSizes] = {}
    if results["sizes"]:
        for row in results["sizes"].rows:
            sizes[row["scheme"]] = SignatureSizes(*(row[k] for k in ("signatures", "mean", "stdev", "min", "max",
                                                                     "p99", "signature_bytes_max", "fixed_length")))
            if row["scheme"] in scheme_rows:
                scheme_rows[row["scheme"]]["signature_bytes_mean_sizes"] = row["mean"]
        files["signature_sizes"] = "sizes.json"
    compare = None
    if results["compare"]:
        compare = Compare(tuple(from_json(CompareRatio, r, "compare.json ratios")
                                for r in results["compare"].results.get("ratios", [])), "compare.json")
        files["compare"] = "compare.json"
    invalid: dict[str, dict[str, InvalidCase]] = {}
    if results["invalid"]:
        for row in results["invalid"].rows:
            invalid[row["scheme"]] = {c["case"]: InvalidCase(c["ops_per_s"], c["cost_relative_to_valid"])
                                      for c in row["cases"]}
        files["invalid"] = "invalid.json"
    inspect = _inspect(out)
    if inspect is not None:
        files["inspect"] = "inspect.json"
    validate = None
    if validate_path.exists():
        validate = _validate(read_validation(validate_path))
        files["validate"] = "validate.json"

    verify_implementations = None
    implementations = read_verify_implementations(out)
    if implementations:
        verify_implementations = tuple(from_json(VerifyImplementation, row, f"{VERIFY_IMPLEMENTATIONS_FILE} rows")
                                       for row in implementations)
        files["verify_implementations"] = VERIFY_IMPLEMENTATIONS_FILE

    complete = set(only) == set(all_steps)
    return CSummary(
        schema=SUMMARY_SCHEMA, run_id=run_id, created=created, quick=profile != "full", profile=profile,
        command="qmemo bench c" + ("" if profile == "full" else f" --{profile}")
        + ("" if complete else f" --only {','.join(only)}"),
        complete=complete, wall_s=round(wall_s, 1),
        system=_system(system_doc) if system_doc is not None else None,
        schemes={k: from_json(SchemeRow, v, f"schemes.{k}") for k, v in scheme_rows.items()},
        single_core_verify=single_core, multicore=multicore, pool=pool, signature_sizes=sizes, compare=compare,
        invalid=invalid, inspect=inspect, validate=validate, steps=steps, files=files,
        verify_implementations=verify_implementations, fingerprint=fingerprint,
    )
