"""The report's figures: one function per plot, data in, a PNG out.

Each figure has a title, labelled axes with units, a legend when more than one series
is drawn, and a caption naming the machine and the result file it came from, so a plot
copied out of the report still says where it was measured. matplotlib runs on the Agg
backend (headless: no display on build machines and CI) and is imported only here.

These functions draw what they are given; they compute nothing a table does not show.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot: no display needed, identical output everywhere

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

from qmemo.analysis.markdown import headroom_x  # noqa: E402

DPI = 110
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")
_thousands = FuncFormatter(lambda v, _pos: f"{v:,.0f}")


def _figure(title: str, size: tuple[float, float] = (8.0, 4.8)) -> tuple[Figure, plt.Axes]:
    fig, ax = plt.subplots(figsize=size, dpi=DPI)
    ax.set_title(title, fontsize=12, fontweight="bold")
    ax.grid(True, alpha=0.3)
    return fig, ax


def _group_positions(groups: int, series: int, index: int) -> tuple[list[float], float]:
    """Bar positions of series `index` among `series` bars side by side per group, and the bar width."""
    width = 0.8 / max(1, series)
    return [g + (index - (series - 1) / 2) * width for g in range(groups)], width


def _save(fig: Figure, path: Path, caption: str) -> Path:
    fig.text(0.01, 0.01, caption, fontsize=7.5, color="#444444", ha="left", va="bottom", wrap=True)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(path)
    plt.close(fig)
    return path


def verify_distribution(path: Path, stats: Mapping[str, float], scheme: str, caption: str) -> Path:
    """The per-trial verify-rate distribution drawn from its summary statistics (bench_c
    writes percentiles, not samples): a box from P25 to P75 with the median, whiskers
    from P5 to P95, and P1, P99, min, max and mean marked."""
    fig, ax = _figure(f"{scheme}: verifications per second per trial", size=(8.0, 3.6))
    box = {"med": stats["median"], "q1": stats["p25"], "q3": stats["p75"], "whislo": stats["p5"],
           "whishi": stats["p95"], "mean": stats["mean"], "fliers": [], "label": ""}
    ax.bxp([box], orientation="horizontal", showmeans=True, widths=0.5, patch_artist=True,
           boxprops={"facecolor": "#cfe2f3"}, medianprops={"color": COLOURS[3], "linewidth": 2},
           meanprops={"marker": "D", "markerfacecolor": COLOURS[2], "markeredgecolor": COLOURS[2]})
    for key, marker, colour in (("min", "<", "#555555"), ("p1", "|", COLOURS[1]), ("p99", "|", COLOURS[1]),
                                ("max", ">", "#555555")):
        ax.plot([stats[key]], [1], marker=marker, color=colour, markersize=12, linestyle="none")
    handles = [
        plt.Line2D([], [], color=COLOURS[3], linewidth=2, label=f"median {stats['median']:,.0f}"),
        plt.Rectangle((0, 0), 1, 1, facecolor="#cfe2f3", edgecolor="black",
                      label=f"P25-P75 (IQR {stats['iqr']:,.0f})"),
        plt.Line2D([], [], color="black", label="whiskers: P5-P95"),
        plt.Line2D([], [], marker="D", color=COLOURS[2], linestyle="none", label=f"mean {stats['mean']:,.0f}"),
        plt.Line2D([], [], marker="|", color=COLOURS[1], linestyle="none", markersize=12, label="P1, P99"),
        plt.Line2D([], [], marker="<", color="#555555", linestyle="none", label="min, max"),
    ]
    ax.set_yticks([])
    ax.set_xlabel(f"verifications per second (one trial = one timed batch; n = {int(stats['n']):,} trials)")
    ax.xaxis.set_major_formatter(_thousands)
    ax.legend(handles=handles, fontsize=7.5, loc="upper left", ncols=2)
    ax.set_ylim(0.4, 1.9)
    return _save(fig, path, caption)


def scheme_rates(path: Path, schemes: Sequence[str], rates: Mapping[str, Sequence[float | None]],
                 caption: str) -> Path:
    """Grouped bars, log scale: keygen/sign/verify per second for each scheme."""
    fig, ax = _figure("Operations per second by scheme (single core, log scale)", size=(9.5, 5.0))
    for i, (operation, values) in enumerate(rates.items()):
        xs, width = _group_positions(len(schemes), len(rates), i)
        ax.bar(xs, [v or 0 for v in values], width, label=operation, color=COLOURS[i % len(COLOURS)])
    ax.set_yscale("log")
    top = max((v for values in rates.values() for v in values if v), default=1)
    ax.set_ylim(top=top * 12)  # room above the bars for the legend
    ax.set_xticks(range(len(schemes)), schemes, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("operations per second (log)")
    ax.legend(fontsize=8, loc="upper center", ncols=len(rates))
    return _save(fig, path, caption)


def multicore(path: Path, series: Mapping[str, tuple[Sequence[int], Sequence[float]]], caption: str) -> Path:
    """Throughput against threads per operation, with the ideal linear scaling for reference."""
    fig, ax = _figure("Multicore scaling")
    for i, (label, (threads, rates)) in enumerate(series.items()):
        colour = COLOURS[i % len(COLOURS)]
        ax.plot(threads, rates, "o-", color=colour, label=f"{label} (measured)")
        if threads and rates:
            ax.plot(threads, [rates[0] * t / threads[0] for t in threads], "--", color=colour, alpha=0.5,
                    label=f"{label} (linear from {threads[0]} thread{'s' if threads[0] > 1 else ''})")
    ax.set_xlabel("threads")
    ax.set_ylabel("operations per second")
    ax.yaxis.set_major_formatter(_thousands)
    all_threads = sorted({t for threads, _ in series.values() for t in threads})
    ax.set_xticks(all_threads)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    return _save(fig, path, caption)


def signature_sizes(path: Path, histograms: Mapping[str, Mapping[int, int]],
                    declared_max: Mapping[str, int], caption: str) -> Path:
    """One panel per variant: how many signatures had each length, with the declared maximum."""
    n = max(1, len(histograms))
    fig, axes = plt.subplots(1, n, figsize=(3.6 * n, 4.2), dpi=DPI, squeeze=False)
    fig.suptitle("Signature length distribution per Falcon variant", fontsize=12, fontweight="bold")
    for i, (ax, (scheme, counts)) in enumerate(zip(axes[0], histograms.items())):
        lengths = sorted(counts)
        ax.bar(lengths, [counts[k] for k in lengths], width=1.0, color=COLOURS[i % len(COLOURS)],
               label="signatures")
        if scheme in declared_max:
            ax.axvline(declared_max[scheme], color=COLOURS[3], linestyle="--",
                       label=f"declared max {declared_max[scheme]:,} B")
        # Show the declared maximum and a margin either side, so a fixed-length variant's
        # single bar and an unpadded variant's spread read on the same kind of axis.
        high = max(lengths[-1], declared_max.get(scheme, lengths[-1]))
        pad = max(5, (high - lengths[0]) * 0.08)
        ax.set_xlim(lengths[0] - pad, high + pad)
        ax.ticklabel_format(axis="x", useOffset=False, style="plain")
        ax.set_title(scheme, fontsize=10)
        ax.set_xlabel("signature length (bytes)")
        ax.set_ylabel("signatures" if i == 0 else "")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    return _save(fig, path, caption)


def headroom_bars(path: Path, labels: Sequence[str], series: Mapping[str, Sequence[float]],
                  comfort: float, caption: str) -> Path:
    """Headroom per scenario (log scale) for each capacity, with the 1x and comfort lines.
    Only capacities go in: a lower bound draws no verdict, so it has no bar here."""
    fig, ax = _figure("Headroom against MEMO's per-shard verification requirement", size=(12.0, 5.6))
    for i, (capacity, values) in enumerate(series.items()):
        ys, width = _group_positions(len(labels), len(series), i)
        bars = ax.barh(ys, values, width, label=capacity, color=COLOURS[i % len(COLOURS)])
        ax.bar_label(bars, labels=[headroom_x(v) for v in values], fontsize=7, padding=2)
    ax.axvline(1.0, color="black", linewidth=1.2, label="1x: verification alone fills the capacity")
    ax.axvline(comfort, color=COLOURS[3], linestyle="--", label=f"{comfort:g}x: verification takes half")
    ax.set_xscale("log")
    # Ticks as the table prints headrooms (0.1x, 1x, 10x), not as powers of ten.
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}x"))
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(right=max(v for values in series.values() for v in values) * 3)  # room for the labels
    ax.set_xlabel("headroom = verify rate / required verifications per second per shard (log)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))     # beside the bars, never over them
    return _save(fig, path, caption)


def clock_projection(path: Path, clocks_ghz: Sequence[float], rates: Sequence[float],
                     measured: tuple[float, float] | None, requirements: Mapping[str, float],
                     caption: str) -> Path:
    """PROJECTED single-core verify rate against clock rate, with MEMO's requirements."""
    fig, ax = _figure("PROJECTION: single-core verify rate at other clock rates")
    ax.plot(clocks_ghz, rates, "o--", color=COLOURS[0], label="projected (measured cycles per verify)")
    if measured:
        ax.plot([measured[0]], [measured[1]], "s", color=COLOURS[2], markersize=9, label="measured here")
    styles = ((COLOURS[3], ":"), (COLOURS[4], "--"), ("black", "-."), (COLOURS[1], ":"))
    for (label, rate), (colour, style) in zip(requirements.items(), styles):
        ax.axhline(rate, color=colour, linestyle=style, label=label)
    ax.set_xlabel("core clock (GHz)")
    ax.set_ylabel("verifications per second (log)")
    ax.set_yscale("log")  # MEMO's requirements span 200 to 50,000 per second
    ax.yaxis.set_major_formatter(_thousands)
    ax.legend(fontsize=8, loc="center right")
    return _save(fig, path, caption)


