"""The C baseline's `summary.json` ("qmemo-c-baseline/1"): its schema, writer and reader.

`qmemo bench c` writes this file (`write_summary`, from what `c_collect` builds out of
the benchmarks' own JSON files); the reports, the dashboard, `qmemo headroom` and
`qmemo bench node` read it (`read_summary`, behind `qmemo.bench.c_baseline`). Both
sides use the dataclasses below, so the format is defined once; docs/benchmarks.md
describes it field by field. To add a field, add it here (OMIT_NONE if older files
lack it) and fill it in `c_collect`.

Every figure is copied from a file a benchmark wrote ("files" says which): nothing here
measures or computes one. This module never runs anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qmemo.records import FLATTEN, OMIT_NONE, decode, read_record, to_json, write_record

SUMMARY_SCHEMA = "qmemo-c-baseline/1"


@dataclass(frozen=True, slots=True)
class System:
    """The machine and the build, from the first benchmark file (`list` -> system.json)."""

    cpu_model: str
    cores: int
    avx2: bool
    cpu_flags: str
    governor: str | None
    kernel: str
    compiler: str
    cflags: str
    liboqs_version: str
    openssl_version: str | None
    libsodium_version: str | None
    libsecp256k1_version: str | None
    tsc_hz: float | None
    tsc_source: str
    tsc_invariant: bool
    loadavg_at_start: list[float]


@dataclass(frozen=True, slots=True)
class SchemeRow:
    """Sizes (from `list`) and single-core rates (from `all`, `classical`) of one scheme."""

    scheme: str                      # unique id: "Falcon-512", "ECDSA-secp256k1/libsecp256k1"
    name: str                        # "Falcon-512", "ECDSA-secp256k1"
    library: str
    implementation: str
    post_quantum: bool
    nist_level: int | None           # None for the classical schemes
    suf_cma: bool | None
    public_key_bytes: int
    secret_key_bytes: int
    signature_bytes_max: int
    signature_bytes_mean: float | None
    keygen_per_s: float | None
    sign_per_s: float | None
    verify_per_s: float | None
    verify_preparsed_per_s: float | None = field(default=None, metadata=OMIT_NONE)
    rates_from: str | None = field(default=None, metadata=OMIT_NONE)           # "all.json" or "classical.json"
    signature_bytes_mean_sizes: float | None = field(default=None, metadata=OMIT_NONE)  # from sizes.json


@dataclass(frozen=True, slots=True)
class StatisticalVerify:
    """The careful single-core verify figure (the `statistical` benchmark)."""

    ops_per_s: float                 # median over trials
    median_us_per_op: float
    p99_us_per_op: float             # P99 of the per-trial mean latency
    tsc_ticks_per_op: float          # TSC ticks (a fixed reference rate), not core cycles
    cv: float | None
    iqr_ops_per_s: float | None
    jarque_bera: float | None
    jarque_bera_us_per_op: float | None
    recommendation: str              # "median_iqr" or "mean_stdev"
    trials: int
    batch: int
    file: str


@dataclass(frozen=True, slots=True)
class SinglePass:
    """One timed pass of the `verify` benchmark."""

    ops_per_s: float
    us_per_op: float
    tsc_ticks_per_op: float
    iterations: int
    file: str


@dataclass(frozen=True, slots=True)
class SingleCoreEntry:
    statistical: StatisticalVerify | None = field(default=None, metadata=FLATTEN)
    single_pass: SinglePass | None = field(default=None, metadata=OMIT_NONE)


@dataclass(frozen=True, slots=True)
class MulticoreRow:
    threads: int
    ops_per_s: float
    per_thread_ops_per_s: float
    speedup: float
    efficiency: float


@dataclass(frozen=True, slots=True)
class Multicore:
    scheme: str
    rows: tuple[MulticoreRow, ...]
    file: str


@dataclass(frozen=True, slots=True)
class PoolMode:
    workers: int
    ops_per_s: float
    block_ms_median: float
    latency_us_p50: float
    latency_us_p99: float


@dataclass(frozen=True, slots=True)
class Pool:
    scheme: str
    tasks_per_block: int
    blocks: int
    speedup: float
    file: str
    sequential: PoolMode
    pool: PoolMode


@dataclass(frozen=True, slots=True)
class SignatureSizes:
    signatures: int
    mean: float
    stdev: float
    min: float
    max: float
    p99: float
    signature_bytes_max: int
    fixed_length: bool


@dataclass(frozen=True, slots=True)
class CompareRatio:
    scheme: str
    relative_to: str
    keygen: float | None
    sign: float | None
    verify: float | None


@dataclass(frozen=True, slots=True)
class Compare:
    ratios: tuple[CompareRatio, ...]
    file: str


@dataclass(frozen=True, slots=True)
class InvalidCase:
    ops_per_s: float
    cost_relative_to_valid: float


@dataclass(frozen=True, slots=True)
class Inspect:
    ok: bool
    surprises: int | None
    notes: int | None
    surprise_list: tuple[str, ...]
    note_list: tuple[str, ...]
    file: str


@dataclass(frozen=True, slots=True)
class ValidateRatio:
    ratio: float                         # our verify median (--ring 1) / speed_sig's
    ours_median_us_per_op: float
    speed_sig_median_us_per_op: float
    within_tolerance: bool
    ring_effect: float                   # ours on the default ring / ours on one signature
    ratio_of_minimums: float
    ours_ring_median_us_per_op: float
    rounds: int


@dataclass(frozen=True, slots=True)
class KatSummary:
    verdict: str                         # "pass" or "fail"
    schemes: int
    failed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ValidateSummary:
    ok: bool
    tolerance: float
    ratios_within_tolerance: bool
    ratios: dict[str, ValidateRatio]
    kat: KatSummary
    file: str


@dataclass(frozen=True, slots=True)
class BinaryRun:
    argv: tuple[str, ...]                # the flags given to bench_c/build/qmemo-bench


@dataclass(frozen=True, slots=True)
class ValidationRun:
    error: str | None                    # why validation could not finish, if it did not


@dataclass(frozen=True, slots=True)
class StepRecord:
    """How one step of the run went (written by the runner, not read from a benchmark)."""

    ok: bool
    exit_code: int
    wall_s: float
    file: str
    binary: BinaryRun | None = field(default=None, metadata=FLATTEN)
    validation: ValidationRun | None = field(default=None, metadata=FLATTEN)


@dataclass(frozen=True, slots=True)
class VerifyImplementation:
    """One verifier's verify rate for one scheme, from one run (qmemo.bench.c_verifiers)."""

    scheme: str                          # "Falcon-512", "ML-DSA-44", ..., or "FN-DSA-512" (the fn-dsa reference)
    implementation: str                  # which code, its hash-to-point and its key handling
    ops_per_s: float | None              # None: not measured (see the step's notes)
    us_per_op: float | None
    ratio_to_liboqs: float | None        # to liboqs's verify of the same scheme in the same run (FN-DSA: Falcon-512's)
    instructions_per_verify: int | None  # callgrind; None without valgrind
    hash_to_point: str                   # Falcon: "constant-time" or "variable-time"; schemes without one: "none"
    public_key: str                      # "key decoded per verify", "cached decoded key", "cached expanded key", ...
    signature_compatible_with_liboqs: bool   # False for FN-DSA: a speed reference only
    source: str
    # Runs before ML-DSA's verifier lack these three (all their rows are Falcon-512 or FN-DSA-512):
    mode: str | None = field(default=None, metadata=OMIT_NONE)     # "liboqs", "uncached", "cached", "batch", ...
    timing: str | None = field(default=None, metadata=OMIT_NONE)   # what its time depends on: "variable-time ..."
    calls: str | None = field(default=None, metadata=OMIT_NONE)    # "single", or "batch..." (many per call)


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """What makes a baseline "this machine's and this liboqs build's" (qmemo.bench.fingerprint).

    Two runs with equal fingerprints measured the same code on the same CPU, so a devnet
    may be set against either; anything else (another CPU, other flags, another liboqs
    build) needs a baseline of its own.
    """

    id: str                              # a short hash of every field below
    cpu_model: str
    logical_cpus: int
    cpu_flags_sha256: str                # of /proc/cpuinfo's whole flags line
    liboqs_version: str
    liboqs_build: str                    # cmake and compiler flags from the setup's build-info.json


