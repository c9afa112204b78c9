"""Report sections that hold measured figures against MEMO: headroom, hardware
sensitivity, on-chain footprint, and the devnet end to end.

The arithmetic lives in the pure models (`headroom`, `footprint`), tested against
hand-computed cases; this module picks their inputs from the result files, lays the
outputs out as tables and plots, and says where each input came from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from qmemo.analysis import plots
from qmemo.analysis.devnet import DevnetRun
from qmemo.analysis.headline import SATURATED, Headline, c_reference
from qmemo.analysis.footprint import (
    ANNUAL_TX_COUNTS,
    BANDWIDTHS_MBPS,
    REGISTRY_ACCOUNTS,
    chain_growth_bytes,
    footprints,
    propagation_time_s,
)
from qmemo.analysis.headroom import (
    COMFORT_HEADROOM,
    Capacity,
    HeadroomRow,
    Scenario,
    cores_needed,
    headroom,
    headroom_table,
    memo_scenarios,
    projected_verify_rate,
)
from qmemo.analysis.markdown import (
    Section,
    headroom_x,
    image,
    num,
    percent,
    seconds,
    si_bytes,
    source_note,
    table,
    times,
)
from qmemo.analysis.memo import (
    BLOCK_INTERVAL_S,
    CONSERVATIVE_SHARDS,
    CONSERVATIVE_TPS,
    CROSS_SHARD_SHARE,
    TARGET_SHARDS,
    TARGET_TPS,
    TX_BODY_BYTES,
    TX_PER_BLOCK,
)
from qmemo.analysis.results import FALCON, Results, capacities, display_path, scheme_sizes
from qmemo.load.summary_view import door_refused_cell, past_saturation

PROJECTION_CLOCKS_GHZ = (2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0)  # a spread of server clocks to project to
# The loads the projection table is read against: MEMO's two sharded scenarios at its own
# 20% cross-shard assumption, and the whole target load on one shard.
PROJECTION_SCENARIOS = (
    Scenario("conservative, 20% cross-shard", CONSERVATIVE_TPS, CONSERVATIVE_SHARDS, CROSS_SHARD_SHARE),
    Scenario("target, 20% cross-shard", TARGET_TPS, TARGET_SHARDS, CROSS_SHARD_SHARE),
    Scenario("single shard, target load", TARGET_TPS, 1, 0.0),
)


def caption(results: Results | None) -> str:
    """The plots' machine line: the C baseline describes the machine, and without one the
    caption says it is not described."""
    return results.machine_caption() if results is not None else "machine not described (no C baseline)"


def scenario_label(s: Scenario) -> str:
    return f"{s.name}, {s.cross_shard_share:.0%} cross-shard" if s.shards > 1 else s.name


def devnet_capacities(headlines: Sequence[Headline]) -> list[Capacity]:
    """Each run's headline rate as a node's end-to-end verify rate (every node verifies
    every committed transaction, along with everything else a node does), cited to the row
    it was read from. A run that did not saturate gives a lower bound, which draws no verdict."""
    return [Capacity(f"devnet {line.run_id}, node end to end" + ("" if line.is_capacity else " (lower bound)"),
                     float(line.committed_tps.value), display_path(line.committed_tps.source),
                     key=line.committed_tps.pointer, lower_bound=not line.is_capacity)
            for line in headlines if float(line.committed_tps.value) > 0]


def c_capacities(results: Results) -> list[Capacity]:
    """The C capacities, each named with its verifier: liboqs's single core and all cores
    (constant-time hash-to-point), and the fast verifier's single core with its key cached
    (variable-time; the verifier devnet nodes run by default) where the baseline measured it."""
    caps = [replace(c, label=f"{c.label}, liboqs (constant-time)") for c in capacities(results, FALCON)]
    fast = c_reference(results.baseline, FALCON, "fast")
    if fast is not None:
        caps.insert(1, Capacity("single core, fast verifier (variable-time, key cached)",
                                float(fast.verify_per_s.value), results.summary_source,
                                key=fast.verify_per_s.pointer))
    return caps


def headroom_cell(row: HeadroomRow) -> str:
    """A headroom with its verdict, or "≥...x (lower bound)" with none."""
    if row.capacity.lower_bound:
        return f"≥{headroom_x(row.headroom)} (lower bound)"
    return f"{headroom_x(row.headroom)} {row.verdict}"


def _source_cell(capacity: Capacity) -> str:
    return f"`{capacity.source}`" + (f" `{capacity.key}`" if capacity.key else "")


# --- headroom ------------------------------------------------------------------------------

def headroom_section(results: Results, plot_dir: Path, headlines: Sequence[Headline] = ()) -> Section:
    caps = c_capacities(results) + devnet_capacities(headlines)
    scenarios = memo_scenarios()
    rows = headroom_table(scenarios, caps)
    per_core = caps[0].verify_rate
    by_scenario = [rows[i:i + len(caps)] for i in range(0, len(rows), len(caps))]
    table_rows = []
    for scenario, cells in zip(scenarios, by_scenario):
        needed = cells[0].required_verify_rate
        table_rows.append((scenario_label(scenario), num(scenario.tps), scenario.shards,
                           percent(scenario.cross_shard_share, 0), num(needed, 1), *(headroom_cell(c) for c in cells),
                           cores_needed(needed, per_core)))
    verdicts = [_verdict(scenario, cells, per_core) for scenario, cells in zip(scenarios, by_scenario)
                if scenario.cross_shard_share in (0.0, CROSS_SHARD_SHARE)]
    name = "headroom.png"
    drawn = [c for c in caps if not c.lower_bound]
    plots.headroom_bars(plot_dir / name, [scenario_label(s) for s in scenarios],
                        {c.label: [r.headroom for r in rows if r.capacity == c] for c in drawn}, COMFORT_HEADROOM,
                        f"{results.machine_caption()} - " + ", ".join(dict.fromkeys(c.source for c in drawn)))
    body = [
        "A shard's nodes verify every transaction routed to it; a cross-shard transaction is verified by both "
        "shards it touches. Needed per shard = TPS / shards x (1 + cross-shard share); headroom = verify rate / "
        f"needed. Verdict: **meets** at >= {COMFORT_HEADROOM:g}x (verification takes at most half the capacity), "
        "**tight** from 1x, **short** below 1x. One shard has no cross-shard traffic. Each C rate names its "
        "verifier: liboqs's Falcon verify hashes to the lattice point in constant time, the fast verifier in "
        "variable time (a public transaction allows it). A devnet run's rate is its headline (\"The answer\"): "
        "a capacity when the sweep saturated, else a **lower bound**, marked ≥, from which no verdict is drawn "
        "and which the plot leaves out.",
        table(("capacity", "verify/s", "source"), [(c.label, num(c.verify_rate), _source_cell(c)) for c in caps],
              "lrl"),
        table(("scenario", "TPS", "shards", "cross-shard", "needed/s per shard", *(c.label for c in caps),
               "cores needed at 1-core liboqs rate"), table_rows, "lrrrr" + "l" * len(caps) + "r"),
        source_note(*(c.source for c in caps)),
        "**Verdicts** (MEMO's scenarios without and with its 20% cross-shard assumption):\n" + "\n".join(verdicts),
        image(name, "headroom per scenario"),
    ]
    if not headlines:
        body.append("No devnet run was given, so there is no end-to-end node rate here: "
                    "`qmemo report --devnet <run folder>` adds it.")
    return Section("Headroom against MEMO", "\n\n".join(body), (name,))


def _verdict(scenario: Scenario, cells: Sequence[HeadroomRow], per_core: float) -> str:
    """One scenario's verdicts in words, each C rate with its verifier named."""
    single = cells[0]
    fast = next((c for c in cells if c.capacity.label.startswith("single core, fast")), None)
    multi = next((c for c in cells if "cores (measured)" in c.capacity.label), None)
    return (f"- **{scenario_label(scenario)}**: needs {single.required_verify_rate:,.1f} verifications/s per "
            f"shard; one core gives {headroom_x(single.headroom)} with liboqs's constant-time verify "
            f"(**{single.verdict}**)"
            + (f", {headroom_x(fast.headroom)} with the fast verifier the devnet nodes run, variable-time "
               f"(**{fast.verdict}**)" if fast else "")
            + (f"; {cores_needed(single.required_verify_rate, per_core)} cores at liboqs's rate would be needed"
               if single.verdict == "short" else "")
            + (f"; all measured cores (liboqs) give {headroom_x(multi.headroom)} ({multi.verdict})" if multi else "")
            + ".")