def block_composition(path: Path, schemes: Sequence[str], parts: Mapping[str, Sequence[float]],
                      tx_per_block: int, caption: str) -> Path:
    """Stacked horizontal bars: a block's bytes split into bodies, signatures and public keys."""
    fig, ax = _figure(f"Size of a {tx_per_block:,}-transaction block by scheme (mean signature)", size=(9.0, 6.0))
    lefts = [0.0] * len(schemes)
    for i, (part, values) in enumerate(parts.items()):
        megabytes = [v / 1e6 for v in values]
        ax.barh(schemes, megabytes, left=lefts, label=part, color=COLOURS[i % len(COLOURS)])
        lefts = [left + m for left, m in zip(lefts, megabytes)]
    for y, total in enumerate(lefts):
        ax.text(total, y, f" {total:,.1f} MB", va="center", fontsize=7)
    ax.set_xlim(right=max(lefts) * 1.15)
    ax.invert_yaxis()
    ax.tick_params(axis="y", labelsize=8)
    ax.set_xlabel("block size (MB, 10^6 bytes)")
    ax.legend(fontsize=8, loc="lower right")
    return _save(fig, path, caption)


def _offered_range(ax: plt.Axes, offered: Sequence[float]) -> None:
    """The x axis over the offered rates measured (with a margin), not from 0: a sweep from
    3,000 to 9,000 TPS would otherwise sit in the right half of its plot."""
    if not offered:
        return
    low, high = min(offered), max(offered)
    margin = max((high - low) * 0.08, high * 0.05)
    ax.set_xlim(max(0.0, low - margin), high + margin)