@dataclass(frozen=True, slots=True)
class CSummary:
    schema: str
    run_id: str
    created: str
    quick: bool
    profile: str                         # "full", "quick" or "smoke"
    command: str
    complete: bool                       # every step ran (no --only)
    wall_s: float
    system: System | None
    schemes: dict[str, SchemeRow]
    single_core_verify: dict[str, SingleCoreEntry]
    multicore: dict[str, Multicore]      # "verify", "sign"
    pool: Pool | None
    signature_sizes: dict[str, SignatureSizes]
    compare: Compare | None
    invalid: dict[str, dict[str, InvalidCase]]   # scheme -> case -> figures
    inspect: Inspect | None
    validate: ValidateSummary | None
    steps: dict[str, StepRecord]
    files: dict[str, str]                # which file each section was copied from
    # Every scheme's verifiers side by side (older files lack it: None; older still hold Falcon-512's only).
    verify_implementations: tuple[VerifyImplementation, ...] | None = field(default=None, metadata=OMIT_NONE)
    # The machine and liboqs build measured (older files lack it: they match no machine).
    fingerprint: Fingerprint | None = field(default=None, metadata=OMIT_NONE)


def summary_to_json(summary: CSummary) -> dict[str, Any]:
    return to_json(summary)


def summary_from_json(data: Any, where: str = "summary.json") -> CSummary:
    """Decode a parsed summary.json; DecodeError if it is not this schema."""
    return decode(CSummary, SUMMARY_SCHEMA, data, where, "a C baseline")


def write_summary(path: Path, summary: CSummary) -> None:
    write_record(path, summary)


def read_summary(path: Path) -> CSummary:
    """The summary at `path`; FileNotFoundError if absent, DecodeError if unreadable."""
    return read_record(CSummary, SUMMARY_SCHEMA, path, "a C baseline")
