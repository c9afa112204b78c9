"""Report sections drawn from the C baseline alone: environment, verification, scheme
comparison, multicore and pool, signature sizes.

Each section function takes the results folder and the folder the plots go to, and
returns a `Section` (Markdown and the plots it drew). Figures are copied from the result
files and every table names its file; the only arithmetic here is ratios between two
figures the table shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from qmemo.analysis import plots
from qmemo.analysis.markdown import MISSING, Section, image, num, percent, source_note, table, times
from qmemo.analysis.results import FALCON, Results, display_path
from qmemo.bench.c_validate import read_validation
from qmemo.bench.fingerprint import build_name
from qmemo.errors import DecodeError

JB_CRITICAL_5PCT = 5.991  # chi-squared(2) at 5%: Jarque-Bera's null distribution (bench_c/src/stats.h)
# Two figures of the same quantity further apart than this are called out as disagreeing
# (bench_c's own acceptance bound for agreement with speed_sig).
AGREEMENT_TOLERANCE = 0.10
CLASSICAL_PAIRS = (  # (scheme, the implementation chains run, the one the old reports used)
    ("ECDSA-secp256k1", "ECDSA-secp256k1/libsecp256k1", "ECDSA-secp256k1/OpenSSL"),
    ("Ed25519", "Ed25519/libsodium", "Ed25519/OpenSSL"),
)


def _caption(results: Results, source: str) -> str:
    return f"{results.machine_caption()} - {source}"


def _apart(a: float, b: float) -> float:
    """Relative difference of a from b."""
    return a / b - 1


# --- environment -----------------------------------------------------------------------

def environment(results: Results, plot_dir: Path) -> Section:
    s, b = results.system, results.baseline
    if s is None:
        return Section("Environment", "This run has no description of its machine (no benchmark finished).")
    tsc_hz = s.tsc_hz
    rows = [
        ("run id", f"`{b.run_id}`" + (" (quick profile: short measurements, indicative only)" if b.quick else "")),
        ("date (UTC)", b.created),
        ("command", f"`{b.summary.command}`"),
        ("machine", f"{s.cpu_model}, {s.cores} cores online, {s.kernel}"),
        ("CPU flags used", s.cpu_flags or MISSING),
        ("frequency governor", s.governor or "not readable (VM or container)"),
        ("liboqs", f"{build_name(b.summary.fingerprint) or s.liboqs_version}, code path: "
                   + ("**AVX2**" if s.avx2 else "**portable** (no AVX2)")),
        ("compiler and flags", f"{s.compiler} (`__VERSION__`); `{s.cflags}`"),
        ("classical libraries", f"libsecp256k1 {s.libsecp256k1_version or MISSING}, "
                                f"libsodium {s.libsodium_version or MISSING}, {s.openssl_version or MISSING}"),
        ("tick counter", f"{s.tsc_source} at {num(tsc_hz / 1e9 if tsc_hz else None, 3)} GHz"
                         + (", invariant" if s.tsc_invariant else ", NOT invariant")
                         + " (TSC ticks, not core cycles)"),
        ("load average at start (1/5/15 min)", ", ".join(num(x, 2) for x in s.loadavg_at_start) or MISSING),
    ]
    return Section("Environment", "\n\n".join([
        table(("property", "value"), rows, "ll"),
        source_note(results.summary_source, results.source("system")),
    ]))


# --- verification ------------------------------------------------------------------------

def _distribution_table(stats: Mapping[str, Any]) -> str:
    rows = [(label, num(stats.get(key), 1)) for key, label in (
        ("mean", "mean"), ("median", "**median**"), ("stdev", "standard deviation"), ("min", "min"),
        ("p1", "P1"), ("p5", "P5"), ("p25", "P25"), ("p75", "P75"), ("p95", "P95"), ("p99", "P99"),
        ("max", "max"), ("iqr", "IQR"))]
    rows += [("CV", percent(stats.get("cv"), 2)),
             ("outliers beyond 3 sigma", f"{stats.get('outliers_3sigma', MISSING)} of {stats.get('n', MISSING)}"),
             ("skewness", num(stats.get("skewness"), 3)),
             ("excess kurtosis", num(stats.get("excess_kurtosis"), 3)),
             ("Jarque-Bera", num(stats.get("jarque_bera"), 1))]
    return table(("statistic (verifications/s per trial)", "value"), rows)


def normality_sentence(stats: Mapping[str, Any]) -> str:
    """What the Jarque-Bera statistic says, and which summary the distribution calls for."""
    jb = stats.get("jarque_bera")
    if jb is None:
        return "The distribution has no spread to test (too few trials)."
    if stats.get("normal_5pct"):
        return (f"Jarque-Bera = {jb:,.2f} <= {JB_CRITICAL_5PCT} (chi-squared, 2 d.f., 5%): consistent with a "
                f"normal distribution, so mean +/- standard deviation describes it: "
                f"**{stats['mean']:,.0f} +/- {stats['stdev']:,.0f} verifications/s**.")
    return (f"Jarque-Bera = {jb:,.1f} > {JB_CRITICAL_5PCT} (chi-squared, 2 d.f., 5%): the per-trial rates are "
            f"**not** normally distributed (skewness {stats.get('skewness', 0):.2f}, excess kurtosis "
            f"{stats.get('excess_kurtosis', 0):.2f}), so mean +/- sigma would misdescribe them; the figure to "
            f"quote is the **median with its IQR: {stats['median']:,.0f} verifications/s (IQR {stats['iqr']:,.0f})**.")


def verification(results: Results, plot_dir: Path) -> Section:
    blocks = []
    single = results.rows("verify")
    if single:
        blocks += ["### Single pass", table(
            ("scheme", "verifications", "message B", "verify/s", "µs/verify", "TSC ticks/verify"),
            [(r["scheme"], num(r["iterations"]), num(r["msg_bytes"]), num(r["ops_per_s"]), num(r["us_per_op"], 2),
              num(r["tsc_ticks_per_op"])) for r in single]),
            source_note(results.source("verify"))]
    plot_names: list[str] = []
    for row in results.rows("statistical"):
        stats = row["ops_per_s"]
        blocks += [f"### Distribution: {row['scheme']}, {row['trials']:,} trials x {row['batch']:,} verifications",
                   _distribution_table(stats), normality_sentence(stats),
                   f"Per verification (medians over trials): {row['median_us_per_op']:,.2f} µs, "
                   f"{row['median_tsc_ticks_per_op']:,.0f} TSC ticks; P99 of the per-trial mean latency "
                   f"{row['p99_us_per_op']:,.2f} µs.",
                   source_note(results.source("statistical"))]
        name = f"verify_distribution_{row['scheme']}.png"
        plots.verify_distribution(plot_dir / name, stats, row["scheme"],
                                  _caption(results, results.source("statistical")))
        blocks.append(image(name, f"{row['scheme']} verification rate distribution"))
        plot_names.append(name)
        pass_row = next((r for r in single if r["scheme"] == row["scheme"]), None)
        if pass_row:
            gap = _apart(pass_row["ops_per_s"], stats["median"])
            verdict = ("they agree" if abs(gap) <= AGREEMENT_TOLERANCE else
                       "**they disagree**: the machine's load or clock changed between the two (this suite "
                       "shares its cores); the headroom below uses the statistical median")
            blocks.append(f"Single pass vs statistical median: {pass_row['ops_per_s']:,.0f} vs "
                          f"{stats['median']:,.0f} verifications/s ({gap:+.1%}); {verdict}.")
    blocks += _validation(results)
    return Section("Verification results", "\n\n".join(blocks), tuple(plot_names))


def _validation_method(results: Results) -> str | None:
    """validate.json's method sentence; only that is read from it (the figures are in the
    summary), so a missing or unreadable file costs the report that sentence and says why,
    nothing more."""
    path = results.file("validate")
    if not path.exists():
        return None
    try:
        return read_validation(path).method
    except (OSError, DecodeError) as exc:
        return f"not shown: {display_path(path)} could not be read ({exc})"


def _validation(results: Results) -> list[str]:
    summary = results.baseline.summary
    validate = summary.validate
    blocks = []
    if validate:
        blocks += ["### Agreement with liboqs `speed_sig`", table(
            ("scheme", "ours µs/verify", "speed_sig µs/verify", "ours / speed_sig", f"within +/-{validate.tolerance:.0%}",
             "rounds"),
            [(k, num(v.ours_median_us_per_op, 2), num(v.speed_sig_median_us_per_op, 2), num(v.ratio, 3),
              "yes" if v.within_tolerance else "**no**", v.rounds) for k, v in validate.ratios.items()])]
        method = _validation_method(results)
        if method:
            blocks.append(f"Method: {method}. A ratio above 1 means our harness measured slower verifications "
                          "than `speed_sig` did in the same run.")
        kat = validate.kat
        failed = ", ".join(kat.failed) or "none"
        blocks.append(f"**Known-answer tests:** {kat.verdict.upper()} for {kat.schemes} schemes "
                      f"(`kat_sig` output hashed against liboqs's `kats.json`; failed: {failed}).")
    inspect = summary.inspect
    if inspect:
        notes = "".join(f"\n- {n}" for n in inspect.note_list)
        blocks.append(f"**Correctness checks (`inspect`):** {'passed' if inspect.ok else 'FAILED'}, "
                      f"{inspect.surprises} surprise(s), {inspect.notes} note(s).{notes}")
    if validate or inspect:
        blocks.append(source_note(*([results.source("validate")] if validate else []),
                                  *([results.source("inspect")] if inspect else [])))
    invalid = summary.invalid
    if invalid:
        cases = list(next(iter(invalid.values())))
        blocks += ["### Cost of invalid signatures (what a flood of bad transactions costs a node)", table(
            ("scheme", *(f"{c} /s" for c in cases)),
            [(scheme, *(f"{num(row[c].ops_per_s)} ({times(row[c].cost_relative_to_valid, 2)} cost)"
                        if c in row else MISSING for c in cases)) for scheme, row in invalid.items()]),
            "Cost relative to verifying a valid signature; below 1x the check is cheaper than a valid one.",
            source_note(results.source("invalid"))]
    return blocks


# --- scheme comparison -------------------------------------------------------------------

def _ratio(value: float | None, reference: float | None) -> float | None:
    return value / reference if value and reference else None


def schemes(results: Results, plot_dir: Path) -> Section:
    rows = list(results.baseline.schemes.values())
    falcon = results.baseline.schemes.get(FALCON)
    ref = falcon or rows[0]
    body = [
        f"Single-core rates per scheme, each with its ratio to {ref.scheme} (above 1x: faster than {ref.scheme}). "
        "Rates come from the `all` table (one method for every scheme); the classical rows from the `classical` "
        "benchmark. NIST levels differ: compare like with like.",
        table(("scheme", "implementation", "NIST", "pk B", "sk B", "sig max B", "sig mean B", "keygen/s", "sign/s",
               "verify/s", f"keygen vs {ref.name}", f"sign vs {ref.name}", f"verify vs {ref.name}", "from"),
              [(r.scheme, r.implementation, f"L{r.nist_level}" if r.nist_level else "classical",
                num(r.public_key_bytes), num(r.secret_key_bytes), num(r.signature_bytes_max),
                num(r.signature_bytes_mean, 1), num(r.keygen_per_s), num(r.sign_per_s), num(r.verify_per_s),
                times(_ratio(r.keygen_per_s, ref.keygen_per_s), 2), times(_ratio(r.sign_per_s, ref.sign_per_s), 2),
                times(_ratio(r.verify_per_s, ref.verify_per_s), 2),
                r.rates_from or MISSING) for r in rows],
              "ll" + "r" * 11 + "l"),
        source_note(results.summary_source, results.source("all"), results.source("classical")),
    ]
    body += _classical(results, ref)
    name = "scheme_rates.png"
    plots.scheme_rates(plot_dir / name, [r.scheme for r in rows],
                       {"keygen/s": [r.keygen_per_s for r in rows], "sign/s": [r.sign_per_s for r in rows],
                        "verify/s": [r.verify_per_s for r in rows]},
                       _caption(results, f"{results.source('all')}, {results.source('classical')}"))
    body.append(image(name, "operations per second by scheme"))
    return Section("Scheme comparison", "\n\n".join(body), (name,))


def _classical(results: Results, ref: Any) -> list[str]:
    schemes = results.baseline.schemes
    pairs = [(n, schemes[fair], schemes[other]) for n, fair, other in CLASSICAL_PAIRS
             if fair in schemes and other in schemes]
    if not pairs:
        return []
    rows = []
    for _, fair, other in pairs:
        for row, label in ((fair, "**fair**: what chains run"), (other, "generic code (the old reports' baseline)")):
            rows.append((row.scheme, label, num(row.keygen_per_s), num(row.sign_per_s), num(row.verify_per_s),
                         num(row.verify_preparsed_per_s), num(row.signature_bytes_mean, 1),
                         times(_ratio(ref.verify_per_s, row.verify_per_s), 2)))
    sentences = []
    for name, fair, other in pairs:
        r_fair, r_other = _ratio(ref.verify_per_s, fair.verify_per_s), _ratio(ref.verify_per_s, other.verify_per_s)
        if r_fair and r_other:
            sentences.append(
                f"- {name}: {ref.name} verifies **{r_fair:.2f}x** as fast as {fair.library} (the fair comparison) "
                f"and {r_other:.2f}x as fast as {other.library}; measuring against {other.library} would overstate "
                f"{ref.name}'s relative speed {r_other / r_fair:.1f}-fold.")
    return ["### Classical baselines, both implementations side by side", table(
        ("implementation", "role", "keygen/s", "sign/s", "verify/s", "verify/s (pre-parsed key)", "sig mean B",
         f"{ref.name} verify / this"), rows, "ll" + "r" * 6),
        "\n".join(sentences),
        source_note(results.source("classical"), results.source("all"))]


# --- multicore and pool -------------------------------------------------------------------

def multicore(results: Results, plot_dir: Path) -> Section:
    b = results.baseline
    body, series = [], {}
    cores = results.system.cores if results.system else MISSING
    for op in ("verify", "sign"):
        rows = b.multicore(op)
        if not rows:
            continue
        series[f"{b.multicore_scheme} {op}"] = ([r.threads for r in rows], [r.ops_per_s for r in rows])
        # The 1-minute load average after each row (from the benchmark's own file): how busy
        # the shared machine was, which explains a row that scales badly.
        load = {r["threads"]: (r.get("loadavg_after") or [None])[0]
                for r in results.rows(f"multicore_{op}")}
        body += [f"### {b.multicore_scheme} {op}", table(
            ("threads", f"{op}/s", f"{op}/s per thread", "speedup", "efficiency", "load average after (1 min)"),
            [(r.threads, num(r.ops_per_s), num(r.ops_per_s / r.threads), times(r.speedup, 2), percent(r.efficiency, 0),
              num(load.get(r.threads), 2)) for r in rows]),
            source_note(results.source(f"multicore_{op}"))]
    if not series:
        return Section("Multicore scaling", "No multicore results in this run.")
    notes = [f"All threads start together after a barrier; the clock starts after it. Speedup = rate at N "
             f"threads / rate at 1 thread; efficiency = speedup / N. This machine has {cores} cores online: "
             "rows beyond that measure time slicing, not scaling."]
    one = b.multicore("verify")[:1]
    if one and b.multicore_scheme in b.single_core:
        median = b.single_core[b.multicore_scheme].ops_per_s
        gap = _apart(one[0].ops_per_s, median)
        if abs(gap) > AGREEMENT_TOLERANCE:
            notes.append(f"**Caution:** the 1-thread row ({one[0].ops_per_s:,.0f}/s) is {gap:+.0%} off the "
                         f"statistical median ({median:,.0f}/s): the machine was busier or quieter during one of them, "
                         "so speedups above 1 per thread (efficiency > 100%) here say more about that noise than "
                         "about caches.")
    name = "multicore.png"
    plots.multicore(plot_dir / name, series, _caption(results, f"{results.source('multicore_verify')}, "
                                                               f"{results.source('multicore_sign')}"))
    body = notes + body + [image(name, "multicore scaling")] + _pool(results)
    return Section("Multicore scaling", "\n\n".join(body), (name,))


def _pool(results: Results) -> list[str]:
    from qmemo.analysis.memo import BLOCK_INTERVAL_S

    pool = results.baseline.summary.pool
    if not pool:
        return []
    rows = [(name, mode.workers, num(mode.ops_per_s), num(mode.block_ms_median, 1),
             percent(mode.block_ms_median / 1e3 / BLOCK_INTERVAL_S),
             num(mode.latency_us_p50 / 1e3, 2), num(mode.latency_us_p99 / 1e3, 2))
            for name, mode in (("sequential", pool.sequential), ("pool", pool.pool))]
    return ["### Thread pool vs sequential", table(
        ("mode", "workers", "verify/s", "block time ms (median)", f"share of a {BLOCK_INTERVAL_S:g} s block interval",
         "task latency p50 ms", "task latency p99 ms"), rows, "lrrrrrr"),
        f"Blocks of {pool.tasks_per_block:,} verification tasks arrive at once ({pool.blocks} timed blocks per "
        f"mode); a task's latency runs from the block's arrival to its completion, queueing included. "
        f"Pool speedup: **{pool.speedup:.2f}x**.",
        source_note(results.source("pool"))]


# --- signature sizes ------------------------------------------------------------------------

def signature_sizes(results: Results, plot_dir: Path) -> Section:
    sizes = results.baseline.summary.signature_sizes
    if not sizes:
        return Section("Signature sizes", "No signature-size results in this run.")
    rows = [(scheme, num(s.signatures), num(s.mean, 1), num(s.stdev, 2), num(s.min), num(s.p99),
             num(s.max), num(s.signature_bytes_max), percent(s.max / s.signature_bytes_max),
             "yes" if s.fixed_length else "no") for scheme, s in sizes.items()]
    histograms = {r["scheme"]: {int(length): int(count) for length, count in r.get("histogram", [])}
                  for r in results.rows("sizes")}
    name = "signature_sizes.png"
    plots.signature_sizes(plot_dir / name, histograms, {k: s.signature_bytes_max for k, s in sizes.items()},
                          _caption(results, results.source("sizes")))
    return Section("Signature sizes", "\n\n".join([
        "Lengths of signatures over fresh random messages, against the maximum the library declares "
        "(`length_signature`). Unpadded Falcon compresses its signatures, so their length varies; a block "
        "format must reserve the maximum, while storage grows by the mean. The padded variants are fixed-length.",
        table(("scheme", "signatures", "mean B", "stdev B", "min B", "P99 B", "max B", "declared max B",
               "max / declared", "fixed length"), rows),
        source_note(results.summary_source, results.source("sizes")),
        image(name, "signature length distribution"),
    ]), (name,))
