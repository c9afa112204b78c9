"""The report's scenario sections (`qmemo report --scenario DIR`): one per run folder.

Each section shows what the run did and what came of it: a timeline of committed TPS,
p99 latency and each node's blocks not yet final, second by second, with every
perturbation drawn as a labelled vertical line; the perturbations with their times; the
invariants, pass or fail with their detail; the link profiles the nodes were placed on
(and whether netem or the user-space relay made the delays); and, when the run folder
holds one, the block propagation measurement against the report's model.

Laid out from the run folder's own files (qmemo.analysis.scenario_run); computes only
the model line (qmemo.analysis.footprint's serialisation time plus the profile's delay).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qmemo.analysis import plots  # first: it sets matplotlib's backend
from matplotlib.ticker import MaxNLocator  # noqa: E402  (after the backend is chosen)
from qmemo.analysis.footprint import propagation_time_s
from qmemo.analysis.markdown import Section, image, num, source_note, table, times
from qmemo.analysis.results import display_path
from qmemo.analysis.scenario_run import ScenarioRun

BOOKKEEPING_COLOUR = "#7f7f7f"
PROPAGATION_TITLE = "Block propagation per link profile"
LEAD_S = 3.0        # node samples drawn from this long before the load starts
# Healthy nodes draw the very same line; a style each keeps the one underneath visible.
NODE_STYLES = ("-", "--", ":", "-.")


def model_propagation_s(size_bytes: float, profile: dict[str, Any]) -> float:
    """The report's propagation model for one link of a profile: the one-way delay plus the
    serialisation time of the block at the profile's rate (qmemo.analysis.footprint)."""
    return float(profile["delay_ms"]) / 1000.0 + propagation_time_s(size_bytes, float(profile["rate_mbit"]))


def plot_timeline(path: Path, run: ScenarioRun, caption: str) -> Path:
    """Three panels sharing the time axis, perturbations as vertical lines on each."""
    fig, axes = plots.plt.subplots(3, 1, figsize=(11.0, 8.0), dpi=plots.DPI, sharex=True)
    tps_ax, p99_ax, final_ax = axes
    fig.suptitle(f"Scenario {run.name}: throughput, latency and finality over time", fontsize=12, fontweight="bold")
    # Blocks come every block interval: counted per second, commits alternate between a
    # block's worth and nothing, so rates are drawn over one interval.
    window_s = _block_interval_s(run)
    bins = _binned(run.seconds, window_s)
    tps_ax.bar([t for t, _ in bins], [rate for _, rate in bins], width=window_s, align="edge", color="#cfe2f3",
               edgecolor="#9fc5e8", label=f"generator: committed tx/s, per {window_s:g} s")
    for i, (node, samples) in enumerate(sorted(run.nodes.items())):
        samples = tuple(s for s in samples if s.t_s >= -LEAD_S)    # not the minutes of signing before
        for k, segment in enumerate(_node_rate_runs(samples, window_s)):
            # One line per unbroken run of answers: no line is drawn across a pause or an outage.
            tps_ax.plot([r[0] for r in segment], [r[1] for r in segment], color=plots.COLOURS[i % len(plots.COLOURS)],
                        linestyle=NODE_STYLES[i % len(NODE_STYLES)], linewidth=1.2,
                        label=f"{node}: committed tx/s over {window_s:g} s (metrics)" if k == 0 else None)
        lag = [(s.t_s, s.height - s.final_height) for s in samples
               if s.ok and s.height is not None and s.final_height is not None]
        final_ax.step([x for x, _ in lag], [y for _, y in lag], where="post",
                      color=plots.COLOURS[i % len(plots.COLOURS)], linestyle=NODE_STYLES[i % len(NODE_STYLES)],
                      linewidth=1.4, label=node)
    tps_ax.set_ylabel("transactions / s")
    p99 = [(s.t_s + 0.5, s.p99_ms / 1000.0) for s in run.seconds if s.p99_ms is not None]
    p99_ax.plot([x for x, _ in p99], [y for _, y in p99], color=plots.COLOURS[3], marker=".", linewidth=1.0,
                label="p99 intended -> committed (final), by second intended")
    p99_ax.set_ylabel("p99 latency (s)")
    final_ax.set_ylabel("blocks not yet final")
    final_ax.yaxis.set_major_locator(MaxNLocator(integer=True))   # a count of blocks
    final_ax.set_ylim(bottom=0)
    final_ax.set_xlabel("seconds from the load's start")
    for ax in axes:
        ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        ax.grid(True, alpha=0.3)
        for event in run.events:
            ax.axvline(event.t_s, color=BOOKKEEPING_COLOUR, linestyle="--", linewidth=0.9)
    top = tps_ax.get_ylim()[1]
    for k, event in enumerate(run.events):   # labels staggered so neighbouring events stay readable
        tps_ax.text(event.t_s, top * (0.97 - 0.09 * (k % 3)), f" {event.label}", fontsize=7.5, rotation=0,
                    va="top", ha="left", color="#333333",
                    bbox={"facecolor": "white", "alpha": 0.8, "edgecolor": "none", "pad": 1})
    fig.text(0.01, 0.01, caption, fontsize=7.5, color="#444444", ha="left", va="bottom", wrap=True)
    fig.tight_layout(rect=(0, 0.04, 1, 0.97))
    fig.savefig(path, bbox_inches="tight")      # the legends sit outside the panels
    plots.plt.close(fig)
    return path