# --- hardware sensitivity ---------------------------------------------------------------------

def hardware_section(results: Results, plot_dir: Path) -> Section:
    single = results.baseline.single_core.get(FALCON)
    tsc_hz = results.system.tsc_hz if results.system else None
    if single is None or not tsc_hz:
        return Section("Hardware sensitivity (projections)",
                       "No TSC ticks per verification in this run: nothing to project from.")
    ticks = single.tsc_ticks_per_op
    implied = tsc_hz / ticks
    rows = [(f"{ghz:.1f} GHz", num(rate), *(headroom_x(headroom(rate, s.required_verify_rate))
                                            for s in PROJECTION_SCENARIOS), "PROJECTION")
            for ghz, rate in ((g, projected_verify_rate(ticks, g * 1e9)) for g in PROJECTION_CLOCKS_GHZ)]
    measured = (f"{tsc_hz / 1e9:.3f} GHz (TSC rate)", num(single.ops_per_s),
                *(headroom_x(headroom(single.ops_per_s, s.required_verify_rate)) for s in PROJECTION_SCENARIOS),
                "**measured** here (statistical median)")
    rows = sorted([*rows, measured], key=lambda r: float(r[0].split()[0]))
    name = "clock_projection.png"
    rates = [projected_verify_rate(ticks, g * 1e9) for g in PROJECTION_CLOCKS_GHZ]
    plots.clock_projection(plot_dir / name, PROJECTION_CLOCKS_GHZ, rates, (tsc_hz / 1e9, single.ops_per_s),
                           {f"needed: {s.name} ({s.required_verify_rate:,.0f}/s)": s.required_verify_rate
                            for s in PROJECTION_SCENARIOS},
                           f"{results.machine_caption()} - {results.source('statistical')}; projected, not measured")
    return Section("Hardware sensitivity (projections)", "\n\n".join([
        f"**These rows are projections, not measurements.** Projected rate = clock / cycles per verification, "
        f"taking the measured median of **{ticks:,.0f} TSC ticks per {FALCON} verification** as cycles. That "
        "assumes the same microarchitecture and liboqs code path ("
        + ("AVX2" if results.system and results.system.avx2 else "portable")
        + "), a compute-bound verification, and a core that ran at the TSC rate while measured. "
        f"Consistency only: {tsc_hz / 1e9:.3f} GHz / {ticks:,.0f} ticks = {implied:,.0f} verifications/s against "
        f"the measured median {single.ops_per_s:,.0f}/s ({implied / single.ops_per_s - 1:+.1%}). An invariant TSC "
        "counts wall time, so this agreement is by construction: it cannot show whether the core really ran "
        "at the TSC rate (turbo or throttling would make TSC ticks differ from core cycles).",
        table(("clock", "verify/s (1 core)", *(f"headroom: {s.name} ({s.required_verify_rate:,.0f}/s)"
                                               for s in PROJECTION_SCENARIOS), "basis"), rows, "lrrrrl"),
        source_note(results.source("statistical"), results.summary_source),
        image(name, "projected verify rate against clock"),
    ]), (name,))