def throughput_latency(path: Path, runs: Mapping[str, Sequence[tuple[float, float, float | None, float | None]]],
                       caption: str, saturation: Mapping[str, float] | None = None) -> Path:
    """Devnet sweep, two panels sharing the offered load: committed TPS (top) and the
    intended->committed latency percentiles (bottom). Points: (target, committed, p50_ms, p99_ms).
    `saturation`: per run, the offered rate of its headline stage (qmemo.analysis.headline),
    marked on both panels."""
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8.0, 6.4), dpi=DPI, sharex=True)
    fig.suptitle("Devnet: committed throughput and latency against offered load", fontsize=12, fontweight="bold")
    offered_all = [p[0] for points in runs.values() for p in points]
    highest = max(offered_all, default=1)
    lowest = min(offered_all, default=0)
    top.plot([lowest, highest], [lowest, highest], color="grey", linewidth=0.8, label="committed = offered")
    for i, (label, points) in enumerate(runs.items()):
        colour = COLOURS[i % len(COLOURS)]
        offered = [p[0] for p in points]
        top.plot(offered, [p[1] for p in points], "o-", color=colour, label=f"{label}: committed")
        for j, (name, style) in enumerate((("p50", ":"), ("p99", "--")), start=2):
            latency = [p[j] if p[j] is not None else float("nan") for p in points]
            bottom.plot(offered, latency, style, marker="x", color=colour, label=f"{label}: {name}")
        if saturation and label in saturation:
            for ax in (top, bottom):
                ax.axvline(saturation[label], color=colour, linestyle="-.", linewidth=1.0, alpha=0.8)
            top.annotate(f"saturation: the highest stage\nno verdict limited ({saturation[label]:,.0f} offered)",
                         (saturation[label], 0), xytext=(4, 6), textcoords="offset points", fontsize=7,
                         color=colour)
    top.set_ylabel("committed TPS")
    bottom.set_ylabel("intended -> committed latency (ms)")
    bottom.set_xlabel("offered load (target TPS)")
    _offered_range(bottom, offered_all)
    for ax in (top, bottom):
        ax.grid(True, alpha=0.3)
        ax.xaxis.set_major_formatter(_thousands)
        ax.yaxis.set_major_formatter(_thousands)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8, loc="upper left")
    return _save(fig, path, caption)


