"""The generator's live status line and its end-of-run table, rendered and read back as text."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from rich.console import Console

from qmemo.load.latency import ACCEPTED, FAILED, REJECTED, LatencySummary, RunCounts, RunSummary, Timings
from qmemo.load.live_status import LiveLine, progress_line, status
from qmemo.load.summary import load_summary, read_summary
from qmemo.load.summary_view import render_summary

FIXTURES = Path(__file__).parents[1] / "fixtures"


def timings_with(statuses: list[int], step_s: float = 0.1) -> Timings:
    timings = Timings([i * step_s for i in range(len(statuses))])
    for i, code in enumerate(statuses):
        timings.status[i] = code
    return timings


def test_the_live_status_counts_offered_accepted_included_and_final():
    # 10 planned, one every 0.1 s; 6 answered: 4 accepted, 1 rejected, 1 failed.
    timings = timings_with([ACCEPTED] * 4 + [REJECTED, FAILED] + [0] * 4)
    doc = status(elapsed_s=0.55, duration_s=1.0, timings=timings, sent=6, answered=6, in_flight=0, included=3,
                 committed=2, blocks_seen=1, failovers=0, node_failures={},
                 recent_latencies_s=[0.1 * i for i in range(1, 101)])
    assert doc["offered"] == 6               # intended at 0.0 .. 0.5 s
    assert doc["accepted"] == 4 and doc["included"] == 3 and doc["committed"] == 2
    assert doc["target_tps"] == 10.0 and doc["running"] is True
    assert round(doc["p99_ms"]) == 10_000    # the 100th of 100 latencies: 10 s


def test_the_progress_line_says_where_the_run_is_in_one_line():
    timings = timings_with([ACCEPTED] * 2000, step_s=0.01)   # 100 TPS for 20 s
    doc = status(elapsed_s=12.4, duration_s=20.0, timings=timings, sent=1240, answered=1200, in_flight=3,
                 included=1100, committed=1000, blocks_seen=5, failovers=0, node_failures={},
                 recent_latencies_s=[1.5, 2.25])
    line = progress_line(doc, "stage 1,500 TPS (2 of at most 4)")
    assert "\n" not in line
    assert line.startswith("stage 1,500 TPS (2 of at most 4)")
    assert "12 s of 20" in line and "offered 1,241" in line and "accepted 1,200" in line
    assert "included 1,100" in line and "final 1,000" in line and "p99 2,250 ms" in line


def test_the_progress_line_says_when_the_run_waits_for_finality_and_never_shows_negative_time():
    def line_at(elapsed_s: float) -> str:
        return progress_line(status(elapsed_s=elapsed_s, duration_s=8.0, timings=timings_with([0] * 800, 0.01),
                                    sent=0, answered=0, in_flight=0, included=0, committed=0, blocks_seen=0,
                                    failovers=0, node_failures={}, recent_latencies_s=[]))
    assert "0 s of 8" in line_at(-0.2) and "-0" not in line_at(-0.2)
    assert "8 s sent, waiting for final 4 s" in line_at(12.0)


def test_the_progress_line_before_any_commit_shows_no_p99():
    doc = status(elapsed_s=0.5, duration_s=10.0, timings=timings_with([0] * 10), sent=0, answered=0, in_flight=0,
                 included=0, committed=0, blocks_seen=0, failovers=0, node_failures={}, recent_latencies_s=[])
    assert "p99 -" in progress_line(doc)


def test_the_live_line_is_silent_when_disabled():
    console = Console(record=True, width=120, force_terminal=False)
    with LiveLine(console, enabled=False) as line:
        line.label = "stage"
        line.update({"running": True, "elapsed_s": 1.0, "planned": 10, "target_tps": 10.0})
    assert console.export_text() == ""


def latency(p50_ms: float, p99_ms: float) -> LatencySummary:
    return LatencySummary(10, {"p50": p50_ms, "p90": p99_ms, "p95": p99_ms, "p99": p99_ms, "p99.9": p99_ms},
                          p99_ms, p50_ms)


def text_of(renderable) -> str:
    console = Console(record=True, width=160, color_system=None)
    console.print(renderable)
    return console.export_text()


def test_the_end_of_run_table_has_the_intended_to_included_row():
    counts = RunCounts(planned=100, sent=100, accepted=100, duplicate=0, committed=100, rejected={}, lost=0,
                       failed=0, unsent=0)
    run = RunSummary(counts, latency(3100.0, 4321.0), latency(3000.0, 4300.0), latency(5.0, 40.0),
                     latency(0.1, 1.0), warmup_s=2.0, measured_s=10.0, committed_tps=10.0,
                     generator_fell_behind=False, intended_to_included=latency(900.0, 1234.5),
                     included_to_committed=latency(2100.0, 2222.0))
    text = text_of(render_summary(load_summary(run, target_tps=10.0, interrupted=False, block_interval_s=2.0)))
    [included] = [line for line in text.splitlines() if "intended→included" in line]
    [wait] = [line for line in text.splitlines() if "included→committed" in line]
    assert "900.0" in included and "1,234.5" in included
    assert "2,222.0" in wait


def test_an_older_summary_without_inclusion_times_renders_without_the_row():
    recorded = read_summary(FIXTURES / "devnet-run" / "summary.json")
    # as a summary written before inclusion times were measured reads back
    summary = replace(recorded, latency_ms=replace(recorded.latency_ms, intended_to_included=None))
    text = text_of(render_summary(summary))
    assert "intended→committed" in text and "intended→included" not in text
    assert "intended→included" in text_of(render_summary(replace(
        summary, latency_ms=replace(summary.latency_ms, intended_to_included=summary.latency_ms.sent_to_accepted))))
