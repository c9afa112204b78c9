"""The agreement check against real nodes: three validators on loopback agree on every
final block and made no branch switch; a node that is not there is named, not a crash;
a load run's summary.json and each sweep stage's row carry the verdict."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from qmemo.load.agreement import check_agreement
from tests.conftest import REPO_ROOT, VENV_BIN
from tests.integration.nodes import Network, free_port, make_devnet

FINAL_BLOCKS = 4


@pytest.fixture(scope="module")
def network(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Network]:
    root = tmp_path_factory.mktemp("agreement")
    devnet = make_devnet(root / "devnet", accounts=12)
    with Network(devnet, root) as net:
        net.start()
        net.wait_until(lambda: all((node.try_get("/status") or {}).get("final_height", 0) >= FINAL_BLOCKS
                                   for node in net.nodes), f"{FINAL_BLOCKS} final blocks on every node", timeout=20)
        yield net


def test_three_nodes_agree_on_their_final_blocks_and_switched_no_branch(network: Network):
    urls = [node.url for node in network.nodes]
    agreement = asyncio.run(check_agreement(urls))
    assert agreement.agree, agreement
    assert agreement.nodes == tuple(urls) and agreement.unanswered == ()
    assert agreement.from_height == 1 and agreement.to_height >= FINAL_BLOCKS
    assert agreement.reorgs == {url: 0 for url in urls} and agreement.reorgs_total == 0

    later = asyncio.run(check_agreement(urls, from_height=3))
    assert later.agree and later.from_height == 3 and later.to_height >= agreement.to_height

    absent = f"http://127.0.0.1:{free_port()}"       # nothing listens there
    partial = asyncio.run(check_agreement([*urls, absent]))
    assert partial.unanswered == (absent,) and partial.nodes == tuple(urls)
    assert not partial.agree and partial.first_disagreement is None


def test_a_sweeps_stages_each_compare_the_heights_after_the_last_stages(network: Network, tmp_path: Path):
    devnet = network.nodes[0].devnet
    out = tmp_path / "gen"
    done = subprocess.run(
        [str(VENV_BIN / "qmemo"), "gen", "--genesis", str(devnet.genesis),
         "--accounts", str(devnet.path / "accounts.keys.json"), "--nodes", ",".join(n.url for n in network.nodes),
         "--sweep", "10:2:20", "--stage", "2", "--warmup", "0", "--out", str(out), "--no-cache", "--quiet"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stdout + done.stderr + network.logs()
    rows = orjson.loads((out / "sweep.json").read_bytes())["rows"]
    assert [row["target_tps"] for row in rows] == [10, 20], rows
    agreements = [orjson.loads((Path(row["run"]) / "summary.json").read_bytes())["agreement"] for row in rows]
    assert [(row["agree"], row["reorgs"]) for row in rows] == [(True, 0), (True, 0)], agreements
    first, second = agreements
    assert first["from_height"] == 1 and first["to_height"] >= FINAL_BLOCKS and first["reorgs_since"] == "run start"
    assert second["from_height"] == first["to_height"] + 1 and second["to_height"] >= second["from_height"]
    assert "agree" in done.stdout and "switches" in done.stdout      # the table's headers, wrapped at 120 columns
