"""What `qmemo deploy render` refuses rather than write a stack that cannot deploy, or one
that would pass for a scenario it does not run: a genesis over a Swarm config's limit
(carried gzipped up to it, refused past it), and a manifest's perturbations, floods,
shaped links and throughput bounds (qmemo.deploy.stack.genesis_carrier, unrunnable).
"""

from __future__ import annotations

import gzip
import subprocess
from pathlib import Path

import pytest

from qmemo.cli import main
from qmemo.deploy.files import carry_genesis, readme
from qmemo.deploy.stack import (CONFIG_LIMIT_BYTES, StackPlan, genesis_carrier, peers_resolve_entrypoint,
                                refuse_unrunnable, stack, unrunnable, unzip_genesis_entrypoint)
from qmemo.errors import ConfigError
from qmemo.scenario.manifest import Manifest, load_manifest
from tests.conftest import REPO_ROOT

SCENARIOS = REPO_ROOT / "scenarios"


def manifest_of(name: str, *overrides: str) -> Manifest:
    return load_manifest(SCENARIOS / f"{name}.toml", SCENARIOS / "profiles.toml", list(overrides))


def plan(gzipped: bool = False) -> StackPlan:
    return StackPlan(hosts=3, placement="spread", folder="/srv/qmemo", genesis_hash="0123456789ab",
                     genesis_gzip=gzipped)


# --- the genesis and Swarm's 500 KiB ----------------------------------------------------------------

def test_a_genesis_within_the_limit_is_the_config_itself() -> None:
    assert genesis_carrier(CONFIG_LIMIT_BYTES, 1, 3_000) is False
    assert genesis_carrier(CONFIG_LIMIT_BYTES + 1, CONFIG_LIMIT_BYTES, 3_600) is True     # gzipped, it fits


def test_a_genesis_over_the_limit_even_gzipped_is_refused_with_what_fits_and_what_to_do() -> None:
    with pytest.raises(ConfigError) as refused:
        genesis_carrier(4_000_000, 1_024_000, 30_000)       # twice the limit, gzipped
    message = str(refused.value)
    assert "4,000,000 bytes (1,024,000 gzipped) for 30,000 accounts" in message
    assert "at most 512,000 bytes, which holds about 15,000 accounts gzipped" in message
    assert "--set chain.accounts=15000" in message and "./devnet.sh" in message


def test_a_gzipped_genesis_is_carried_as_genesis_json_gz_and_unzipped_before_the_node_starts() -> None:
    manifest = manifest_of("lan-baseline", "network.nodes=6", "network.shards=2", "load.cross_shard_pct=20")
    plain, gzipped = stack(manifest, plan()), stack(manifest, plan(gzipped=True))
    assert gzipped["configs"] == {"genesis-0123456789ab.gz": {"file": "/srv/qmemo/devnet/genesis.json.gz"}}
    node, before = gzipped["services"]["node-4"], plain["services"]["node-4"]
    assert node["configs"] == [{"source": "genesis-0123456789ab.gz", "target": "/devnet/genesis.json.gz"}]
    assert node["entrypoint"][2] == ("gunzip -c /devnet/genesis.json.gz > /devnet/genesis.json && "
                                     + before["entrypoint"][2])
    assert node["command"] == before["command"]          # the node reads /devnet/genesis.json as ever
    assert plain["configs"] == {"genesis-0123456789ab": {"file": "/srv/qmemo/devnet/genesis.json"}}


def test_the_unzip_step_writes_the_genesis_the_node_then_reads(tmp_path: Path) -> None:
    genesis = b'{"format": "qmemo-genesis/2", "accounts": [' + b'"ab", ' * 1000 + b'"ab"]}'
    (tmp_path / "genesis.json.gz").write_bytes(gzip.compress(genesis))
    shell, flag, script, name = unzip_genesis_entrypoint(peers_resolve_entrypoint(["localhost"]))
    # As a container runs it: /devnet is this folder, $$ is the stack file's escape of $, qmemo is cat.
    script = script.replace("/devnet", str(tmp_path)).replace("$$", "$").replace("exec qmemo", "exec cat")
    done = subprocess.run([shell, flag, script, name, str(tmp_path / "genesis.json")], capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout == genesis == (tmp_path / "genesis.json").read_bytes()


def test_carry_genesis_writes_the_same_gzip_for_the_same_genesis_and_removes_it_when_not_needed(
        tmp_path: Path) -> None:
    manifest = manifest_of("lan-baseline")
    (tmp_path / "genesis.json").write_text('{"accounts": [' + '"0123456789abcdef", ' * 2000 + '"x"]}')
    assert carry_genesis(manifest, tmp_path, limit_bytes=4096) is True
    first = (tmp_path / "genesis.json.gz").read_bytes()
    assert gzip.decompress(first) == (tmp_path / "genesis.json").read_bytes()
    assert carry_genesis(manifest, tmp_path, limit_bytes=4096) is True
    assert (tmp_path / "genesis.json.gz").read_bytes() == first        # no time stamp: the same config name's bytes
    assert carry_genesis(manifest, tmp_path) is False and not (tmp_path / "genesis.json.gz").exists()
    with pytest.raises(ConfigError, match="a Swarm config takes at most 64 bytes"):
        carry_genesis(manifest, tmp_path, limit_bytes=64)


# --- parts of a manifest a stack does not run ------------------------------------------------------

def test_perturbations_and_bounds_are_refused_each_by_name() -> None:
    with pytest.raises(ConfigError) as refused:
        refuse_unrunnable(manifest_of("shards-kill-partition"))
    message = str(refused.value)
    for part in ("perturbations.0 (kill at 15 s)", "perturbations.1 (partition at 30 s)",
                 "invariants.min_committed_tps = 150", "invariants.max_p99_ms = 40000", "qmemo scenario run"):
        assert part in message


def test_a_flood_is_refused_by_its_kind() -> None:
    parts = unrunnable(manifest_of("invalid-signature-flood"))
    assert any("(invalid-signature flood at " in part for part in parts), parts
    assert any("invariants.goodput_baseline_tps = " in part for part in parts), parts


def test_shaped_links_are_refused_each_pair_named() -> None:
    parts = unrunnable(manifest_of("wan-three-continents"), drop_thresholds=True)
    assert len(parts) == 1 and parts[0].startswith("network links ap <-> eu (intercontinental: "), parts
    assert "eu <-> us (transatlantic: " in parts[0] and "not shaped" in parts[0]


def test_thresholds_dropped_knowingly_render_and_the_readme_says_they_are_not_checked() -> None:
    manifest = manifest_of("lan-baseline")
    assert len(unrunnable(manifest)) == 1                                   # its two bounds, on one line
    assert unrunnable(manifest, drop_thresholds=True) == []
    assert unrunnable(manifest_of("shards-kill-partition", "perturbations=[]"), drop_thresholds=True) == []
    text = readme(manifest, plan(), "qmemo deploy render lan-baseline --drop-thresholds")
    assert "Not checked (rendered with --drop-thresholds): invariants.min_committed_tps, invariants.max_p99_ms" in text
    assert "travels gzipped" in readme(manifest, plan(gzipped=True), "qmemo deploy render lan-baseline")


def test_render_refuses_before_it_makes_a_devnet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    made: list[Path] = []
    monkeypatch.setattr("qmemo.deploy.files.make_devnet", lambda manifest, devnet: made.append(devnet) or "0")
    assert main(["deploy", "render", "shards-kill-partition", "--out", str(tmp_path / "out")]) == 1
    assert "perturbations.0 (kill at 15 s)" in capsys.readouterr().err
    assert made == [] and not (tmp_path / "out").exists()
