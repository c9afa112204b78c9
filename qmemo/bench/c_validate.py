"""Check the C suite against liboqs's own tools, in the same run as the measurements.

Two checks, written to validate.json ("qmemo-c-validate/1"):
- speed_sig interleaved with our `verify` benchmark: the ratio of the two medians on
  speed_sig's own workload (one signature verified over and over), and the cost of our
  default ring of distinct signatures against that (the ring's size is bench_c's
  QB_RING_DEFAULT, read back from the binary's JSON, never repeated here);
- kat_sig for every scheme built, its output hashed and compared with the kats.json
  shipped in the same liboqs source, as liboqs's tests/test_kat.py does.

It runs tools and reads their output; it never prints (the log file gets everything).
"""

from __future__ import annotations

import hashlib
import statistics
import subprocess
import tempfile
from pathlib import Path
from dataclasses import dataclass
from typing import IO

from qmemo.errors import BenchmarkError
from qmemo.paths import LIBOQS_DIR, REPO_ROOT
from qmemo.records import from_json, read_json, read_record

VALIDATE_SCHEMA = "qmemo-c-validate/1"
# The two schemes validated against speed_sig, and the message length speed_sig
# signs (its sig_speed_wrapper hard-codes 50 bytes): ours uses the same for the ratio.
VALIDATE_SCHEMES = ("Falcon-512", "ML-DSA-44")
SPEED_SIG_MSG_BYTES = 50
# The acceptance bound on |our median / speed_sig's median - 1|: within it, our harness
# measures what liboqs measures.
VALIDATE_TOLERANCE = 0.10


# --- validate.json: its schema, for the validator that writes it and c_collect that reads it ---

@dataclass(frozen=True, slots=True)
class Round:
    """One round's three measurements, in microseconds per verification."""

    round: int
    ours_iterations: int                 # as many as speed_sig did in the previous round
    speed_sig_us_per_op: float
    speed_sig_iterations: float
    speed_sig_stdev_us: float
    ours_same_signature_us_per_op: float  # --ring 1: speed_sig's workload
    ours_ring_us_per_op: float            # bench_c's default ring


@dataclass(frozen=True, slots=True)
class SchemeCheck:
    speed_sig_median_us_per_op: float
    ours_median_us_per_op: float
    ratio: float                          # ours (--ring 1) / speed_sig's, medians over rounds
    within_tolerance: bool
    ours_ring_median_us_per_op: float
    ring_ratio: float
    ring_effect: float                    # ours on the ring / ours on one signature
    ratio_of_minimums: float              # the fastest round of each side: a load-robust estimate
    rounds: tuple[Round, ...]


@dataclass(frozen=True, slots=True)
class KatRow:
    scheme: str
    expected: str | None                  # kats.json's digest (None: the scheme has none there)
    got: str
    match: bool


@dataclass(frozen=True, slots=True)
class KatCheck:
    verdict: str                          # "pass" or "fail"
    method: str
    kats_json: str
    schemes: tuple[KatRow, ...]


@dataclass(frozen=True, slots=True)
class Validation:
    schema: str
    ok: bool                              # the KAT verdict
    ratios_within_tolerance: bool
    method: str
    tolerance: float
    speed_sig: str
    ratios: dict[str, SchemeCheck]
    kat: KatCheck


def read_validation(path: Path) -> Validation:
    return read_record(Validation, VALIDATE_SCHEMA, path)


# --- running the checks ---------------------------------------------------------------------

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
    return hashlib.sha256(output.replace(b"\r\n", b"\n")).hexdigest()


