"""A run's latency histograms as .hgrm spectra and encoded interval logs, read back."""

from __future__ import annotations

import math
import re
from io import BytesIO

from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

from qmemo.load.hdr_files import hgrm_path, hlog_path, percentile_spectrum, write_latency_histograms
from qmemo.load.latency import ACCEPTED, LATENCY_FILES, Timings, summarize


def run_summary():
    """1,000 transactions intended 10 ms apart, each committed 1..1000 ms after its send."""
    intended = [i * 0.01 for i in range(1000)]
    timings = Timings(intended)
    for i, t in enumerate(intended):
        timings.mark_sent(i, t)
        timings.mark_answer(i, t + 0.002, ACCEPTED)
        timings.mark_committed(i, t + (i + 1) / 1000)
    return summarize(timings, warmup_s=1.0, window_end_s=10.0)


def spectrum_rows(text: str) -> list[tuple[float, float, int]]:
    """(value ms, percentile level, total count) of every data line of an .hgrm."""
    rows = []
    for line in text.splitlines():
        if re.match(r"^\s+\d", line):
            value, level, count = line.split()[:3]
            rows.append((float(value), float(level), int(count)))
    return rows


def test_every_latency_kind_gets_a_spectrum_and_a_log(tmp_path):
    written = write_latency_histograms(tmp_path, run_summary())
    assert sorted(written) == sorted([hgrm_path(tmp_path, k) for k in LATENCY_FILES]
                                     + [hlog_path(tmp_path, k) for k in LATENCY_FILES])


def test_the_spectrum_is_in_ms_and_agrees_with_the_summary(tmp_path):
    summary = run_summary()
    write_latency_histograms(tmp_path, summary)
    text = hgrm_path(tmp_path, "intended_to_committed").read_text()
    assert text.startswith("       Value     Percentile TotalCount 1/(1-Percentile)\n\n")
    rows = spectrum_rows(text)
    latency = summary.intended_to_committed
    assert rows[-1][1] == 1.0 and rows[-1][2] == latency.count == 900   # warm-up's 100 left out
    assert rows[-1][0] == latency.max_ms
    for name, level in (("p50", 0.5), ("p99", 0.99)):       # each percentile sits between two rows
        below = max(value for value, at, _ in rows if at <= level)
        above = min(value for value, at, _ in rows if at >= level)
        assert below <= latency.percentiles_ms[name] <= above
    # The rows are HdrHistogram's own outputPercentileDistribution's, to the character.
    reference = BytesIO()
    summary.histograms["intended_to_committed"].output_percentile_distribution(reference, 1000.0)
    assert spectrum_rows(reference.getvalue().decode()) == rows
    assert text.split("#[Mean")[0] == reference.getvalue().decode().split("#[Mean")[0]
    mean, stddev = (float(x) for x in re.search(r"Mean\s+=\s+([\d.]+), StdDeviation\s+=\s+([\d.]+)", text).groups())
    assert math.isclose(mean, latency.mean_ms, rel_tol=1e-3)
    assert 200 < stddev < 300        # uniform over 100..1000 ms: 260 ms, in ms like the mean


def test_the_interval_log_decodes_to_the_same_histogram(tmp_path):
    summary = run_summary()
    write_latency_histograms(tmp_path, summary)
    reader = HistogramLogReader(str(hlog_path(tmp_path, "sent_to_committed")), HdrHistogram(1, 3_600_000_000, 3))
    decoded = reader.get_next_interval_histogram()
    assert reader.get_next_interval_histogram() is None          # one interval: the measured window
    reader.close()
    latency = summary.sent_to_committed
    assert decoded.get_total_count() == latency.count
    assert decoded.get_value_at_percentile(99) / 1e3 == latency.percentiles_ms["p99"]
    interval = hlog_path(tmp_path, "sent_to_committed").read_text().splitlines()[-1].split(",")
    assert (float(interval[0]), float(interval[1])) == (1.0, 9.0)


def test_an_empty_histogram_has_a_spectrum_with_no_rows():
    text = percentile_spectrum(HdrHistogram(1, 3_600_000_000, 3))
    assert spectrum_rows(text) == [] and "Total count    =            0" in text
