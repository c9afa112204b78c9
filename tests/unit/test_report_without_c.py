"""`qmemo report --devnet RUN` on a checkout with no C baseline, as on a fresh clone.

A sharded run's first screen is the nodes' own figures against the research's model, so it
renders without a C baseline; what only the baseline can fill is left out and the report
names the command that measures it. An unsharded run's answer is set against C and still
refuses, as does a results folder named but missing."""

from __future__ import annotations

from pathlib import Path

import pytest

import qmemo.analysis.results as results_module
from qmemo.analysis.devnet import load_devnet_run
from qmemo.analysis.py_bench import PyBenches
from qmemo.analysis.report import write_report
from qmemo.analysis.report_shards import shards_section
from qmemo.errors import ConfigError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SHARDED = FIXTURES / "devnet-scenario"
UNSHARDED = FIXTURES / "devnet-run"
COMMAND = "`.venv/bin/qmemo bench c`"


@pytest.fixture
def no_c_baseline(tmp_path, monkeypatch):
    """results/latest missing and no run of this machine's beside it."""
    monkeypatch.setattr(results_module, "DEFAULT_RESULTS", tmp_path / "results" / "latest")
    monkeypatch.setattr(results_module, "_this_machines_baseline", lambda: None)


def test_a_sharded_run_reports_without_a_c_baseline_and_names_the_command(no_c_baseline, tmp_path):
    report = write_report(None, [SHARDED], tmp_path / "out", PyBenches())
    md = report.markdown_path.read_text()
    screen, details = md.split("## Inputs and contents")
    assert screen.startswith("# qMEMO report: devnet run devnet-scenario")
    assert "**Run `devnet-scenario`, 4 shards:" in screen and "| shard | committed TPS |" in screen
    assert "| shard | admitted |" in screen                         # the stage costs, the shard's nodes pooled
    assert "no C baseline" in screen and COMMAND in screen
    assert "- C baseline: no C baseline" in details and COMMAND in details
    titles = [line[3:] for line in md.splitlines() if line.startswith("## ")]
    assert titles == ["Inputs and contents", "Devnet end to end", "Shards end to end", "Python chain core and node"]
    assert report.html_path.read_text().count("devnet-scenario") > 0


def test_the_shards_section_without_c_leaves_only_the_c_columns_empty():
    text = shards_section(None, [load_devnet_run(SHARDED)]).render()
    assert "the C single core's headroom is not shown: there is no C baseline" in text
    rows = [line for line in text.splitlines() if line.startswith("| conservative, 20% cross-shard |")]
    cells = [cell.strip() for cell in rows[0].strip("|").split("|")]
    assert cells[4] == "3,000.0" and cells[5].endswith("%")     # the need, and this devnet's load against it
    assert cells[6] == "-" and cells[8] == "-"                   # the C core's headroom, model and measured
    assert "statistical.json" not in text


def test_an_unsharded_run_still_refuses_without_a_c_baseline(no_c_baseline, tmp_path):
    for runs in ([UNSHARDED], [SHARDED, UNSHARDED]):
        with pytest.raises(ConfigError, match=r"no C baseline .*`\.venv/bin/qmemo bench c`"):
            write_report(None, runs, tmp_path / "out", PyBenches())


def test_a_results_folder_named_but_missing_still_refuses(tmp_path):
    with pytest.raises(ConfigError, match="no C baseline at"):
        write_report(tmp_path / "nowhere", [SHARDED], tmp_path / "out", PyBenches())
