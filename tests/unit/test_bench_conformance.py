"""`qmemo bench c`'s liboqs ML-DSA conformance A/B, from its rows: the line it prints, the
disturbed rule, and the liboqs build's name read back from a fingerprint."""

from __future__ import annotations

from qmemo.bench import c_verifiers
from qmemo.bench.c_summary import Fingerprint, VerifyImplementation
from qmemo.bench.fingerprint import build_name

def lines_of(liboqs: list[float], conforming: list[float], shipped: list[float],
             load: float = 0.5) -> tuple[dict, list[str]]:
    """The shipped row made from per-turn rates (each turn 1 s), and the step's notes."""
    lines = []
    for mode, rates in (("liboqs", liboqs), ("conforming", conforming), ("shipped", shipped)):
        lines.append({"mode": mode, "ops_per_s": sum(rates) / len(rates), "turn_rates": rates})
    notes: list[str] = []
    row = c_verifiers._shipped_row(c_verifiers.CONFORMANCE_TARGETS[0], lines, {}, "1 s x 4", load, notes)
    return row, notes


def as_record(row: dict) -> VerifyImplementation:
    return VerifyImplementation(**{k: row[k] for k in (
        "scheme", "implementation", "ops_per_s", "us_per_op", "ratio_to_liboqs", "instructions_per_verify",
        "hash_to_point", "public_key", "signature_compatible_with_liboqs", "source", "mode", "timing", "calls")})


def test_a_steady_run_prints_the_conforming_rate_and_its_ratio_to_the_shipped_one():
    row, notes = lines_of([40_000, 40_000], [40_100, 39_900], [40_400, 40_400])
    assert row["mode"] == "shipped" and row["ratio_to_liboqs"] == 40_400 / 40_000
    assert "NOT FIPS 204's" in row["implementation"] and row["timing"].startswith("no cache")
    assert notes == [] and row["source"].endswith("undisturbed")
    (line,) = c_verifiers.conformance_lines([as_record(row)])
    assert line.startswith("ML-DSA-44 liboqs verify: conforming build 40,000/s, as shipped 40,400/s")
    assert "conforming / as shipped 0.990" in line and "constant-time" in line and "disturbed" not in line


def test_a_ratio_that_moves_between_turns_is_marked_disturbed():
    row, notes = lines_of([40_000, 40_000], [40_000, 40_000], [40_000, 36_000])
    assert "LOOKS DISTURBED: the ratio moved" in row["source"] and len(notes) == 1
    assert "looks disturbed: the ratio moved" in c_verifiers.conformance_lines([as_record(row)])[0]


def test_a_control_off_one_or_a_busy_machine_is_marked_disturbed():
    row, _ = lines_of([40_000], [36_000], [40_000])                  # identical code 10% apart
    assert "the identical conforming objects ran at 0.900x" in row["source"]
    row, _ = lines_of([40_000], [40_000], [40_000], load=64.0)
    assert "load average 64.0" in row["source"]


def test_the_build_name_comes_back_from_the_fingerprint_and_only_when_recorded():
    named = Fingerprint("x", "cpu", 2, "f", "0.13.0", "liboqs 0.13.0 + qMEMO ML-DSA conformance patch abc; -G Ninja; "
                                                       "liboqs.so sha256 00")
    assert build_name(named) == "liboqs 0.13.0 + qMEMO ML-DSA conformance patch abc"
    assert build_name(Fingerprint("x", "cpu", 2, "f", "0.13.0", "-G Ninja; liboqs.so sha256 00")) is None
    assert build_name(None) is None
