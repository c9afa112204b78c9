"""devnet.sh's named runs (`--scenario NAME`): written once in qmemo.core.defaults, a flag given
beside the name wins wherever it stands, and an unknown name is refused with the names there are.

devnet.sh is asked with `--dry-run`, which prints the settings a command line comes to and
starts nothing (it exits before setup.sh), so these run in well under a second each.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from qmemo.analysis.headroom import required_verify_rate
from qmemo.analysis.memo import CONSERVATIVE_SHARDS, CONSERVATIVE_TPS, CROSS_SHARD_SHARE
from qmemo.core.defaults import CHAIN, DEVNET_SCENARIOS, DevnetScenario, UnknownScenario, main, scenario

ROOT = Path(__file__).resolve().parents[2]


def dry_run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(ROOT / "devnet.sh"), *args, "--dry-run"], capture_output=True, text=True,
                          timeout=30)


def settings(*args: str) -> dict[str, str]:
    """The settings `devnet.sh ARGS --dry-run` prints, by name."""
    done = dry_run(*args)
    assert done.returncode == 0, done.stderr
    [line] = done.stdout.splitlines()
    return dict(word.split("=", 1) for word in line.split(": ")[-1].split())


def test_memo_conservative_is_the_researchs_conservative_scenario() -> None:
    """The preset and the report's model (qmemo.analysis.memo) are one scenario: 4 shards x 3
    validators, 20% cross-shard, 10,000 TPS for 60 s, which the research's table 14 models at
    3,000 verifies/s per shard."""
    memo = scenario("memo-conservative")
    assert (memo.shards, memo.tps, memo.cross_shard_pct / 100) == (CONSERVATIVE_SHARDS, CONSERVATIVE_TPS,
                                                                   CROSS_SHARD_SHARE)
    assert (memo.validators, memo.duration_s) == (CHAIN.validators, 60)
    assert required_verify_rate(memo.tps, memo.shards, memo.cross_shard_pct / 100) == 3000


def test_a_scenario_is_devnet_shs_variables_in_plain_numbers() -> None:
    assert scenario("memo-conservative").shell_assignments() == \
        "SHARDS=4\nNODES=3\nCROSS_SHARD=20\nTPS=10000\nDURATION=60\n"
    # A flag's regex takes 1000000 and 12.5, never Python's 1e+06.
    big = DevnetScenario("x", "", shards=2, validators=1, cross_shard_pct=12.5, tps=1_000_000, duration_s=5)
    assert "TPS=1000000\n" in big.shell_assignments() and "CROSS_SHARD=12.5\n" in big.shell_assignments()


def test_an_unknown_scenario_is_refused_with_the_names_there_are(capsys) -> None:
    with pytest.raises(UnknownScenario, match="unknown scenario 'memo-aggressive'; the scenarios: memo-conservative"):
        scenario("memo-aggressive")
    assert main(["--scenario", "memo-aggressive"]) == 2
    assert "memo-conservative" in capsys.readouterr().err


def test_the_preset_reaches_devnet_sh_unchanged() -> None:
    got = settings("--scenario", "memo-conservative")
    assert {k: got[k] for k in ("shards", "nodes", "cross_shard", "tps", "duration")} == \
        {"shards": "4", "nodes": "3", "cross_shard": "20", "tps": "10000", "duration": "60"}


@pytest.mark.parametrize("args", [("--scenario", "memo-conservative", "--duration", "20", "--tps", "500"),
                                  ("--duration", "20", "--tps", "500", "--scenario", "memo-conservative")],
                         ids=["flags after the name", "flags before the name"])
def test_flags_given_beside_the_scenario_win_wherever_they_stand(args) -> None:
    got = settings(*args)
    assert (got["duration"], got["tps"]) == ("20", "500")
    assert (got["shards"], got["nodes"], got["cross_shard"]) == ("4", "3", "20")     # the rest stays the preset's


def test_one_chain_over_a_scenario_drops_its_cross_shard_share_without_an_error() -> None:
    got = settings("--scenario", "memo-conservative", "--shards", "1")
    assert (got["shards"], got["cross_shard"]) == ("1", "0")
    assert dry_run("--shards", "1", "--cross-shard", "20").returncode == 2     # a given share still needs shards


def test_devnet_sh_refuses_an_unknown_scenario_in_one_line_naming_the_scenarios() -> None:
    done = dry_run("--scenario", "memo-aggressive")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("devnet.sh: unknown scenario 'memo-aggressive'; the scenarios: memo-conservative")
    assert len(done.stderr.strip().splitlines()) == 1


def test_devnet_sh_lists_every_scenario_and_its_help_names_them() -> None:
    listed = subprocess.run(["bash", str(ROOT / "devnet.sh"), "--list-scenarios"], capture_output=True, text=True,
                            check=True).stdout.splitlines()
    assert listed == [s.line() for s in DEVNET_SCENARIOS]
    assert listed[0].startswith("memo-conservative: 4 shards x 3 validators, 20% cross-shard, 10,000 TPS offered "
                                "for 60 s")
    help_text = subprocess.run(["bash", str(ROOT / "devnet.sh"), "--help"], capture_output=True, text=True,
                               check=True).stdout
    assert "Named: " + " ".join(s.name for s in DEVNET_SCENARIOS) in help_text


def test_the_scenarios_are_read_on_the_bare_interpreter() -> None:
    """devnet.sh reads them before setup.sh has made the environment, as it reads the defaults."""
    printed = subprocess.run([sys.executable, "-I", "-S", str(ROOT / "qmemo/core/defaults.py"), "--scenario",
                              "memo-conservative"], capture_output=True, text=True, check=True, cwd="/").stdout
    assert printed == scenario("memo-conservative").shell_assignments()
