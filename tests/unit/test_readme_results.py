"""The README's results block (qmemo.analysis.readme_results) from recorded result folders:
every figure from the files, each with its run's command; spliced between the markers
and nowhere else."""

from __future__ import annotations

from pathlib import Path

import pytest

from qmemo.analysis.devnet import load_devnet_run
from qmemo.analysis.readme_results import BEGIN, END, results_block, run_context, update_readme
from qmemo.analysis.report_headline import load_headlines
from qmemo.analysis.results import load_results
from qmemo.errors import ConfigError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def block() -> str:
    results = load_results(FIXTURES / "c-baseline-quick")
    run = load_devnet_run(FIXTURES / "devnet-sh-sweep")
    [entry] = load_headlines(results, [run])
    return results_block(results, entry.headline, run, run_context(run), "qmemo report --readme README.md")


def test_the_block_states_the_headline_with_the_command_that_measured_it(block):
    command = (FIXTURES / "devnet-sh-sweep" / "command").read_text().strip()
    assert "**300 TPS** committed at saturation; the next stage (600 offered): p99 > 3 block intervals" in block
    assert f"- **A**: `{command}`; run `devnet-sh-sweep`" in block
    assert "- **B**: `qmemo bench c --quick`; run `c-baseline-quick`" in block
    assert "load average 6.2 on 2 cores: **busy**" in block      # the C fixture was measured on a busy machine
    assert "(variable-time hash-to-point)" in block and "(constant-time hash-to-point)" in block
    assert "![Where the devnet saturates" in block


def test_the_block_draws_no_verdict_from_a_lower_bound():
    results = load_results(FIXTURES / "c-baseline-quick")
    run = load_devnet_run(FIXTURES / "devnet-run")          # held its rate: a lower bound
    [entry] = load_headlines(results, [run])
    text = results_block(results, entry.headline, run, run_context(run), "x")
    assert "saturation not reached (a lower bound)" in text and "at least " in text
    devnet_cells = [cell for line in text.splitlines() if "headroom" in line
                    for cell in line.split("; ") if "devnet node end to end" in cell]
    assert devnet_cells and all("≥" in c and not any(v in c for v in ("meets", "tight", "short")) for c in devnet_cells)


def test_the_block_goes_between_the_markers_and_the_plot_beside_the_readme(tmp_path, block):
    readme, report = tmp_path / "README.md", tmp_path / "report"
    report.mkdir()
    (report / "headline.png").write_bytes(b"\x89PNG plot")
    readme.write_text(f"# x\n\nbefore\n{BEGIN}\nstale\n{END}\nafter\n")
    update_readme(readme, block, report)
    text = readme.read_text()
    assert text.startswith(f"# x\n\nbefore\n{BEGIN}\n") and text.endswith(f"{END}\nafter\n")
    assert "stale" not in text and "300 TPS" in text
    assert (tmp_path / "docs" / "img" / "headline.png").read_bytes() == b"\x89PNG plot"


def test_a_readme_without_markers_is_refused_and_left_as_it_was(tmp_path, block):
    readme = tmp_path / "README.md"
    readme.write_text("# x\n")
    with pytest.raises(ConfigError, match="lacks the markers"):
        update_readme(readme, block, tmp_path)
    assert readme.read_text() == "# x\n"
