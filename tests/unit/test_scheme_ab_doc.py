"""docs/schemes.md's table is the report's own: qmemo.analysis.scheme_ab_doc copies the
"Schemes side by side" table of a REPORT.md between the doc's markers, and nothing else."""

from __future__ import annotations

import pytest

from qmemo.analysis.scheme_ab_doc import BEGIN, END, main, report_table, splice
from qmemo.errors import ConfigError
from tests.conftest import REPO_ROOT

REPORT = """# qMEMO report

## Devnet end to end

| run | target TPS |
|:---|---:|
| a | 1 |

## Schemes side by side

Each run's sweep side by side.

| scheme | run | committed TPS (max) |
|:---|:---|---:|
| Falcon-512 | r1 | 1,000 |
| Ed25519 | r2 | 2,000 |

Source: runs/x

### Per stage

| scheme | target TPS |
|:---|---:|
| Falcon-512 | 250 |
"""


def test_the_table_taken_is_the_first_one_of_the_scheme_section():
    assert report_table(REPORT).splitlines() == [
        "| scheme | run | committed TPS (max) |", "|:---|:---|---:|",
        "| Falcon-512 | r1 | 1,000 |", "| Ed25519 | r2 | 2,000 |"]


def test_a_report_without_the_section_or_its_table_is_refused():
    with pytest.raises(ConfigError, match="no 'Schemes side by side' section"):
        report_table(REPORT.replace("Schemes side by side", "Something else"))
    with pytest.raises(ConfigError, match="holds no table"):
        report_table("## Schemes side by side\n\nnothing here\n\n## Next\n\n| a |\n|---|\n| 1 |\n")


def test_the_block_between_the_markers_is_replaced_and_the_rest_kept():
    doc = f"intro\n\n{BEGIN}\nold | table\n{END}\n\noutro\n"
    assert splice(doc, "note\n\n| new |\n") == f"intro\n\n{BEGIN}\nnote\n\n| new |\n{END}\n\noutro\n"
    with pytest.raises(ConfigError, match="lacks the markers"):
        splice("no markers here", "x")


def test_the_command_writes_the_doc_and_leaves_it_alone_on_error(tmp_path, capsys):
    report, doc = tmp_path / "REPORT.md", tmp_path / "schemes.md"
    report.write_text(REPORT)
    doc.write_text(f"a\n{BEGIN}\n{END}\nb\n")
    assert main([str(report), str(doc), "--note", "Measured now."]) == 0
    assert doc.read_text() == f"a\n{BEGIN}\nMeasured now.\n\n{report_table(REPORT)}\n{END}\nb\n"
    report.write_text("# empty report\n")
    before = doc.read_text()
    assert main([str(report), str(doc)]) == 1
    assert doc.read_text() == before and "no 'Schemes side by side' section" in capsys.readouterr().err


def test_the_schemes_doc_holds_the_markers_once():
    text = (REPO_ROOT / "docs" / "schemes.md").read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1 and text.index(BEGIN) < text.index(END)


def test_the_script_documents_its_options_and_refuses_unknown_ones():
    import subprocess

    script = REPO_ROOT / "scripts" / "schemes-ab.sh"
    shown = subprocess.run(["bash", str(script), "--help"], capture_output=True, text=True, timeout=30)
    assert shown.returncode == 0
    for option in ("--schemes", "--sweep", "--stage", "--accounts", "--out", "--update-docs"):
        assert option in shown.stdout
    refused = subprocess.run(["bash", str(script), "--no-such-option"], capture_output=True, text=True, timeout=30)
    assert refused.returncode == 2 and "unknown option '--no-such-option'" in refused.stderr
