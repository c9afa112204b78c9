"""A sharded run's first screen, over a recorded run of `./devnet.sh --scenario memo-conservative`
(tests/fixtures/devnet-scenario: 4 shards x 3 nodes, shortened to 200 TPS for 3 s).

Every figure the screen shows is recomputed here from the run's files by the test's own
arithmetic (the shard's nodes found by their URLs in node-stages.json), and the screen must
name those files and the research's model it is set against."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from qmemo.analysis.devnet import load_devnet_run
from qmemo.analysis.py_bench import PyBenches
from qmemo.analysis.report import write_report
from qmemo.analysis.report_shards_headline import load_sharded_headlines, scenario_note

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
RUN = FIXTURES / "devnet-scenario"
STAGES = ("http", "decode_hash", "verify", "mempool", "block_build", "block_validate", "store", "relay", "other")
MODEL = 3000.0          # the research's table 14, "Conservative + 20% cross-shard": verifies/s per shard


def first_screen(tmp_path: Path, run: Path = RUN) -> str:
    report = write_report(FIXTURES / "c-baseline-quick", [run], tmp_path / "out", PyBenches())
    md = report.markdown_path.read_text()
    return md.split("## Inputs and contents")[0]


@pytest.fixture(scope="module")
def screen(tmp_path_factory) -> str:
    """The recorded run's first screen (one report: each draws every plot)."""
    return first_screen(tmp_path_factory.mktemp("scenario-report"))


def rows_of(screen: str, first_header: str) -> list[list[str]]:
    """The body rows of the screen's table whose header starts with `first_header`."""
    lines = screen.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    out = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        out.append([cell.strip().replace("**", "") for cell in line.strip("|").split("|")])
    return out


def shown(value: float, digits: int) -> str:
    return f"{value:,.{digits}f}"


def per_shard_nodes() -> list[list[dict]]:
    summary = json.loads((RUN / "gen" / "summary.json").read_text())
    nodes = json.loads((RUN / "gen" / "node-stages.json").read_text())["nodes"]
    return [[node for node in nodes if node["url"] in shard["nodes"]] for shard in summary["shards"]]


def test_the_first_screen_shows_each_shards_measured_verifies_per_second_from_summary_json(screen):
    summary = json.loads((RUN / "gen" / "summary.json").read_text())
    rows = rows_of(screen, "shard | committed TPS")
    assert len(rows) == len(summary["shards"]) == 4
    for cells, shard in zip(rows, summary["shards"]):
        per_s = shard["committed_tps"] * shard["verifies_per_committed_tx"]
        assert cells[0] == str(shard["shard"])
        assert cells[1] == shown(shard["committed_tps"], 1) and cells[3] == shown(per_s, 1)
        assert cells[4] == f"{per_s / MODEL:.1%}"
    assert "`tests/fixtures/devnet-scenario/gen/summary.json` (the shard's `shards[i]`: `committed_tps`, " \
           "`verifies_per_committed_tx`)" in screen


def test_the_first_screen_shows_the_cpu_per_transaction_per_stage_from_node_stages_json(screen):
    rows = rows_of(screen, "shard | admitted")
    for cells, nodes in zip(rows, per_shard_nodes(), strict=True):
        admitted = sum(node["admitted"] for node in nodes)
        assert cells[1] == shown(admitted, 0)
        for column, stage in enumerate(STAGES, start=2):
            assert cells[column] == shown(sum(node["cpu_s"][stage] for node in nodes) / admitted * 1e6, 1), stage
    assert "_Read from: `tests/fixtures/devnet-scenario/gen/node-stages.json`" in screen
    assert [cells[-1] for cells in rows] == ["`nodes[0-2]`", "`nodes[3-5]`", "`nodes[6-8]`", "`nodes[9-11]`"]


def test_the_headroom_is_set_against_the_researchs_modelled_3000_and_names_its_source(screen):
    for cells, nodes in zip(rows_of(screen, "shard | committed TPS"), per_shard_nodes(), strict=True):
        verifies = sum(node["txs"]["verify"] for node in nodes)
        verify_us = sum(node["cpu_s"]["verify"] for node in nodes) / verifies * 1e6
        node_us = sum(node["process_cpu_s"] for node in nodes) / verifies * 1e6
        assert cells[5] == shown(verify_us, 1) and cells[7] == shown(node_us, 1)
        for cell, us in ((cells[6], verify_us), (cells[8], node_us)):
            x = 1e6 / us / MODEL
            assert re.fullmatch(r"[\d,.]+x (meets|tight|short)", cell)
            assert cell.split("x")[0] == (f"{x:.2f}" if x < 10 else f"{x:,.1f}"), (cell, x)
            assert cell.endswith("meets" if x >= 2 else "tight" if x >= 1 else "short")
    assert "= **3,000 verifies/s per shard**" in screen
    assert 'row "Conservative + 20% cross-shard" (../shared/reference/000_e860b85b1fa44f42.txt' in screen


def test_the_first_screen_names_the_command_and_says_a_shortened_run_is_not_the_scenarios_load(screen):
    command = (RUN / "command").read_text().strip()
    assert f"Command: `{command}` (`tests/fixtures/devnet-scenario/command`)" in screen
    assert "**Not MEMO's conservative load**: this run was offered 200 TPS over 4 shards" in screen
    summary = json.loads((RUN / "gen" / "summary.json").read_text())
    counts, checks = summary["counts"], summary["invariants"]
    held = "yes" if checks["supply_conserved"] and checks["credited_exactly_once"] else "NO"
    assert (f"Of {counts['planned']:,} planned: {counts['committed']:,} final, {counts['rejected_total']:,} refused, "
            f"{counts['lost']:,} lost; supply conserved and every transfer credited once: **{held}**") in screen
    # The answer leads: the sharded block comes before the pointer to the details and the C lines.
    assert screen.index("**Run `devnet-scenario`, 4 shards:") < screen.index("Shards end to end") \
        < screen.index("No unsharded devnet run was given")


def test_a_run_offered_the_conservative_load_is_said_to_be_it():
    run = load_devnet_run(RUN)
    full = replace(run, target_tps=10_000.0, counts={**run.counts, "planned": 600_000},
                   cross_shard=replace(run.cross_shard, planned=120_000))
    [line] = load_sharded_headlines([full])
    assert line.is_conservative
    assert scenario_note(line).splitlines()[2].startswith("The run was offered MEMO's conservative load: 10,000 TPS "
                                                          "over 4 shards with 20% of transfers planned cross-shard")
    [short] = load_sharded_headlines([run])
    assert not short.is_conservative


def test_a_run_folder_without_node_stages_still_shows_its_verifies_and_says_what_is_missing(tmp_path):
    bare = tmp_path / "bare-run"
    (bare / "gen").mkdir(parents=True)
    shutil.copy(RUN / "gen" / "summary.json", bare / "gen" / "summary.json")
    screen = first_screen(tmp_path, bare)
    rows = rows_of(screen, "shard | committed TPS")
    assert len(rows) == 4 and all(cells[3] != "-" and cells[5] == "-" and cells[6] == "-" for cells in rows)
    assert "no node-stages.json: no CPU figures" in screen and "No `node-stages.json` beside" in screen
    assert "Command:" not in screen
