"""Read the C baseline: the `summary.json` that `qmemo bench c` writes.

The devnet dashboard, `qmemo headroom` and the reports compare their figures with what
the C suite measured on the same machine; this module is the one place that knows the
file's layout ("qmemo-c-baseline/1", documented in docs/benchmarks.md). It only reads:
it never runs a benchmark and never fills in a figure the file does not hold.

    baseline = load_c_baseline()            # results/latest/summary.json, or None
    baseline.verify_ops_per_s("Falcon-512") # single-core verifications per second
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from qmemo.errors import DecodeError, UnknownScheme

SCHEMA = "qmemo-c-baseline/1"
REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_PATH = REPO_ROOT / "results" / "latest" / "summary.json"


@dataclass(frozen=True, slots=True)
class SchemeRates:
    """One row of the per-scheme table: sizes and single-core rates."""

    scheme: str                      # unique id: "Falcon-512", "ECDSA-secp256k1/libsecp256k1"
    name: str                        # "Falcon-512", "ECDSA-secp256k1"
    library: str
    implementation: str
    post_quantum: bool
    nist_level: int | None           # None for the classical schemes
    public_key_bytes: int
    secret_key_bytes: int
    signature_bytes_max: int
    signature_bytes_mean: float | None
    keygen_per_s: float | None
    sign_per_s: float | None
    verify_per_s: float | None


@dataclass(frozen=True, slots=True)
class MulticoreRow:
    threads: int
    ops_per_s: float
    speedup: float
    efficiency: float


@dataclass(frozen=True, slots=True)
class SingleCoreVerify:
    """The careful single-core verify figure (the `statistical` benchmark)."""

    scheme: str
    ops_per_s: float                 # median over trials
    median_us_per_op: float
    p99_us_per_op: float             # P99 of the per-trial mean latency
    tsc_ticks_per_op: float          # TSC ticks (a fixed reference rate), not core cycles
    recommendation: str              # "median_iqr" or "mean_stdev"


@dataclass(frozen=True, slots=True)
class CBaseline:
    path: Path
    run_id: str
    created: str
    quick: bool
    system: Mapping[str, Any]
    schemes: Mapping[str, SchemeRates]
    single_core: Mapping[str, SingleCoreVerify]
    multicore_verify: tuple[MulticoreRow, ...]
    multicore_sign: tuple[MulticoreRow, ...]
    multicore_scheme: str | None
    validate_ratios: Mapping[str, float]   # our verify median / speed_sig's, per scheme
    kat_verdict: str | None                # "pass", "fail", or None when not run
    raw: Mapping[str, Any]                 # the whole file, for fields not modelled here

    def scheme(self, name: str) -> SchemeRates:
        """The row for an id ("Ed25519/OpenSSL") or a name ("Ed25519").

        A bare name picks the first implementation in the file, which is the one chains
        and our devnet use: libsecp256k1 for ECDSA, libsodium for Ed25519.
        """
        if name in self.schemes:
            return self.schemes[name]
        for row in self.schemes.values():
            if row.name == name:
                return row
        raise UnknownScheme(f"{name} is not in the C baseline {self.path}")

    def verify_ops_per_s(self, scheme: str) -> float:
        """Single-core verifications per second: the `statistical` median when the run
        measured this scheme there (Falcon-512 by default), else the `all` table's rate."""
        row = self.scheme(scheme)
        if row.scheme in self.single_core:
            return self.single_core[row.scheme].ops_per_s
        if row.verify_per_s is None:
            raise UnknownScheme(f"the C baseline {self.path} has no verify rate for {scheme}")
        return row.verify_per_s

    def sign_ops_per_s(self, scheme: str) -> float:
        rate = self.scheme(scheme).sign_per_s
        if rate is None:
            raise UnknownScheme(f"the C baseline {self.path} has no sign rate for {scheme}")
        return rate

    def multicore(self, op: str = "verify") -> tuple[MulticoreRow, ...]:
        """Rows (threads, ops/s, speedup, efficiency) for "verify" or "sign"."""
        return self.multicore_verify if op == "verify" else self.multicore_sign


def load_c_baseline(path: Path | None = None) -> CBaseline | None:
    """The C baseline at `path` (default: results/latest/summary.json), or None if
    there is no such file. A file that exists but is not a C baseline raises DecodeError."""
    path = DEFAULT_PATH if path is None else Path(path)
    if path.is_dir():
        path = path / "summary.json"
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        data = json.loads(text)
        if data.get("schema") != SCHEMA:
            raise DecodeError(f"{path} is not a C baseline (schema {data.get('schema')!r}, expected {SCHEMA!r})")
        return _parse(path, data)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise DecodeError(f"{path} is not a readable C baseline: {exc}") from exc


def _parse(path: Path, data: dict[str, Any]) -> CBaseline:
    schemes = {
        key: SchemeRates(
            scheme=row["scheme"], name=row["name"], library=row["library"],
            implementation=row["implementation"], post_quantum=bool(row["post_quantum"]),
            nist_level=row.get("nist_level"), public_key_bytes=row["public_key_bytes"],
            secret_key_bytes=row["secret_key_bytes"], signature_bytes_max=row["signature_bytes_max"],
            signature_bytes_mean=row.get("signature_bytes_mean"), keygen_per_s=row.get("keygen_per_s"),
            sign_per_s=row.get("sign_per_s"), verify_per_s=row.get("verify_per_s"),
        )
        for key, row in data["schemes"].items()
    }
    single = {
        key: SingleCoreVerify(key, row["ops_per_s"], row["median_us_per_op"], row["p99_us_per_op"],
                              row["tsc_ticks_per_op"], row["recommendation"])
        for key, row in data.get("single_core_verify", {}).items() if "ops_per_s" in row
    }
    multicore = data.get("multicore") or {}

    def rows(op: str) -> tuple[MulticoreRow, ...]:
        return tuple(MulticoreRow(r["threads"], r["ops_per_s"], r["speedup"], r["efficiency"])
                     for r in (multicore.get(op) or {}).get("rows", []))

    validate = data.get("validate") or {}
    return CBaseline(
        path=path,
        run_id=data["run_id"],
        created=data["created"],
        quick=bool(data["quick"]),
        system=MappingProxyType(dict(data.get("system") or {})),
        schemes=MappingProxyType(schemes),
        single_core=MappingProxyType(single),
        multicore_verify=rows("verify"),
        multicore_sign=rows("sign"),
        multicore_scheme=(multicore.get("verify") or multicore.get("sign") or {}).get("scheme"),
        validate_ratios=MappingProxyType({k: v["ratio"] for k, v in (validate.get("ratios") or {}).items()}),
        kat_verdict=(validate.get("kat") or {}).get("verdict"),
        raw=MappingProxyType(data),
    )
