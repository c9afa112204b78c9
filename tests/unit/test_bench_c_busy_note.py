"""`qmemo bench c` says when its baseline was measured on a busy machine: a devnet set
against low C rates looks better than it is (the first screen's "% of C" passes 100%)."""

from __future__ import annotations

import dataclasses

from rich.console import Console

from qmemo.bench.c_summary import read_summary
from qmemo.commands.bench_c import _print_brief
from tests.conftest import REPO_ROOT

FIXTURE = REPO_ROOT / "tests" / "fixtures" / "c-baseline-quick"


def brief_with_load(load: float) -> str:
    summary = read_summary(FIXTURE / "summary.json")
    system = dataclasses.replace(summary.system, loadavg_at_start=[load, load, load])
    console = Console(record=True, width=200, highlight=False)
    _print_brief(console, dataclasses.replace(summary, system=system), FIXTURE)
    return console.export_text()


def test_a_baseline_measured_above_one_job_per_core_carries_a_note():
    cores = read_summary(FIXTURE / "summary.json").system.cores
    busy = brief_with_load(cores + 4.5)
    assert busy.startswith("C baseline ")
    assert f"note: measured while the load average was {cores + 4.5:.1f} on {cores} cores" in busy


def test_a_quiet_baseline_is_one_line():
    cores = read_summary(FIXTURE / "summary.json").system.cores
    quiet = brief_with_load(cores * 0.5)
    assert "note:" not in quiet and len(quiet.strip().splitlines()) == 1