def _block_interval_s(run: ScenarioRun) -> float:
    """The chain's block interval in whole seconds (at least 1): the rates' window."""
    interval_ms = float(run.manifest.get("chain", {}).get("block_interval_ms", 1000))
    return float(max(1, round(interval_ms / 1000.0)))


def _binned(seconds: tuple[Any, ...], window_s: float) -> list[tuple[float, float]]:
    """The generator's commits per second averaged over bins of `window_s` seconds:
    (bin start, transactions per second)."""
    width = int(window_s)
    totals: dict[int, int] = {}
    for second in seconds:
        start = (second.t_s // width) * width
        totals[start] = totals.get(start, 0) + second.committed
    return [(float(start), total / window_s) for start, total in sorted(totals.items())]


def _node_rate_runs(samples: tuple[Any, ...], window_s: float = 1.0) -> list[list[tuple[float, float]]]:
    """Committed transactions per second from a node's counter, over about `window_s`
    seconds, as one list per unbroken run of answers. A run ends where the node did not
    answer and where its counter fell (a restarted node counts again from its store: a
    drop is not a rate)."""
    runs: list[list[Any]] = []
    for sample in samples:
        if not sample.ok or sample.committed_total is None:
            runs.append([])
            continue
        if not runs or (runs[-1] and (sample.t_s <= runs[-1][-1].t_s
                                      or sample.committed_total < runs[-1][-1].committed_total)):
            runs.append([])
        runs[-1].append(sample)
    # Samples come about once a second, not exactly: a reference up to a quarter second
    # inside the window still counts as a whole window back.
    slack_s = 0.25
    rate_runs = []
    for run in runs:
        rates = []
        for k, sample in enumerate(run):
            earlier = [s for s in run[:k] if s.t_s <= sample.t_s - window_s + slack_s]
            if earlier:
                reference = earlier[-1]
                rates.append((sample.t_s, (sample.committed_total - reference.committed_total) /
                              (sample.t_s - reference.t_s)))
        if rates:
            rate_runs.append(rates)
    return rate_runs


def _node_rates(samples: tuple[Any, ...], window_s: float = 1.0) -> list[tuple[float, float]]:
    """Every rate of `_node_rate_runs`, in one list."""
    return [rate for run in _node_rate_runs(samples, window_s) for rate in run]


def _links(run: ScenarioRun) -> list[str]:
    network, profiles = run.manifest.get("network", {}), run.manifest.get("profiles", {})
    backend = run.verdict.run.get("links", "netem")
    zones = network.get("zones", [])
    pairs = [(a, b, p) for a, b, p in network.get("links", [])]
    used = {network.get("default_profile")} | {p for _, _, p in pairs} | \
        {p.get("profile") for p in run.manifest.get("perturbations", []) if p.get("profile")}
    rows = [(name, num(profiles[name]["delay_ms"], 1), num(profiles[name]["jitter_ms"], 2),
             num(profiles[name]["loss_pct"], 1), num(profiles[name]["rate_mbit"]), profiles[name]["source"])
            for name in sorted(p for p in used if p in profiles)]
    delayed = any(float(profiles[name]["delay_ms"]) > 0 or float(profiles[name]["jitter_ms"]) > 0
                  or float(profiles[name]["loss_pct"]) > 0 for name in used if name in profiles)
    how = ("tc netem on each node's egress" if backend == "netem" else
           "the user-space relay (`--links relay`: this kernel has no netem; no loss, and TCP's reaction to the "
           "long path is not reproduced, so WAN figures are a lower bound)")
    delays = f"Delays made by {how}." if delayed else "No profile adds delay, jitter or loss: only HTB's rate applies."
    placement = ", ".join(f"node-{i}: {z}" for i, z in enumerate(zones)) or "-"
    links = "; ".join(f"{a}-{b}: {p}" for a, b, p in pairs) or "none"
    return [
        "### Links",
        f"Nodes by zone: {placement}. Zone pairs with their own profile: {links}; every other pair: "
        f"`{network.get('default_profile')}`. {delays}",
        table(("profile", "one-way delay ms", "jitter ms", "loss %", "rate Mbit/s", "source"), rows, align="lrrrrl"),
    ]


def _propagation(run: ScenarioRun) -> list[str]:
    found = run.propagation
    if not found:
        return []
    rows = []
    for entry in found["profiles"]:
        profile = entry["profile_facts"]
        model = model_propagation_s(found["block_bytes"], profile)
        # One unit (ms) in every column: "980.0 ms" above "1.42 s" is read as the smaller.
        rows.append((entry["profile"], entry.get("links", "-"), num(profile["delay_ms"], 1),
                     num(entry["median_s"] * 1000.0), f"{num(entry['min_s'] * 1000.0)} - {num(entry['max_s'] * 1000.0)}",
                     num(entry["samples"]), num(model * 1000.0), times(entry["median_s"] / model, 1)))
    return [
        f"### {PROPAGATION_TITLE}",
        f"A full {found['transactions']:,}-transaction {found['scheme']} block ({num(found['block_bytes'])} bytes) "
        "from its producer to each other node, every pair of nodes on the profile. The model is the report's: "
        "one-way delay plus the block's serialisation time at the profile's rate (no storing, no decoding, "
        "no validation, no relay hops).",
        table(("profile", "delays by", "one-way delay ms", "measured median ms", "min - max ms", "samples",
               "model ms", "measured / model"), rows, align="llrrrrrr"),
        found.get("note", ""),
        source_note(display_path(run.source / "propagation.json")),
    ]


def scenario_section(run: ScenarioRun, plot_dir: Path) -> Section:
    """The section for one run folder (its plot drawn into `plot_dir`)."""
    verdict, load = run.verdict, run.manifest.get("load", {})
    if verdict is None:
        return Section(PROPAGATION_TITLE, "\n\n".join(_propagation(run)[1:]))
    source = display_path(run.source)
    parts = [
        f"{run.manifest.get('description', '')}. Run folder `{source}`; "
        f"{'every invariant holds' if verdict.passed else '**invariants failed**'}.",
        f"Load: {num(load.get('tps'))} TPS for {num(load.get('duration_s'))} s "
        f"({load.get('targeting', '-')} over nodes {load.get('target_nodes', '-')}), "
        f"{run.manifest.get('network', {}).get('nodes', '-')} nodes.",
    ]
    plotted: tuple[str, ...] = ()
    if run.seconds:
        name = f"scenario_{run.name}_timeline.png"
        plot_timeline(plot_dir / name, run, f"qmemo scenario run {run.name} - {source}")
        parts.append(image(name, f"scenario {run.name}: throughput, latency and finality over time"))
        plotted = (name,)
    parts += ["### Perturbations",
              table(("t (s)", "what"), [(num(e.t_s, 1), e.label) for e in run.events], align="rl") if run.events else "None.",
              "### Invariants",
              table(("invariant", "holds", "detail"),
                    [(r.name, "yes" if r.passed else "**no**", r.detail) for r in verdict.results], align="lll"),
              source_note(f"{source}/invariants.json", f"{source}/timeline.jsonl", f"{source}/gen/transactions.csv",
                          f"{source}/metrics/")]
    parts += _links(run)
    parts += _propagation(run)
    return Section(f"Scenario {run.name}", "\n\n".join(parts), plotted)
