"""The report's first screen, through the real CLI on recorded runs: the answer first, and
every figure it cites held by the file and key it names.

tests/fixtures/devnet-sh-sweep/ is a real devnet.sh sweep folder (it saturated: its top
stage was limited by latency) with each stage's node-stages.json; devnet-run/ a single
run that held its rate (a lower bound); c-baseline-quick/ the C baseline. A citation is
"`file` `key`": in a table's "read from" column beside the value it is for, or inline
after the figure (`qmemo.analysis.markdown.cited`). The check reads the file, follows
the key and compares with the figure as printed (rounded as printed; seconds printed
for a file's milliseconds where the row says "(s)").
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO_ROOT, VENV_BIN, run_command
from tests.integration.test_report import tables

FIXTURES = REPO_ROOT / "tests" / "fixtures"
BASELINE = FIXTURES / "c-baseline-quick"
SWEEP_RUN = FIXTURES / "devnet-sh-sweep"
HELD_RUN = FIXTURES / "devnet-run"
SOURCE = re.compile(r"^`(?P<path>[^`]+\.json)` `(?P<key>[^`]+)`$")
INLINE = re.compile(r"(?P<shown>[^|()`]+?) \(`(?P<path>[^`]+\.json)` `(?P<key>[^`]+)`\)")


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("headline")
    done = run_command([str(VENV_BIN / "qmemo"), "report", "--results", str(BASELINE), "--devnet", str(SWEEP_RUN),
                        "--devnet", str(HELD_RUN), "--out", str(out)])
    assert done.returncode == 0, done.stderr
    return out, (out / "REPORT.md").read_text()


def follow(path: str, key: str) -> Any:
    """The value at `key` ("rows[1].committed_tps") in the JSON file at `path` (repository-relative)."""
    value = json.loads((REPO_ROOT / path).read_text())
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", key):
        value = value[int(part[1:-1])] if part.startswith("[") else value[part]
    return value


def assert_shows(shown: str, held: Any, in_seconds: bool = False) -> None:
    """`shown` (as printed: bold marks, commas, a unit or a word after) is `held` as printed."""
    text = shown.replace("**", "").strip()
    if isinstance(held, str):
        assert text.startswith(held), (text, held)
        return
    number = re.match(r"-?[\d,]*\.?\d+", text)
    assert number, f"no figure in {shown!r}"
    printed = number.group(0).replace(",", "")
    digits = len(printed.split(".")[1]) if "." in printed else 0
    value = held / 1e3 if in_seconds else held
    assert f"{value:.{digits}f}" == printed, (shown, held)


def cited_rows(md: str) -> list[tuple[str, str, str, str]]:
    """(figure, value, path, key) of every table row whose "read from" cell is a citation."""
    out = []
    for headers, rows in tables(md):
        if headers[-1:] == ["read from"]:
            for cells in rows:
                if (match := SOURCE.match(cells[-1])) is not None:
                    out.append((cells[0], cells[1], match["path"], match["key"]))
    return out


def test_every_figure_cited_in_a_table_is_what_its_file_holds(report):
    _, md = report
    rows = cited_rows(md)
    assert len(rows) >= 14                  # both runs' headline tables
    for figure, value, path, key in rows:
        held = follow(path, key)
        shown = value.split(" (")[0] if isinstance(held, str) else value
        assert_shows(shown, held, in_seconds="(s)" in figure)


def test_every_figure_cited_inline_is_what_its_file_holds(report):
    _, md = report
    found = [m for line in md.splitlines() if not line.startswith("|") for m in INLINE.finditer(line)]
    assert found, "no inline citation: the verify-stage shares of the sweep's stages cite sweep.json"
    for match in found:
        held = follow(match["path"], match["key"])
        shown = match["shown"].rsplit(": ", 1)[-1]
        assert_shows(shown, held)


def test_the_sweeps_stage_shares_are_cited_to_sweep_json_rows(report):
    _, md = report
    rows = json.loads((SWEEP_RUN / "gen" / "sweep.json").read_text())["rows"]
    for i, row in enumerate(rows):
        assert (f": {row['survival_ratio']:.3f} (`tests/fixtures/devnet-sh-sweep/gen/sweep.json` "
                f"`rows[{i}].survival_ratio`)") in md


def test_the_first_30_lines_state_saturation_and_survival_with_their_sources(report):
    _, md = report
    first = "\n".join(md.splitlines()[:30])
    sweep = json.loads((SWEEP_RUN / "gen" / "sweep.json").read_text())["rows"]
    limited = ("throughput_saturated", "latency_saturated", "generator_fell_behind")
    held = max((r for r in sweep if not any(r[k] for k in limited)), key=lambda r: r["target_tps"])
    assert f"saturates at {held['committed_tps']:,.0f} TPS committed" in first
    assert "`tests/fixtures/devnet-sh-sweep/gen/sweep.json` `rows[1].committed_tps`" in first
    assert "**survival against C**" in first and "`tests/fixtures/c-baseline-quick/summary.json` `verify_implementations[" in first
    assert "held at 300 TPS, saturation not reached" in first          # the single run: no verdict from it
    assert md.index("survival against C") < md.index("## Inputs and contents") < md.index("## Environment")


def test_the_headroom_takes_the_headline_rate_and_draws_no_verdict_from_a_lower_bound(report):
    _, md = report
    section = md.split("## Headroom against MEMO")[1].split("\n## ")[0]
    [(headers, rows)] = [t for t in tables(section) if "needed/s per shard" in t[0]]
    column = headers.index("devnet devnet-run, node end to end (lower bound)")
    assert all(cells[column].startswith("≥") and not re.search(r"meets|tight|short", cells[column]) for cells in rows)
    capacity = next(cells for headers_, rows_ in tables(section) if headers_[0] == "capacity"
                    for cells in rows_ if cells[0] == "devnet devnet-sh-sweep, node end to end")
    assert capacity[2] == "`tests/fixtures/devnet-sh-sweep/gen/sweep.json` `rows[1].committed_tps`"


def test_reports_of_two_runs_land_in_two_folders_named_after_them(tmp_path):
    """Without --out a report goes to docs/results/<run id>/ (QMEMO_HOME puts docs/ under tmp)."""
    env = {**os.environ, "QMEMO_HOME": str(tmp_path)}
    for run in (SWEEP_RUN, HELD_RUN):
        done = run_command([str(VENV_BIN / "qmemo"), "report", "--results", str(BASELINE), "--devnet", str(run)],
                           env=env)
        assert done.returncode == 0, done.stderr
    folders = sorted(p.name for p in (tmp_path / "docs" / "results").iterdir())
    assert folders == ["devnet-run", "devnet-sh-sweep"]
    for name in folders:
        assert (tmp_path / "docs" / "results" / name / "REPORT.md").read_text().startswith(
            f"# qMEMO report: devnet run {name}\n")


def test_a_c_only_report_leads_with_the_cited_verify_rates_and_the_command_for_the_rest(tmp_path):
    done = run_command([str(VENV_BIN / "qmemo"), "report", "--results", str(BASELINE), "--out", str(tmp_path)])
    assert done.returncode == 0, done.stderr
    md = (tmp_path / "REPORT.md").read_text()
    first = "\n".join(md.splitlines()[:12])
    assert first.startswith("# qMEMO report: C baseline c-baseline-quick\n")
    assert "No devnet run was given" in first and "./devnet.sh --sweep" in first
    cites = list(INLINE.finditer(first))
    assert len(cites) == 2                   # liboqs's (constant-time) and the fast verifier's (variable-time)
    for match in cites:
        assert_shows(match["shown"].rsplit(": ", 1)[-1], follow(match["path"], match["key"]))
    assert "constant-time hash-to-point" in first and "variable-time hash-to-point" in first