# --- on-chain footprint -----------------------------------------------------------------------

def footprint_section(results: Results, plot_dir: Path) -> Section:
    fps = footprints(scheme_sizes(results))
    if not fps:
        return Section("On-chain footprint", "No signature sizes in this run.")
    falcon = next((f for f in fps if f.sizes.scheme == FALCON), fps[0])
    sources = sorted({f.sizes.source for f in fps})
    per_tx = [(f.sizes.scheme, num(f.sizes.public_key_bytes), num(f.sizes.signature_mean_bytes, 1),
               num(f.sizes.signature_max_bytes) + (" (declared)" if f.sizes.max_is_declared else ""),
               num(f.auth_mean_bytes, 1), num(f.auth_max_bytes), num(f.tx_mean_bytes, 1), percent(f.auth_share, 0),
               si_bytes(f.block_mean_bytes), si_bytes(f.block_max_bytes),
               times(f.block_mean_bytes / falcon.block_mean_bytes, 2)) for f in fps]
    growth = [(f.sizes.scheme, *(si_bytes(chain_growth_bytes(n, f.tx_mean_bytes)) for n in ANNUAL_TX_COUNTS))
              for f in fps]
    propagation = [(f.sizes.scheme, si_bytes(f.block_mean_bytes),
                    *(f"{seconds(propagation_time_s(f.block_mean_bytes, m))} / "
                      f"{seconds(propagation_time_s(f.block_max_bytes, m))}" for m in BANDWIDTHS_MBPS))
                   for f in fps]
    largest = ANNUAL_TX_COUNTS[-1]
    registered = [(f.sizes.scheme, num(f.tx_mean_bytes, 1), num(f.tx_registered_mean_bytes, 1),
                   percent(1 - f.tx_registered_mean_bytes / f.tx_mean_bytes, 0),
                   si_bytes(TX_PER_BLOCK * f.sizes.public_key_bytes),
                   si_bytes(chain_growth_bytes(largest, f.tx_registered_mean_bytes)),
                   si_bytes(REGISTRY_ACCOUNTS * f.sizes.public_key_bytes)) for f in fps]
    name = "block_composition.png"
    plots.block_composition(plot_dir / name, [f.sizes.scheme for f in fps], {
        f"bodies ({TX_BODY_BYTES} B each)": [f.tx_per_block * f.body_bytes for f in fps],
        "signatures (mean)": [f.tx_per_block * f.sizes.signature_mean_bytes for f in fps],
        "public keys": [f.tx_per_block * f.sizes.public_key_bytes for f in fps]},
        TX_PER_BLOCK, f"{results.machine_caption()} - {', '.join(sources)}")
    return Section("On-chain footprint", "\n\n".join([
        f"Every transaction carries a {TX_BODY_BYTES}-byte body (MEMO), its signature and, unless keys are registered, "
        f"the signer's public key; a block holds {TX_PER_BLOCK:,} transactions (MEMO). Signature sizes are measured: "
        "the mean (what storage grows by) and the maximum seen (what a block must reserve); schemes without a "
        "length distribution show their declared maximum. SI units: 1 MB = 10^6 bytes, 1 GB = 10^9 bytes.",
        "### Per transaction and per block",
        table(("scheme", "pk B", "sig mean B", "sig max B", "sig+pk mean B", "sig+pk max B", "tx mean B",
               "auth share of tx", "block (mean)", "block (max)", f"block vs {falcon.sizes.scheme}"), per_tx),
        source_note(*sources),
        image(name, "block composition by scheme"),
        "### Chain growth (mean transaction size, public key in every transaction)",
        table(("scheme", *(f"{n:,} tx" for n in ANNUAL_TX_COUNTS)), growth),
        source_note(*sources),
        f"### Block propagation over one link (mean / max block, {TX_PER_BLOCK:,} transactions)",
        "Serialisation time of one block through one link: no latency, no relay hops, no compression. "
        f"MEMO's block interval is {BLOCK_INTERVAL_S:g} s; a block that takes longer than that to cross one link "
        "cannot keep up.",
        table(("scheme", "block (mean)", *(f"{m} Mbps" for m in BANDWIDTHS_MBPS)), propagation),
        source_note(*sources),
        "### Registering public keys once per account",
        "If each account registers its public key once (the body already names the sender), a transaction carries "
        f"only body + signature. Over N transactions from A accounts the chain saves (N - A) x the public key. "
        f"The registry itself costs one public key per account (shown per {REGISTRY_ACCOUNTS:,} accounts).",
        table(("scheme", "tx with key B", "tx, key registered B", "saving per tx", f"saving per {TX_PER_BLOCK:,}-tx block",
               f"growth at {largest:,} tx, keys registered", f"registry per {REGISTRY_ACCOUNTS:,} accounts"),
              registered),
        source_note(*sources),
    ]), (name,))