def _stacked_bars(ax: plt.Axes, labels: Sequence[str], parts: Mapping[str, Sequence[float]],
                  room: float) -> None:
    """Horizontal bars of `parts` stacked per label, each with its total in µs; the last part
    ("other") light grey when the palette runs out; `room` x the longest bar on the axis."""
    lefts = [0.0] * len(labels)
    names = list(parts)
    for i, name in enumerate(names):
        colour = "#cccccc" if i == len(names) - 1 and len(names) > len(COLOURS) else COLOURS[i % len(COLOURS)]
        ax.barh(labels, parts[name], left=lefts, label=name, color=colour)
        lefts = [left + value for left, value in zip(lefts, parts[name])]
    for y, total in enumerate(lefts):
        ax.text(total, y, f" {total:,.1f} µs", va="center", fontsize=7)
    ax.set_xlim(right=max(lefts, default=1.0) * room or 1.0)
    ax.invert_yaxis()
    ax.tick_params(axis="y", labelsize=8)


def stage_costs(path: Path, labels: Sequence[str], parts: Mapping[str, Sequence[float]], caption: str) -> Path:
    """Stacked horizontal bars: CPU µs per transaction split by stage, one bar per label
    (a scheme's node, its C verify cost); the last part ("other") in light grey."""
    fig, ax = _figure("CPU per transaction by stage, against the C verify cost",
                      size=(9.0, 1.6 + 0.55 * len(labels)))
    _stacked_bars(ax, labels, parts, 1.5)     # room on the right for the legend
    ax.set_xlabel("CPU per admitted transaction (µs)")
    ax.legend(fontsize=7, loc="lower right", ncols=3)
    return _save(fig, path, caption)


# Stage kinds on the headline plot (qmemo.analysis.report_headline): one marker each.
HELD, HEADLINE, LIMITED = "held", "headline", "limited"


def headline(path: Path, curves: Mapping[str, Sequence[tuple[float, float | None, str]]],
             bar_labels: Sequence[str], bar_parts: Mapping[str, Sequence[float]], caption: str) -> Path:
    """The report's first plot, two panels: p99 intended->final against committed TPS by
    stage (points: committed, p99_ms, kind), the headline stage starred and the stage that
    limited it crossed; and CPU per transaction at the headline stage by stage against the
    C verify cost of the nodes' verifier (the stacked bars of `stage_costs`)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(12.0, 4.6), dpi=DPI,
                                      gridspec_kw={"width_ratios": [1.0, 1.15]})
    fig.suptitle("Where the devnet saturates, and what a transaction costs there", fontsize=12, fontweight="bold")
    for i, (label, points) in enumerate(curves.items()):
        colour = COLOURS[i % len(COLOURS)]
        drawn = [(c, p99 / 1e3, kind) for c, p99, kind in points if p99 is not None]
        left.plot([c for c, _, _ in drawn], [s for _, s, _ in drawn], "-", color=colour, alpha=0.6, label=label)
        for committed, p99_s, kind in drawn:
            style = {HELD: ("o", 6), HEADLINE: ("*", 16), LIMITED: ("X", 10)}[kind]
            left.plot([committed], [p99_s], style[0], markersize=style[1], color=COLOURS[3] if kind == LIMITED else colour,
                      markeredgecolor="black", markeredgewidth=0.6)
            if kind == HEADLINE:
                left.annotate(f"{committed:,.0f} TPS", (committed, p99_s), xytext=(8, 8), textcoords="offset points",
                              fontsize=8, fontweight="bold", ha="left")
    left.plot([], [], "*", markersize=12, color="grey", markeredgecolor="black", label="headline stage")
    left.plot([], [], "X", markersize=9, color=COLOURS[3], markeredgecolor="black", label="limited stage")
    _offered_range(left, [c for points in curves.values() for c, _, _ in points])   # room for the markers
    left.set_title("p99 intended -> final by sweep stage", fontsize=10)
    left.set_xlabel("committed TPS")
    left.set_ylabel("p99 intended -> final (s)")
    left.xaxis.set_major_formatter(_thousands)
    highest = max((p99 for points in curves.values() for _, p99, _ in points if p99 is not None), default=1e3)
    left.set_ylim(0, highest / 1e3 * 1.25)      # room above the highest mark for its label
    left.grid(True, alpha=0.3)
    left.legend(fontsize=7, loc="upper left")
    if bar_labels:
        _stacked_bars(right, bar_labels, bar_parts, 1.45)
        right.tick_params(axis="y", labelsize=7)
        right.legend(fontsize=6.5, loc="lower right", ncols=3)
    else:
        right.text(0.5, 0.5, "no stage costs recorded\n(node-stages.json)", ha="center", va="center",
                   transform=right.transAxes, fontsize=9, color="#555555")
        right.set_yticks([])
    right.set_title("CPU per transaction at the headline stage, against one C verify", fontsize=10)
    right.set_xlabel("CPU µs per admitted transaction (all nodes pooled)")
    right.grid(True, alpha=0.3)
    return _save(fig, path, caption)
