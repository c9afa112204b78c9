"""The verifier tables of the report and the baseline's "what a node runs" row, on rows of the
form `qmemo bench c` writes since ML-DSA's verifier (mode, timing, calls), and on older ones.

Why: the best-honest table must never pick FN-DSA (another scheme) or hide that a rate
is variable-time; a node's figure must be the batch row (what the admission kernel
runs) where the run has one.
"""

from __future__ import annotations

from pathlib import Path

from qmemo.bench.c_baseline import CBaseline
from qmemo.analysis.report_verifiers import _instruction_steps, best_honest, constant_time, mode, timing
from qmemo.bench.c_summary import VerifyImplementation


def row(scheme: str, mode_: str | None, rate: float, instructions: int | None = None, *, timing_: str | None = None,
        compatible: bool = True, h2p: str = "none", key: str = "key per verify") -> VerifyImplementation:
    return VerifyImplementation(scheme, f"{scheme} {mode_}", rate, 1e6 / rate, None, instructions, h2p, key, compatible,
                                "test", mode_, timing_, None if mode_ is None else "single")


ROWS = (
    row("Falcon-512", "liboqs", 5_000, 489_480, timing_="constant-time hash-to-point", h2p="constant-time"),
    row("Falcon-512", "cached", 60_000, 48_692, timing_="variable-time hash-to-point; cached key", h2p="variable-time",
        key="cached decoded key"),
    row("Falcon-512", "batch", 80_000, 37_409, timing_="variable-time hash-to-point; cached key", h2p="variable-time",
        key="cached decoded key"),
    row("ML-DSA-44", "liboqs", 20_000, 248_024, timing_="no cache; time independent of the message"),
    row("ML-DSA-44", "uncached", 90_000, 254_073, timing_="no cache; time independent of the message"),  # a busy run
    row("ML-DSA-44", "cached", 66_000, 69_621, timing_="variable-time: cached key", key="cached expanded key"),
    row("MAYO-1", "liboqs", 4_000, timing_="liboqs as shipped; no cache"),
    row("FN-DSA-512", "decoded", 500_000, compatible=False, timing_="variable-time hash-to-point; cached key"),
)


def test_the_best_honest_verifier_is_the_one_a_node_runs_whatever_rate_came_out_highest():
    pairs = best_honest(ROWS)
    assert [(liboqs.scheme, mode(liboqs), mode(best)) for liboqs, best in pairs] == [
        ("Falcon-512", "liboqs", "batch"), ("ML-DSA-44", "liboqs", "cached"), ("MAYO-1", "liboqs", "liboqs")]


def test_every_rate_says_whether_it_is_constant_time():
    said = {(r.scheme, mode(r)): constant_time(r) for r in ROWS}
    assert said[("Falcon-512", "liboqs")] == "yes: constant-time hash-to-point"
    assert said[("Falcon-512", "batch")].startswith("no: variable-time")
    assert said[("ML-DSA-44", "cached")] == "no: variable-time: cached key"
    assert said[("ML-DSA-44", "liboqs")] == "in the message: no cache; time independent of the message"


def test_instruction_steps_are_the_differences_of_the_rows_counts():
    tables = "\n".join(_instruction_steps(ROWS))
    assert "| variable-time hash-to-point instead" not in tables              # no uncached Falcon row here
    assert "four signatures' points hashed at once (four-lane Keccak) | 37,409 | 11,283 |" in tables
    assert "A-hat, tr and NTT(t1 * 2^d) cached | 69,621 | 184,452 |" in tables


def test_rows_of_an_older_run_are_read_from_their_other_fields():
    old = VerifyImplementation("Falcon-512", "fast", 60_000.0, 16.7, 12.0, 58_172, "variable-time", "cached decoded key",
                               True, "test")
    assert (mode(old), timing(old)) == ("cached", "variable-time hash-to-point; cached key")


def test_a_node_is_set_against_the_batch_row_where_the_run_has_one(tmp_path: Path):
    from dataclasses import replace

    from qmemo.bench.c_summary import read_summary

    fixture = read_summary(Path(__file__).parents[1] / "fixtures" / "c-baseline-quick" / "summary.json")
    old = CBaseline(tmp_path / "summary.json", fixture)
    assert old.fast_verifier("Falcon-512").public_key == "cached decoded key"      # before the batch row
    new = CBaseline(tmp_path / "summary.json", replace(fixture, verify_implementations=ROWS))
    assert mode(new.fast_verifier("Falcon-512")) == "batch"
    assert mode(new.fast_verifier("ML-DSA-44")) == "cached"
    assert new.fast_verifier("MAYO-1") is None
