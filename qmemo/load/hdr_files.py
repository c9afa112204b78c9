"""A run's latency histograms as files, the way wrk2 and HdrHistogram users read them.

For each latency kind of a run (latency.LATENCY_FILES) the run folder keeps two files:

    latency-<kind>.hgrm   the percentile spectrum in milliseconds, in the text format of
                          HdrHistogram's outputPercentileDistribution (what `wrk2 --latency
                          -U` prints and HdrHistogram's plotter at
                          hdrhistogram.github.io/HdrHistogram/plotFiles.html draws);
    latency-<kind>.hlog   the histogram itself, encoded (compressed, base64) in
                          HdrHistogram's interval log format (version 1.2): one interval,
                          the measured window, in microseconds. HistogramLogReader (Java,
                          Python, Go, ...) decodes it for merging runs or other percentiles.

The summary in summary.json holds a few percentiles; these files keep the whole
distribution, so nothing has to be re-measured to ask another question of a run. This
module only writes what summarize() recorded: it never measures.
"""

from __future__ import annotations

from io import StringIO
from pathlib import Path

from hdrh.histogram import HdrHistogram

from qmemo.load.latency import RunSummary

US_PER_MS = 1000.0           # histograms are recorded in microseconds, spectra are read in ms
TICKS_PER_HALF_DISTANCE = 5  # HdrHistogram's and wrk2's default resolution of the spectrum
LOG_FORMAT_VERSION = "1.2"   # the interval log format hdrh's HistogramLogReader reads


def hgrm_path(folder: Path, kind: str) -> Path:
    return folder / f"latency-{kind}.hgrm"


def hlog_path(folder: Path, kind: str) -> Path:
    return folder / f"latency-{kind}.hlog"


def percentile_spectrum(hist: HdrHistogram, unit_ratio: float = US_PER_MS) -> str:
    """outputPercentileDistribution's text, values divided by `unit_ratio`.

    Written here rather than through hdrh's own method, which leaves the standard
    deviation unscaled (in microseconds beside a mean in milliseconds).
    """
    digits = hist.significant_figures
    out = [f"{'Value':>12} {'Percentile':>14} {'TotalCount':>10} {'1/(1-Percentile)':>14}\n\n"]
    if hist.get_total_count():
        for step in hist.get_percentile_iterator(TICKS_PER_HALF_DISTANCE):
            value = step.value_iterated_to / unit_ratio
            level = step.percentile_level_iterated_to / 100
            line = f"{value:12.{digits}f} {level:2.12f} {step.total_count_to_this_value:10d}"
            out.append(line + (f" {1 / (1 - level):14.2f}\n" if level < 1 else "\n"))
    out.append(f"#[Mean    = {hist.get_mean_value() / unit_ratio:12.{digits}f}, "
               f"StdDeviation   = {hist.get_stddev() / unit_ratio:12.{digits}f}]\n")
    out.append(f"#[Max     = {hist.get_max_value() / unit_ratio:12.{digits}f}, "
               f"Total count    = {hist.get_total_count():12d}]\n")
    out.append(f"#[Buckets = {hist.bucket_count:12d}, SubBuckets     = {hist.sub_bucket_count:12d}]\n")
    return "".join(out)


def interval_log(hist: HdrHistogram, start_s: float, end_s: float, comment: str) -> str:
    """One interval [start_s, end_s) (seconds from the run's start) in the interval log format."""
    out = StringIO()
    out.write(f"#{comment}\n")
    out.write(f"#[Histogram log format version {LOG_FORMAT_VERSION}]\n")
    out.write("#[BaseTime: 0.000 (seconds since epoch)]\n")
    out.write('"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"\n')
    out.write(f"{start_s:.3f},{end_s - start_s:.3f},{hist.get_max_value() / US_PER_MS:.3f},"
              f"{hist.encode().decode('ascii')}\n")
    return out.getvalue()


def write_latency_histograms(folder: Path, summary: RunSummary) -> list[Path]:
    """Both files for every latency kind of the run; the paths written."""
    start_s, end_s = summary.warmup_s, summary.warmup_s + summary.measured_s
    written = []
    for kind, hist in summary.histograms.items():
        hgrm, hlog = hgrm_path(folder, kind), hlog_path(folder, kind)
        hgrm.write_text(percentile_spectrum(hist))
        hlog.write_text(interval_log(hist, start_s, end_s,
                                     f"qmemo gen: {kind} latency in microseconds, the measured window "
                                     "(seconds from the run's start)"))
        written += [hgrm, hlog]
    return written
