"""`qmemo report --scenario DIR` on recorded runs: a scenario run folder and a
propagation folder (tests/fixtures/scenario-run, tests/fixtures/scenario-propagation; see
tests/fixtures/README.md for how they were recorded). The report is made once through
the real CLI; the tests check that each section is there with its plot, that its tables
hold the run folder's own figures, and that REPORT.html carries the same."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from qmemo.analysis.markdown import num
from qmemo.analysis.report_scenario import model_propagation_s
from tests.conftest import REPO_ROOT, VENV_BIN, run_command

FIXTURES = REPO_ROOT / "tests" / "fixtures"
C_RESULTS = FIXTURES / "c-baseline-quick"
RUN = FIXTURES / "scenario-run"
PROPAGATION = FIXTURES / "scenario-propagation"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("report")
    done = run_command([str(VENV_BIN / "qmemo"), "report", "--results", str(C_RESULTS), "--scenario", str(RUN),
                        "--scenario", str(PROPAGATION), "--out", str(out)], timeout=300)
    assert done.returncode == 0, done.stderr
    return out, (out / "REPORT.md").read_text()


def _section(markdown: str, title: str) -> str:
    start = markdown.index(f"\n## {title}\n")
    end = markdown.find("\n## ", start + 1)
    return markdown[start:end if end != -1 else None]


def test_the_run_gets_a_section_with_its_timeline_plot(report):
    out, markdown = report
    name = json.loads((RUN / "manifest.json").read_text())["effective"]["name"]
    section = _section(markdown, f"Scenario {name}")
    plot = f"scenario_{name}_timeline.png"
    assert f"]({plot})" in section
    assert (out / plot).read_bytes().startswith(PNG_MAGIC)
    assert "- scenario run: `tests/fixtures/scenario-run`" in markdown


def test_every_perturbation_and_invariant_of_the_run_is_in_its_tables(report):
    _, markdown = report
    verdict = json.loads((RUN / "invariants.json").read_text())
    section = _section(markdown, f"Scenario {verdict['scenario']}")
    for result in verdict["results"]:
        assert f"| {result['name']} | {'yes' if result['passed'] else '**no**'} | {result['detail']} |" in section
    done = [json.loads(line) for line in (RUN / "timeline.jsonl").read_text().splitlines()]
    perturbations = [line for line in done if line["what"] in ("SIGSTOP", "SIGCONT", "kill -9", "restart", "partition",
                                                                 "heal", "link down", "link up", "clean stop")]
    assert perturbations
    for line in perturbations:
        assert re.search(rf"\| {line['t_s']:.1f} \| {re.escape(line['what'])}", section), line


def test_propagation_figures_are_set_against_the_model(report):
    _, markdown = report
    found = json.loads((PROPAGATION / "propagation.json").read_text())
    section = _section(markdown, "Block propagation per link profile")
    for entry in found["profiles"]:
        model_s = model_propagation_s(found["block_bytes"], entry["profile_facts"])
        row = next(line for line in section.splitlines() if line.startswith(f"| {entry['profile']} |"))
        assert f"| {num(entry['median_s'] * 1000)} |" in row and f"| {num(model_s * 1000)} |" in row
        assert f"| {num(entry['min_s'] * 1000)} - {num(entry['max_s'] * 1000)} |" in row


def test_the_html_page_carries_the_scenario_sections_and_embeds_the_plot(report):
    out, _ = report
    page = (out / "REPORT.html").read_text()
    name = json.loads((RUN / "manifest.json").read_text())["effective"]["name"]
    assert f'id="scenario-{name}"' in page and 'id="block-propagation-per-link-profile"' in page
    image = re.search(rf'<img src="([^"]*)" alt="scenario {re.escape(name)}: throughput', page)
    assert image and image.group(1).startswith("data:image/png;base64,")
