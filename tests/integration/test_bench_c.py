"""bench_c: build the C suite, smoke-run every benchmark with tiny sizes, check its JSON.

Each test runs the real binary (bench_c/build/qmemo-bench, built once per session with
make) and checks the documented fields (docs/benchmarks.md) for sane values: positive
rates, sizes equal to the ones liboqs declares (read independently through
liboqs-python), statistics that are internally consistent. The statistics module is
checked against values computed here in Python from the same numbers, `inspect` must
pass on every scheme and must fail when its test hook corrupts the signature, and the
run-all command must produce a summary.json that `load_c_baseline` reads.

Sizes are tiny so the file runs in well under a minute on 2 cores; the figures they
produce mean nothing and nothing here asserts a speed.
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from qmemo.bench.c_runner import BINARY
from qmemo.bench.c_validate import kat_digest, parse_speed_sig
from qmemo.paths import BENCH_C_DIR as BENCH_DIR, REPO_ROOT
from tests.conftest import VENV_BIN

pytestmark = pytest.mark.slow

# Flags that keep every measurement to a few hundredths of a second.
FAST = ("--warmup", "0.005")


@pytest.fixture(scope="module")
def binary() -> Path:
    done = subprocess.run(["make", "-C", str(BENCH_DIR)], capture_output=True, text=True)
    assert done.returncode == 0, f"make failed:\n{done.stdout}\n{done.stderr}"
    return BINARY


def bench(binary: Path, tmp_path: Path, benchmark: str, *args: str, expect_exit: int = 0) -> dict[str, Any]:
    """Run one benchmark with --json and return the parsed file, checking the envelope."""
    out = tmp_path / f"{benchmark}.json"
    done = subprocess.run([str(binary), benchmark, *args, "--json", str(out)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == expect_exit, f"{benchmark} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    doc = json.loads(out.read_text())
    assert doc["schema"] == "qmemo-c-bench/1"
    assert doc["benchmark"] == benchmark
    assert doc["ok"] is (expect_exit == 0) and doc["exit_code"] == expect_exit
    system = doc["system"]
    assert system["cores_online"] >= 1 and system["cpu_model"]
    assert system["liboqs_version"] == "0.13.0"
    assert "-Wall" in system["cflags"] and "-ffast-math" not in system["cflags"]
    assert system["tsc"]["unit"].startswith("TSC ticks")
    assert doc["wall_s"] > 0
    return doc


def assert_consistent(s: dict[str, Any], *, positive: bool = True) -> None:
    """A stats summary is internally consistent (the order of its quantiles, IQR...)."""
    assert s["n"] >= 1
    order = [s[k] for k in ("min", "p1", "p5", "p25", "median", "p75", "p95", "p99", "max")]
    assert order == sorted(order), order
    assert s["min"] <= s["mean"] <= s["max"]
    # JSON carries 10 significant digits, so compare at that precision of p75.
    assert s["iqr"] == pytest.approx(s["p75"] - s["p25"], rel=1e-6, abs=1e-9 * abs(s["p75"]))
    assert s["stdev"] >= 0 and 0 <= s["outliers_3sigma"] <= s["n"]
    assert s["recommendation"] in ("median_iqr", "mean_stdev")
    if positive:
        assert s["min"] > 0


def assert_measurement(m: dict[str, Any]) -> None:
    assert m["ops"] >= 1 and m["batches"] >= 1 and m["elapsed_s"] > 0
    assert m["ops_per_s"] > 0 and m["us_per_op"] > 0
    assert m["ops_per_s"] * m["us_per_op"] == pytest.approx(1e6)
    assert m["tsc_ticks_per_op"] > 0
    assert_consistent(m["batch_us_per_op"])


def declared_sizes(scheme: str) -> tuple[int, int, int]:
    """(public key, secret key, max signature) bytes as liboqs-python reports them."""
    from qmemo.crypto.schemes import get_scheme

    info = get_scheme(scheme).info
    return info.public_key_bytes, info.secret_key_bytes, info.max_signature_bytes


# --- the statistics module, on known data --------------------------------------------

def type7_percentile(sorted_x: list[float], p: float) -> float:
    h = (len(sorted_x) - 1) * p / 100
    lo = math.floor(h)
    if lo >= len(sorted_x) - 1:
        return sorted_x[-1]
    return sorted_x[lo] + (h - lo) * (sorted_x[lo + 1] - sorted_x[lo])


def python_summary(x: list[float]) -> dict[str, float]:
    n = len(x)
    mean = statistics.fmean(x)
    m2, m3, m4 = (sum((v - mean) ** k for v in x) / n for k in (2, 3, 4))
    skew, kurt = m3 / m2 ** 1.5, m4 / m2 ** 2 - 3
    s = sorted(x)
    return {
        "mean": mean, "stdev": statistics.stdev(x), "median": statistics.median(x),
        "p1": type7_percentile(s, 1), "p5": type7_percentile(s, 5), "p25": type7_percentile(s, 25),
        "p75": type7_percentile(s, 75), "p95": type7_percentile(s, 95), "p99": type7_percentile(s, 99),
        "skewness": skew, "excess_kurtosis": kurt, "jarque_bera": n / 6 * (skew ** 2 + kurt ** 2 / 4),
        "outliers_3sigma": sum(abs(v - mean) > 3 * statistics.stdev(x) for v in x),
    }


def run_stats(binary: Path, tmp_path: Path, values: list[float]) -> dict[str, Any]:
    out = tmp_path / "stats.json"
    done = subprocess.run([str(binary), "stats", "--json", str(out)], input=" ".join(map(repr, values)),
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())["results"]["summary"]


@pytest.mark.parametrize("values", [
    [1.0, 2.0, 3.0, 4.0, 100.0],                                  # one far outlier: skewed, heavy-tailed
    [float(v) for v in range(1, 101)],                            # uniform: symmetric, light tails
    [10.0 + ((i * 7919) % 97) / 13 + (50.0 if i % 50 == 0 else 0.0) for i in range(400)],  # 3-sigma outliers
])
def test_stats_match_an_independent_python_computation(binary, tmp_path, values):
    got = run_stats(binary, tmp_path, values)
    want = python_summary(values)
    for key, value in want.items():
        assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-9), key
    assert got["normal_5pct"] is (want["jarque_bera"] <= 5.991)
    assert got["recommendation"] == ("mean_stdev" if got["normal_5pct"] else "median_iqr")
    assert_consistent(got)


def test_stats_of_a_constant_sample_has_no_shape(binary, tmp_path):
    got = run_stats(binary, tmp_path, [5.0] * 10)
    assert got["stdev"] == 0 and got["iqr"] == 0 and got["median"] == 5
    assert got["skewness"] is None and got["jarque_bera"] is None  # undefined, written as null


def test_stats_rejects_input_that_is_not_numbers(binary, tmp_path):
    done = subprocess.run([str(binary), "stats"], input="1 2 x", capture_output=True, text=True)
    assert done.returncode == 2


# --- each benchmark -------------------------------------------------------------------

def test_list_names_every_built_scheme_with_the_declared_sizes(binary, tmp_path):
    doc = bench(binary, tmp_path, "list")
    rows = {r["scheme"]: r for r in doc["results"]["schemes"]}
    for scheme in ("Falcon-512", "Falcon-padded-512", "Falcon-1024", "Falcon-padded-1024", "ML-DSA-44",
                   "ML-DSA-65", "ML-DSA-87", "SPHINCS+-SHA2-128f-simple", "SPHINCS+-SHA2-128s-simple",
                   "MAYO-1", "MAYO-2"):
        row = rows[scheme]
        assert (row["public_key_bytes"], row["secret_key_bytes"], row["signature_bytes_max"]) == \
            declared_sizes(scheme)
        assert row["post_quantum"] and row["nist_level"] in (1, 2, 3, 5)
    for scheme in ("ECDSA-secp256k1/libsecp256k1", "ECDSA-secp256k1/OpenSSL", "Ed25519/libsodium",
                   "Ed25519/OpenSSL"):
        assert rows[scheme]["nist_level"] is None and not rows[scheme]["post_quantum"]


def test_verify_is_one_timed_pass_of_the_requested_iterations(binary, tmp_path):
    doc = bench(binary, tmp_path, "verify", "--iterations", "300", *FAST)
    (row,) = doc["results"]["schemes"]
    assert row["scheme"] == "Falcon-512" and row["iterations"] == 300 and row["msg_bytes"] == 256
    assert row["measurement"]["batches"] == 1 and row["measurement"]["ops"] == 300
    assert_measurement(row["measurement"])
    assert row["ops_per_s"] == row["measurement"]["ops_per_s"]


def test_statistical_reports_the_distribution_of_trials(binary, tmp_path):
    doc = bench(binary, tmp_path, "statistical", "--trials", "40", "--batch", "5", *FAST)
    (row,) = doc["results"]["schemes"]
    assert row["trials"] == 40 and row["batch"] == 5
    for key in ("ops_per_s", "us_per_op", "tsc_ticks_per_op"):
        assert row[key]["n"] == 40
        assert_consistent(row[key])
    assert row["median_ops_per_s"] == row["ops_per_s"]["median"]
    assert row["median_us_per_op"] == row["us_per_op"]["median"]
    assert row["p99_us_per_op"] == row["us_per_op"]["p99"]
    both_normal = row["ops_per_s"]["normal_5pct"] and row["us_per_op"]["normal_5pct"]
    assert row["recommendation"] == ("mean_stdev" if both_normal else "median_iqr")


def test_compare_has_one_row_per_scheme_and_ratios_to_the_first(binary, tmp_path):
    doc = bench(binary, tmp_path, "compare", "--duration", "0.02", *FAST)
    rows = doc["results"]["rows"]
    assert [r["scheme"] for r in rows] == ["Falcon-512", "ML-DSA-44"]
    for r in rows:
        for op in ("keygen", "sign", "verify"):
            assert_measurement(r[op])
            assert r[f"{op}_per_s"] == r[op]["ops_per_s"]
        assert 0 < r["signature_bytes_mean"] <= r["signature_bytes_max"]
    (ratio,) = doc["results"]["ratios"]
    assert ratio["verify"] == pytest.approx(rows[1]["verify_per_s"] / rows[0]["verify_per_s"])


@pytest.mark.parametrize("op", ["verify", "sign"])
def test_multicore_rows_have_speedup_and_efficiency_against_one_thread(binary, tmp_path, op):
    doc = bench(binary, tmp_path, "multicore", "--op", op, "--threads", "2", "--duration", "0.05", *FAST)
    res = doc["results"]
    assert res["op"] == op
    rows = res["rows"]
    assert [r["threads"] for r in rows] == [1, 2]  # the 1-thread baseline is always measured
    assert rows[0]["speedup"] == 1
    for r in rows:
        assert r["ops_per_s"] > 0 and sum(r["thread_ops"]) == r["ops"] and len(r["thread_ops"]) == r["threads"]
        assert r["efficiency"] == pytest.approx(r["speedup"] / r["threads"])
        assert r["speedup"] == pytest.approx(r["ops_per_s"] / rows[0]["ops_per_s"])


def test_pool_compares_a_worker_pool_with_a_sequential_loop(binary, tmp_path):
    doc = bench(binary, tmp_path, "pool", "--iterations", "60", "--trials", "2", "--threads", "2")
    res = doc["results"]
    assert res["tasks_per_block"] == 60 and res["blocks"] == 2
    for mode, workers in (("sequential", 1), ("pool", 2)):
        m = res[mode]
        assert m["workers"] == workers and m["ops_per_s"] > 0
        for key in ("block_ms", "latency_us", "service_us"):
            assert_consistent(m[key])
        assert m["latency_us"]["n"] == 120
        assert m["latency_us"]["median"] >= m["service_us"]["min"]  # waiting can only add
    assert res["speedup"] == pytest.approx(res["sequential"]["block_ms_median"] / res["pool"]["block_ms_median"])


def test_sizes_distribution_sits_within_the_declared_maximum(binary, tmp_path):
    doc = bench(binary, tmp_path, "sizes", "--iterations", "40")
    rows = {r["scheme"]: r for r in doc["results"]["schemes"]}
    assert set(rows) == {"Falcon-512", "Falcon-1024", "Falcon-padded-512", "Falcon-padded-1024"}
    for scheme, r in rows.items():
        declared = declared_sizes(scheme)[2]
        assert r["signature_bytes_max"] == declared and r["signatures"] == 40
        assert 0 < r["min"] <= r["mean"] <= r["max"] <= declared
        assert_consistent(r["distribution"])
        assert sum(count for _, count in r["histogram"]) == 40
        if "padded" in scheme:  # padded signatures all have exactly the declared length
            assert r["fixed_length"] and r["min"] == declared
        else:
            assert r["max"] < declared


def test_classical_measures_both_libraries_for_each_curve(binary, tmp_path):
    doc = bench(binary, tmp_path, "classical", "--duration", "0.02", *FAST)
    rows = {r["scheme"]: r for r in doc["results"]["rows"]}
    assert set(rows) == {"ECDSA-secp256k1/libsecp256k1", "ECDSA-secp256k1/OpenSSL", "Ed25519/libsodium",
                         "Ed25519/OpenSSL"}
    for scheme, r in rows.items():
        for op in ("keygen", "sign", "verify"):
            assert_measurement(r[op])
        assert r["public_key_bytes"] in (32, 33)
        assert ("verify_preparsed" in r) is (scheme != "Ed25519/libsodium")
    assert rows["Ed25519/libsodium"]["signature_bytes_mean"] == 64
    assert rows["ECDSA-secp256k1/libsecp256k1"]["signature_bytes_mean"] == 64
    assert 68 <= rows["ECDSA-secp256k1/OpenSSL"]["signature_bytes_mean"] <= 72  # DER


def test_all_covers_every_scheme_of_the_build_plus_the_classical_ones(binary, tmp_path):
    listed = {r["scheme"] for r in bench(binary, tmp_path, "list")["results"]["schemes"]}
    doc = bench(binary, tmp_path, "all", "--iterations", "1", "--warmup", "0")
    rows = doc["results"]["rows"]
    assert {r["scheme"] for r in rows} == listed
    for r in rows:
        assert r["keygen_per_s"] > 0 and r["sign_per_s"] > 0 and r["verify_per_s"] > 0
        assert 0 < r["signature_bytes_mean"] <= r["signature_bytes_max"]


def test_invalid_signatures_are_all_rejected_and_timed(binary, tmp_path):
    doc = bench(binary, tmp_path, "invalid", "--duration", "0.02", *FAST)
    for row in doc["results"]["schemes"]:
        cases = {c["case"]: c for c in row["cases"]}
        assert set(cases) == {"valid", "flipped_bit", "zeroed", "wrong_key", "garbage"}
        assert cases["valid"]["cost_relative_to_valid"] == 1
        for c in cases.values():
            assert_measurement(c["measurement"])
            assert c["expected"] == ("accepted" if c["case"] == "valid" else "rejected")


def test_inspect_passes_on_every_scheme(binary, tmp_path):
    doc = bench(binary, tmp_path, "inspect", "--iterations", "1")
    res = doc["results"]
    assert res["ok"] and res["surprises"] == 0
    assert len(res["schemes"]) == 15
    for row in res["schemes"]:
        assert row["ok"] and row["checks"]["round_trip"]["runs"] == 1
        assert row["checks"]["wrong_public_key"]["surprises"] == 0


def test_inspect_reports_a_corrupted_signature_and_exits_nonzero(binary, tmp_path):
    doc = bench(binary, tmp_path, "inspect", "--alg", "Falcon-512,ECDSA-secp256k1", "--iterations", "2",
                "--corrupt-signature", expect_exit=1)
    res = doc["results"]
    assert res["corrupt_signature_hook"] and not res["ok"]
    for row in res["schemes"]:
        assert not row["ok"]
        assert row["checks"]["round_trip"]["surprises"] == 2
        assert any("round_trip" in text for text in row["surprises"])


@pytest.mark.parametrize("args", [
    ("verify", "--alg", "No-Such-Scheme"),
    ("verify", "--iterations", "0"),
    ("verify", "--no-such-flag"),
    ("multicore", "--op", "keygen"),
    ("no-such-benchmark",),
])
def test_bad_usage_exits_2(binary, args):
    assert subprocess.run([str(binary), *args], capture_output=True).returncode == 2


# --- validate helpers and the run-all command ----------------------------------------

def test_speed_sig_rows_are_parsed():
    text = ("Operation | Iterations | Total time (s) | Time (us): mean | pop. stdev | CPU cycles: mean | pop. stdev\n"
            "verify                               |      21530 |          1.000 |          46.449 |     30.615 |"
            "                    120457 |      79354\n")
    assert parse_speed_sig(text)["verify"] == {"iterations": 21530, "total_s": 1.0, "mean_us": 46.449,
                                              "stdev_us": 30.615, "mean_ticks": 120457, "stdev_ticks": 79354}


def test_kat_digest_normalises_newlines_like_liboqs():
    assert kat_digest(b"a\r\nb\n") == kat_digest(b"a\nb\n")


def test_run_all_writes_every_file_and_a_summary_the_reader_loads(binary, tmp_path):
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "qmemo.cli", "bench", "c", "--smoke", "--out", str(out)],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)   # may build fn-dsa first
    assert done.returncode == 0, done.stdout + done.stderr
    for name in ("system", "verify", "statistical", "compare", "multicore_verify", "multicore_sign", "pool",
                 "sizes", "classical", "all", "inspect", "invalid", "verify_implementations", "validate",
                 "summary"):
        assert (out / f"{name}.json").exists(), name
    assert (out / "run.log").stat().st_size > 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["schema"] == "qmemo-c-baseline/1" and summary["quick"] is True
    assert summary["system"]["cores"] >= 1 and summary["system"]["liboqs_version"] == "0.13.0"
    assert len(summary["schemes"]) == 15
    for name, path in summary["files"].items():
        assert (out / path).exists() or path.startswith("("), name
    assert summary["validate"]["kat"]["verdict"] == "pass" and summary["validate"]["kat"]["schemes"] == 11
    falcon_check = summary["validate"]["ratios"]["Falcon-512"]
    assert falcon_check["ratio"] == pytest.approx(
        falcon_check["ours_median_us_per_op"] / falcon_check["speed_sig_median_us_per_op"])
    assert falcon_check["ring_effect"] == pytest.approx(
        falcon_check["ours_ring_median_us_per_op"] / falcon_check["ours_median_us_per_op"])

    from qmemo.bench.c_baseline import load_c_baseline

    baseline = load_c_baseline(out / "summary.json")
    assert baseline is not None and baseline.run_id == "run" and baseline.quick
    falcon = summary["single_core_verify"]["Falcon-512"]
    assert baseline.verify_ops_per_s("Falcon-512") == falcon["ops_per_s"]
    assert baseline.verify_ops_per_s("ECDSA-secp256k1") == \
        summary["schemes"]["ECDSA-secp256k1/libsecp256k1"]["verify_per_s"]
    assert [r.threads for r in baseline.multicore("verify")] == list(range(1, summary["system"]["cores"] + 1))
    assert baseline.summary.validate is not None and baseline.summary.validate.kat.verdict == "pass"
    check_verify_implementations(summary["verify_implementations"])


def check_verify_implementations(rows: list[dict]) -> None:
    """Each scheme's liboqs row, then qMEMO's modes where it has a verifier (and, for ML-DSA on
    an AVX2 CPU, liboqs's verify as shipped, without the setup's conformance patch), fn-dsa
    last: one run's rates, each ratio to that run's liboqs row of the same scheme - the
    shipped row's to the conforming build's timed with it - every row saying its timing."""
    from qmemo.bench.c_verifiers import CONFORMANCE_TARGETS, TARGETS
    from qmemo.crypto.liboqs import cpu_extensions

    shipped = {t.scheme for t in CONFORMANCE_TARGETS} if cpu_extensions()["AVX2"] else set()
    assert [(r["scheme"], r["mode"]) for r in rows] == \
        [(t.scheme, m) for t in TARGETS for m in t.modes + (("shipped",) if t.scheme in shipped else ())] + \
        [("FN-DSA-512", "decoded"), ("FN-DSA-512", "encoded")]
    liboqs = {r["scheme"]: r for r in rows if r["mode"] == "liboqs"}
    assert all("conformance patch" in r["implementation"] for r in liboqs.values())
    for row in (r for r in rows if r["mode"] == "shipped"):
        assert "NOT FIPS 204's" in row["implementation"] and "no cache" in row["timing"]
        assert row["ratio_to_liboqs"] > 0 and "against OQS_SIG_verify of the conforming build" in row["source"]
    rows = [r for r in rows if r["mode"] != "shipped"]
    for row in rows:
        reference = liboqs["Falcon-512" if row["scheme"] == "FN-DSA-512" else row["scheme"]]
        assert row["signature_compatible_with_liboqs"] is (row["scheme"] != "FN-DSA-512")
        if row["mode"] == "liboqs":
            assert row["implementation"].startswith("liboqs 0.13.0") and row["ratio_to_liboqs"] == 1.0
        else:   # qMEMO's (and fn-dsa's) rows say where they are variable-time
            cached = row["public_key"].startswith("cached")
            assert ("variable-time" in row["timing"]) is (cached or row["hash_to_point"] == "variable-time"), row
        if row["ops_per_s"] is None:       # fn-dsa without cargo: null rows, never invented ones
            assert row["scheme"] == "FN-DSA-512" and row["ratio_to_liboqs"] is None
            continue
        assert row["ops_per_s"] > 0 and row["us_per_op"] == pytest.approx(1e6 / row["ops_per_s"])
        assert row["ratio_to_liboqs"] == pytest.approx(row["ops_per_s"] / reference["ops_per_s"])
    assert liboqs["Falcon-512"]["timing"] == "constant-time hash-to-point"
    assert "not signature-compatible" in rows[-2]["implementation"]


def test_the_reader_returns_none_without_a_baseline(tmp_path):
    from qmemo.bench.c_baseline import load_c_baseline

    assert load_c_baseline(tmp_path / "summary.json") is None


def test_the_reader_refuses_a_file_of_another_kind(tmp_path):
    from qmemo.bench.c_baseline import load_c_baseline
    from qmemo.errors import DecodeError

    path = tmp_path / "summary.json"
    path.write_text('{"schema": "something-else/1"}')
    with pytest.raises(DecodeError):
        load_c_baseline(path)


@pytest.mark.parametrize("value", [" -1", "-1", "2305843009213693952", "1e3", ""])
def test_counts_that_are_not_plain_bounded_numbers_are_refused(binary, value):
    result = subprocess.run([str(binary), "sizes", "--alg", "Falcon-512", "--iterations", value],
                            capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "bad value for --iterations" in result.stderr


def test_run_all_refuses_an_output_folder_that_holds_an_earlier_run(tmp_path):
    (tmp_path / "statistical.json").write_text("{}")
    result = subprocess.run([str(VENV_BIN / "qmemo"), "bench", "c", "--smoke", "--only", "verify", "--out",
                             str(tmp_path)], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 1
    assert "not empty" in result.stderr