# --- devnet ----------------------------------------------------------------------------------

def devnet_section(results: Results | None, plot_dir: Path, runs: Sequence[DevnetRun],
                   headlines: Sequence[Headline] = ()) -> Section:
    if not runs:
        return Section("Devnet end to end", "No devnet run folder was given (`qmemo report --devnet RUN_DIR`); "
                       "see docs/methodology.md for the fields read from its `summary.json`.")
    overview = []
    for run in runs:
        counts = run.counts
        overview.append((run.run_id, num(run.target_tps), num(run.committed_tps, 1), percent(run.committed_share),
                         num(counts.get("committed")), num(counts.get("rejected")), num(counts.get("lost")),
                         "**yes**" if run.saturated else "no",
                         "**yes**" if run.latency_saturated else "no",
                         "**yes**" if run.generator_fell_behind else "no"))
    latency = [(run.run_id, kind.replace("_", " "), *(num(p.get(k), 1) for k in ("p50", "p90", "p95", "p99", "p99_9", "max")))
               for run in runs for kind, p in run.latency_ms.items()]
    body = [
        table(("run", "target TPS", "committed TPS", "committed / target", "committed", "rejected", "lost",
               "throughput saturated", "p99 > 3 block intervals", "generator fell behind"), overview),
        "The generator's verdicts, kept apart. Throughput saturated: the run or a stage of its sweep committed "
        "below 90% of the offered rate while the generator kept to its schedule. p99 > 3 block intervals: "
        "latency (intended -> included) past its bound, on the run the row stands for. Generator fell behind: "
        "the generator, not the chain, limited the rate. A sweep's saturation is the highest stage no verdict "
        "limited, when the stage above was limited by the chain (\"The answer\"); a run nothing limited is a "
        "lower bound.",
        source_note(*(display_path(r.source) for r in runs)),
    ]
    if any(r.generator_fell_behind for r in runs):
        body.append("**Warning:** in a run marked above, the generator fell behind its own schedule: there the "
                    "generator, not the chain, limited the rate.")
    if latency:
        body += ["### Latency percentiles (ms)",
                 "intended -> committed is the honest figure: it counts from when the schedule meant to send, so "
                 "a stalled node cannot hide the wait (no coordinated omission).",
                 table(("run", "latency", "p50", "p90", "p95", "p99", "p99.9", "max"), latency, "ll" + "r" * 6),
                 source_note(*(display_path(r.source) for r in runs))]
    sweeps = {r.run_id: [(p.target_tps, p.committed_tps, p.p50_ms, p.p99_ms) for p in r.sweep] for r in runs if r.sweep}
    # The headline stage of each sweep that saturated, marked on the plot ("The answer").
    saturation = {line.run_id: float(line.offered_tps.value) for line in headlines if line.outcome == SATURATED}
    plot_names: tuple[str, ...] = ()
    if sweeps:
        body += ["### Throughput against latency (sweep)",
                 "Each stage with its verdicts: a sweep runs every stage up to its last rate, and the stage below "
                 "its first limited one is the run's saturation (\"The answer\"). Past it: transactions refused at "
                 "the nodes' doors and never taken (share of those planned), accepted ones lost (none should be), "
                 "whether the nodes' final hashes agree, and their branch switches; p99 is intended -> final of "
                 "those committed.",
                 table(("run", "target TPS", "committed TPS", "p50 ms", "p99 ms", "lost", "refused at the door",
                        "nodes agree", "branch switches", "limited by"),
                       [(r.run_id, num(p.target_tps), num(p.committed_tps, 1), num(p.p50_ms, 1), num(p.p99_ms, 1),
                         num(p.lost), door_refused_cell(p.door_refused, p.door_refused_share),
                         "-" if p.agree is None else "yes" if p.agree else "**NO**", num(p.reorgs),
                         p.why or "-") for r in runs for p in r.sweep]),
                 "\n".join(f"- {r.run_id}: {past_saturation(r.sweep)}" for r in runs if r.sweep),
                 source_note(*(display_path(r.sweep_source or r.source) for r in runs if r.sweep))]
        name = "devnet_throughput_latency.png"
        plots.throughput_latency(plot_dir / name, sweeps,
                                 f"{caption(results)} - "
                                 + ", ".join(display_path(r.sweep_source or r.source) for r in runs if r.sweep),
                                 saturation)
        body.append(image(name, "devnet throughput against latency"))
        plot_names = (name,)
    return Section("Devnet end to end", "\n\n".join(body), plot_names)
