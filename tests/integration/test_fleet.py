"""`qmemo gen --generators 2` against three real nodes on loopback: every planned
transaction accounted for and committed, one run folder with the files and the
summary.json keys one process writes, the nodes' agreement read once, and each part
named in the manifest."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import REPO_ROOT, VENV_BIN
from tests.integration.nodes import Network, make_devnet

TPS, DURATION_S = 200, 4
C_BASELINE = REPO_ROOT / "tests" / "fixtures" / "c-baseline-quick"


@pytest.fixture(scope="module")
def network(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Network]:
    root = tmp_path_factory.mktemp("fleet")
    devnet = make_devnet(root / "devnet", accounts=24)
    with Network(devnet, root) as net:
        net.start()
        yield net


def gen(network: Network, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    devnet = network.nodes[0].devnet
    done = subprocess.run(
        [str(VENV_BIN / "qmemo"), "gen", "--genesis", str(devnet.genesis),
         "--accounts", str(devnet.path / "accounts.keys.json"), "--nodes", ",".join(n.url for n in network.nodes),
         "--warmup", "0", "--out", str(out), "--no-cache", "--quiet", *extra],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=90, env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stdout + done.stderr + network.logs()
    return done


def keys_of(document: Any, prefix: str = "") -> set[str]:
    """Every key path of a JSON document (lists by their first item)."""
    if isinstance(document, dict):
        return {path for key, value in document.items()
                for path in {prefix + key} | keys_of(value, prefix + key + ".")}
    if isinstance(document, list) and document:
        return keys_of(document[0], prefix + "[].")
    return set()


def test_two_generators_commit_every_planned_transaction_into_one_run_folder(network: Network, tmp_path: Path):
    fleet, single = tmp_path / "fleet", tmp_path / "single"
    gen(network, fleet, "--generators", "2", "--tps", str(TPS), "--duration", str(DURATION_S))
    gen(network, single, "--tps", "50", "--duration", "2")

    summary = orjson.loads((fleet / "summary.json").read_bytes())
    counts = summary["counts"]
    planned = TPS * DURATION_S
    assert counts["planned"] == planned and counts["accounted"] == planned, counts
    assert (counts["committed"], counts["lost"], counts["failed"], counts["unsent"], counts["rejected_total"]) == \
        (planned, 0, 0, 0, 0), (counts, network.logs())
    assert summary["agreement"]["agree"] is True and summary["agreement"]["reorgs_total"] == 0
    one = orjson.loads((single / "summary.json").read_bytes())
    assert keys_of(summary) == keys_of(one)       # the schema one process writes

    rows = (fleet / "transactions.csv").read_text().splitlines()
    assert len(rows) == planned + 1
    assert len({row.split(",")[1] for row in rows[1:]}) == planned        # every id once
    intended = [float(row.split(",")[2]) for row in rows[1:]]
    assert intended == sorted(intended)       # the parts' plans interleaved back into one schedule
    assert sorted(p.name for p in fleet.iterdir() if p.is_file()) == sorted(p.name for p in single.iterdir())

    manifest = orjson.loads((fleet / "manifest.json").read_bytes())
    assert manifest["generators"] == 2
    assert [(p["part"], p["planned"]) for p in manifest["parts"]] == [(0, planned // 2), (1, planned // 2)]
    assert sum(p["offered"] for p in manifest["parts"]) == manifest["sender"]["offered"] == planned
    assert summary["generator_cpu_s"] == pytest.approx(sum(p["cpu_s"] for p in manifest["parts"]))
    assert all(p["schedule_lag_p99_ms"] is not None for p in manifest["parts"])
    assert "generators" not in orjson.loads((single / "manifest.json").read_bytes())

    nodes = orjson.loads((fleet / "nodes.json").read_bytes())
    assert sum(block["ours"] for block in nodes["blocks"]) == planned
    assert all(node["start"] and node["end"] for node in nodes["nodes"])

    report = subprocess.run([str(VENV_BIN / "qmemo"), "report", "--results", str(C_BASELINE), "--devnet", str(fleet),
                             "--out", str(tmp_path / "report")], cwd=REPO_ROOT, capture_output=True, text=True,
                            timeout=120)
    assert report.returncode == 0, report.stdout + report.stderr
    text = (tmp_path / "report" / "REPORT.md").read_text()
    assert "Devnet end to end" in text and str(fleet / "summary.json") in text, text[-3000:]


def test_a_terminated_fleet_stops_every_part_and_still_writes_its_run_folder(network: Network, tmp_path: Path):
    devnet, out = network.nodes[0].devnet, tmp_path / "stopped"
    parent = subprocess.Popen(
        [str(VENV_BIN / "qmemo"), "gen", "--genesis", str(devnet.genesis),
         "--accounts", str(devnet.path / "accounts.keys.json"), "--nodes", ",".join(n.url for n in network.nodes),
         "--generators", "2", "--tps", "100", "--duration", "30", "--warmup", "0", "--out", str(out),
         "--no-cache", "--quiet", "--live", str(out / "live.json")],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        def sending() -> bool:
            try:
                return orjson.loads((out / "live.json").read_bytes()).get("sent", 0) > 100
            except (OSError, orjson.JSONDecodeError):
                return False
        network.wait_until(sending, "the fleet sending", timeout=30)
        assert len(orjson.loads((out / "live.json").read_bytes())["generators"]) == 2
        parts = parts_running(out)
        assert len(parts) == 2, parts
        parent.terminate()
        output, _ = parent.communicate(timeout=30)
    finally:
        if parent.poll() is None:
            parent.kill()
    assert parent.returncode == 0, output + network.logs()
    assert parts_running(out) == []
    summary = orjson.loads((out / "summary.json").read_bytes())
    counts = summary["counts"]
    assert summary["interrupted"] is True and counts["planned"] == 3000 and counts["accounted"] == 3000, counts
    assert 100 < counts["sent"] < 3000 and counts["unsent"] > 0 and counts["lost"] == 0, counts
    assert orjson.loads((out / "live.json").read_bytes()) == {"running": False}


def parts_running(out: Path) -> list[int]:
    """The pids of processes started as parts of the fleet writing `out`."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--part" in cmdline and any(str(out).encode() in arg for arg in cmdline):
            pids.append(int(proc.name))
    return pids
