"""`./devnet.sh --scenario memo-conservative`, shortened, end to end, and its report's first screen.

The preset's 4 shards and 20% cross-shard traffic stay; flags beside it shorten the rest:
one validator a shard (4 node processes, not 12, to make keys for, start and load on the
suite's machine), 200 TPS for 3 s and 500 ms blocks, as the suite's other devnets. So
the run shows the preset reaching the generator with the flags over it, and the report
reading a real preset run folder (its `command` included).
"""

from __future__ import annotations

import orjson
import pytest

from tests.conftest import REPO_ROOT, VENV_BIN, run_command
from tests.integration.test_devnet import attach_logs, free_base_port, processes_mentioning

pytestmark = pytest.mark.slow
SHARDS = 4          # the preset's
TPS, DURATION = 200, 3


@pytest.fixture(scope="module")
def scenario_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("scenario")
    base = free_base_port(SHARDS)
    command = ["bash", str(REPO_ROOT / "devnet.sh"), "--scenario", "memo-conservative", "--nodes", "1",
               "--tps", str(TPS), "--duration", str(DURATION), "--block-ms", "500", "--accounts", "60",
               "--no-monitor", "--base-port", str(base), "--dir", str(tmp / "devnet"), "--runs", str(tmp / "runs")]
    result = run_command(command, timeout=240)
    runs = sorted((tmp / "runs").iterdir()) if (tmp / "runs").is_dir() else []
    return {"tmp": tmp, "result": result, "run": runs[-1] if runs else None}


def test_the_scenario_runs_its_shards_with_the_flags_over_it(scenario_run):
    result, run = scenario_run["result"], scenario_run["run"]
    assert result.returncode == 0, result.stdout + result.stderr + attach_logs(run)
    assert "devnet.sh: scenario memo-conservative, flags over it: shards=4 nodes=1 cross_shard=20 tps=200 " \
           "duration=3" in result.stdout
    summary = orjson.loads((run / "gen" / "summary.json").read_bytes())
    assert [shard["shard"] for shard in summary["shards"]] == list(range(SHARDS))
    assert all(len(shard["nodes"]) == 1 for shard in summary["shards"])
    assert summary["target_tps"] == TPS and summary["counts"]["planned"] == TPS * DURATION
    assert summary["counts"]["committed"] == summary["counts"]["planned"]
    assert 0 < summary["cross_shard"]["planned"] == summary["cross_shard"]["credited"]
    assert summary["invariants"]["supply_conserved"] and summary["invariants"]["credited_exactly_once"]
    assert processes_mentioning(str(scenario_run["tmp"])) == []


def test_its_report_opens_with_the_shards_verifies_stage_costs_and_headroom(scenario_run, tmp_path):
    run = scenario_run["run"]
    assert run is not None and (run / "gen" / "node-stages.json").is_file(), scenario_run["result"].stdout
    baseline = REPO_ROOT / "tests" / "fixtures" / "c-baseline-quick"
    done = run_command([str(VENV_BIN / "qmemo"), "report", "--results", str(baseline), "--devnet", str(run),
                        "--out", str(tmp_path)])
    assert done.returncode == 0, done.stderr
    screen = (tmp_path / "REPORT.md").read_text().split("## Inputs and contents")[0]
    assert f"**Run `{run.name}`, {SHARDS} shards:" in screen
    assert "Command: `./devnet.sh --scenario memo-conservative --nodes 1" in screen
    assert "= **3,000 verifies/s per shard**" in screen
    for table_start in ("| shard | committed TPS |", "| shard | admitted |"):
        rows = screen.split(table_start)[1].split("\n\n")[0].splitlines()[2:]
        assert len(rows) == SHARDS, table_start
        assert all(" - |" not in row.split("|", 2)[2] for row in rows), rows     # every figure there
    assert f"`{run}/gen/summary.json`" in screen and f"`{run}/gen/node-stages.json`" in screen