def validate(binary: Path, *, rounds: int, log: IO[str]) -> Validation:
    """Run speed_sig and our verify interleaved, then kat_sig for every built scheme."""
    speed_sig, kat_sig = LIBOQS_DIR / "bin" / "speed_sig", LIBOQS_DIR / "bin" / "kat_sig"
    kats_path = LIBOQS_DIR / "share" / "liboqs" / "kats.json"
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
    # verify on the default ring of distinct signatures (what the suite reports).
    per_scheme: dict[str, list[dict[str, float]]] = {s: [] for s in VALIDATE_SCHEMES}
    default_ring: list[int] = []
    with tempfile.TemporaryDirectory() as tmp:
        ours_json = Path(tmp) / "verify.json"

        def ours(scheme: str, ring: int | None, iterations: int) -> float:
            # ring None: the binary's own default ring, whose size its JSON reports.
            ring_flag = [] if ring is None else ["--ring", str(ring)]
            call([str(binary), "verify", "--alg", scheme, "--msg-bytes", str(SPEED_SIG_MSG_BYTES), *ring_flag,
                  "--iterations", str(iterations), "--json", str(ours_json)])
            doc = read_json(ours_json)
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

    ratios: dict[str, SchemeCheck] = {}
    for scheme, samples in per_scheme.items():
        def median(key: str) -> float:
            return statistics.median(s[key] for s in samples)

        theirs, same, ring = median("speed_sig_us_per_op"), median("ours_same_signature_us_per_op"), \
            median("ours_ring_us_per_op")
        ratios[scheme] = SchemeCheck(
            speed_sig_median_us_per_op=theirs,
            ours_median_us_per_op=same,
            ratio=same / theirs,
            within_tolerance=abs(same / theirs - 1) <= VALIDATE_TOLERANCE,
            ours_ring_median_us_per_op=ring,
            ring_ratio=ring / theirs,
            ring_effect=ring / same,
            # Noise on a shared machine only ever adds time: the fastest round of each
            # side is a second, load-robust estimate of the same ratio.
            ratio_of_minimums=min(x["ours_same_signature_us_per_op"] for x in samples)
            / min(x["speed_sig_us_per_op"] for x in samples),
            rounds=tuple(from_json(Round, sample, f"round {sample['round']}") for sample in samples),
        )

    kats = read_json(kats_path)
    listing = call([str(binary), "list", "--alg", "pq"]).stdout.decode()
    built = [line.split()[0] for line in listing.splitlines()[1:] if line.strip()]
    kat_rows = []
    for scheme in built:
        got = kat_digest(call([str(kat_sig), scheme]).stdout)
        expected = kats.get(scheme, {}).get("single")
        kat_rows.append(KatRow(scheme, expected, got, got == expected))
    kat_ok = bool(kat_rows) and all(r.match for r in kat_rows)

    # The KAT decides "ok": a library whose output differs from liboqs's known answers
    # is not the library we mean to measure. A ratio outside the tolerance is reported
    # (and shown in red) but does not fail the run: on a machine shared with other work
    # it says the run was noisy, not that the measurement is wrong.
    return Validation(
        schema=VALIDATE_SCHEMA,
        ok=kat_ok,
        ratios_within_tolerance=all(r.within_tolerance for r in ratios.values()),
        method=(f"{rounds} round(s); in each, liboqs speed_sig --duration 1 <scheme>, our verify benchmark "
                   "on one signature repeated (--ring 1, speed_sig's workload) and on the default ring of "
                   f"{default_ring[0]} distinct signatures, all with {SPEED_SIG_MSG_BYTES}-byte messages as speed_sig "
                   "signs, run back to back in rotating order. ratio = median over rounds of our µs/op (--ring 1) "
                "/ median of speed_sig's mean µs/op; ring_effect = ours on the ring / ours on one signature"),
        tolerance=VALIDATE_TOLERANCE,
        speed_sig=str(speed_sig),
        ratios=ratios,
        kat=KatCheck(
            verdict="pass" if kat_ok else "fail",
            method="sha256 of `kat_sig <scheme>` output (\\r\\n -> \\n) == kats.json[scheme]['single'], "
                   "as liboqs tests/test_kat.py",
            kats_json=str(kats_path),
            schemes=tuple(kat_rows),
        ),
    )
