"""Read the C baseline: the `summary.json` that `qmemo bench c` writes.

The devnet dashboard, `qmemo headroom`, `qmemo bench node` and the reports compare their
figures with what the C suite measured on the same machine. The file's format is
defined once, in qmemo.bench.c_summary, which the writer uses too; this module adds the
questions readers ask of it (a scheme by id or name, "the" single-core verify rate).
It only reads: it never runs a benchmark and never fills in a figure the file lacks. It
lives with the benchmarks, beside the format it reads, so that `qmemo bench node` (which
sets the node against it) needs nothing from the rooms above (analysis, monitor), which
read it from here.

    baseline = load_c_baseline()            # results/latest/summary.json, or None
    baseline.verify_ops_per_s("Falcon-512") # single-core verifications per second
    find_c_baseline("Falcon-512", fingerprint.current())   # this machine's best, or None
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from qmemo.bench.c_summary import (
    CSummary, Fingerprint, MulticoreRow, SchemeRow, StatisticalVerify, System, VerifyImplementation, read_summary,
)
from qmemo.errors import DecodeError, UnknownScheme
from qmemo.paths import RESULTS_DIR

DEFAULT_PATH = RESULTS_DIR / "latest" / "summary.json"


@dataclass(frozen=True, slots=True)
class CBaseline:
    """One C baseline file and the figures readers take from it."""

    path: Path
    summary: CSummary

    @property
    def run_id(self) -> str:
        return self.summary.run_id

    @property
    def created(self) -> str:
        return self.summary.created

    @property
    def quick(self) -> bool:
        return self.summary.quick

    @property
    def system(self) -> System | None:
        return self.summary.system

    @property
    def schemes(self) -> dict[str, SchemeRow]:
        return self.summary.schemes

    @property
    def busy_load(self) -> float | None:
        """The load average at the run's start when it exceeded the cores, else None.

        A baseline measured while other work held the cores is low, and a devnet set
        against it looks better than it is (its "% of C" can pass 100%): readers say so
        next to the figures."""
        system = self.summary.system
        if system is None or not system.loadavg_at_start or system.loadavg_at_start[0] <= system.cores:
            return None
        return system.loadavg_at_start[0]

    @property
    def single_core(self) -> dict[str, StatisticalVerify]:
        """The careful single-core verify figures (`statistical`), by scheme."""
        return {k: e.statistical for k, e in self.summary.single_core_verify.items() if e.statistical}

    @property
    def multicore_scheme(self) -> str | None:
        section = self.summary.multicore.get("verify") or self.summary.multicore.get("sign")
        return section.scheme if section else None

    def scheme(self, name: str) -> SchemeRow:
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
        single = self.single_core
        if row.scheme in single:
            return single[row.scheme].ops_per_s
        if row.verify_per_s is None:
            raise UnknownScheme(f"the C baseline {self.path} has no verify rate for {scheme}")
        return row.verify_per_s

    def fast_verify_ops_per_s(self, scheme: str) -> float | None:
        """The same run's fast Falcon verifier for `scheme` with its key cached (what a node
        running it is set against); None when the run did not measure it."""
        row = self.fast_verifier(scheme)
        return row.ops_per_s if row is not None else None

    @property
    def kind(self) -> str:
        """"full", "quick", or "quick, verify only" (the devnet's first-screen run)."""
        return self.summary.profile + ("" if self.summary.complete else
                                       ", verify only" if "verify-only" in self.summary.command else ", partial")

    def has_verify_rate(self, scheme: str) -> bool:
        try:
            self.verify_ops_per_s(scheme)
        except UnknownScheme:
            return False
        return True

    def fast_verifier(self, scheme: str) -> VerifyImplementation | None:
        """qMEMO's verifier's row for `scheme` as a node runs it - a cached key, in batches
        (runs from before the batch row: one signature per call) - when this run measured one."""
        rows = [row for row in self.summary.verify_implementations or ()
                if row.scheme == scheme and row.signature_compatible_with_liboqs and row.ops_per_s]
        by_mode = {row.mode: row for row in rows if row.mode}
        if by_mode:
            return by_mode.get("batch") or by_mode.get("cached")
        return next((row for row in rows  # a run from before `mode`: Falcon-512's rows only
                     if row.hash_to_point == "variable-time" and row.public_key == "cached decoded key"), None)

    def multicore(self, op: str = "verify") -> tuple[MulticoreRow, ...]:
        """Rows (threads, ops/s, speedup, efficiency) for "verify" or "sign"."""
        section = self.summary.multicore.get(op)
        return section.rows if section else ()


def load_c_baseline(path: Path | None = None) -> CBaseline | None:
    """The C baseline at `path` (default: results/latest/summary.json), or None if
    there is no such file. A file that exists but is not a C baseline raises DecodeError."""
    path = DEFAULT_PATH if path is None else Path(path)
    if path.is_dir():
        path = path / "summary.json"
    try:
        summary = read_summary(path)
    except FileNotFoundError:
        return None
    return CBaseline(path, summary)


# A full run's figures come from longer measurements than a quick one's: prefer them.
_PROFILE_RANK = {"full": 0, "quick": 1}


def find_c_baseline(scheme: str, fingerprint: Fingerprint, results_dir: Path = RESULTS_DIR) -> CBaseline | None:
    """The best baseline in `results_dir` measured on this machine and liboqs build
    (`fingerprint`) that has `scheme`'s verify rate: full before quick, complete before
    verify-only, then the newest. None when there is none (unreadable files are skipped:
    one broken folder must not hide the others)."""
    found: list[CBaseline] = []
    for path in sorted(results_dir.glob("*/summary.json")) if results_dir.is_dir() else ():
        if path.parent.is_symlink():   # results/latest: the same run again
            continue
        try:
            baseline = CBaseline(path, read_summary(path))
        except (DecodeError, OSError):
            continue
        if baseline.summary.fingerprint == fingerprint and baseline.has_verify_rate(scheme):
            found.append(baseline)
    if not found:
        return None
    found.sort(key=lambda b: b.created, reverse=True)
    return min(found, key=lambda b: (_PROFILE_RANK.get(b.summary.profile, 2), not b.summary.complete))
