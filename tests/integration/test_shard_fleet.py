"""`qmemo gen` on a sharded devnet as a fleet: 2 shards of 2 validators started by
`devnet.sh --no-load`, one generator process per shard (the default) with 30% of the
transfers cross-shard. The merged run folder holds the files and summary.json keys one
process writes; its counts and invariants are what the nodes of both shards say after
the run, read here through the API's client; the manifest names each part's shard."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from qmemo.crypto.verifier import load_any_genesis
from qmemo.load.run import read_metrics
from qmemo.net.client import open_clients
from tests.conftest import REPO_ROOT, VENV_BIN
from tests.integration.test_devnet import free_base_port, processes_mentioning, stop_times
from tests.integration.test_fleet import keys_of

pytestmark = pytest.mark.slow
SHARDS, NODES, TPS, DURATION_S = 2, 2, 40, 6


@pytest.fixture(scope="module")
def devnet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("shard-fleet")
    base = free_base_port(SHARDS * NODES)
    log = (tmp / "devnet.log").open("wb")
    # --duration: the devnet stops by itself even if this test cannot stop it.
    process = subprocess.Popen(
        ["bash", str(REPO_ROOT / "devnet.sh"), "--no-load", "--no-monitor", "--no-baseline", "--base-port", str(base),
         "--dir", str(tmp / "devnet"), "--runs", str(tmp / "runs"), "--accounts", "60", "--shards", str(SHARDS),
         "--nodes", str(NODES), "--block-ms", "500", "--duration", "150"],
        cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT)
    urls = [f"http://127.0.0.1:{base + i}" for i in range(SHARDS * NODES)]
    try:
        deadline = time.monotonic() + 60
        while not all(m is not None for m in asyncio.run(metrics_of(urls))):
            assert process.poll() is None, (tmp / "devnet.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the sharded devnet did not answer in 60 s"
            time.sleep(0.5)
        yield {"tmp": tmp, "urls": urls, "devnet": tmp / "devnet", "process": process}
    finally:
        if process.poll() is None:
            os.kill(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGKILL)
                process.wait()
        log.close()


async def metrics_of(urls: list[str]) -> list[Any]:
    async with open_clients(urls, timeout_s=2) as clients:
        return await read_metrics(clients)


async def balances_of(urls: list[str], addresses: list[bytes]) -> int:
    async with open_clients(urls[:1], timeout_s=10) as clients:
        return sum(account.balance for account in await clients[0].accounts(addresses))


def gen(devnet: dict[str, Any], out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(VENV_BIN / "qmemo"), "gen", "--devnet", str(devnet["devnet"]), "--nodes", ",".join(devnet["urls"]),
         "--cross-shard", "30", "--warmup", "0", "--out", str(out), "--no-cache", "--quiet", *extra],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"})
    logs = "".join(f"\n--- {p}\n{p.read_text()[-3000:]}" for p in sorted(out.glob("parts/*/gen.log")))
    assert done.returncode == 0, done.stdout + done.stderr + logs
    return done


def test_one_generator_per_shard_writes_the_run_folder_the_nodes_agree_with(devnet: dict[str, Any]):
    fleet, single = devnet["tmp"] / "fleet", devnet["tmp"] / "single"
    gen(devnet, fleet, "--tps", str(TPS), "--duration", str(DURATION_S), "--live", str(fleet / "live.json"))
    summary = orjson.loads((fleet / "summary.json").read_bytes())

    # What the nodes say now, before any other load: every shard's commits, credits, supply.
    urls = devnet["urls"]
    metrics = asyncio.run(metrics_of(urls))
    sharded = load_any_genesis(devnet["devnet"] / "genesis.json")
    supply = sum(asyncio.run(balances_of(urls[k * NODES:(k + 1) * NODES],
                                         [a for a, _ in view.balances] + [v.address for v in view.validators]))
                 for k, view in enumerate(sharded.views))
    planned = TPS * DURATION_S
    counts, cross, checks = summary["counts"], summary["cross_shard"], summary["invariants"]
    assert counts["planned"] == counts["accounted"] == counts["committed"] == planned, counts
    assert checks["supply_conserved"] and checks["credited_exactly_once"] and checks["settled"], checks
    assert checks["supply_before"] == checks["supply_after"] == supply and checks["in_flight"] == 0
    assert cross["planned"] > 0 and cross["planned"] == cross["committed"] == cross["credited"], cross
    for shard in summary["shards"]:
        k = shard["shard"]
        nodes = metrics[k * NODES:(k + 1) * NODES]
        assert shard["planned"] == shard["committed"] == planned // SHARDS
        assert {m.tx.committed for m in nodes} == {shard["committed"]}, (k, [m.tx for m in nodes])
        assert {m.receipts.credited for m in nodes} == {shard["credited_in"]}, (k, [m.receipts for m in nodes])
    assert sum(s["cross_planned"] for s in summary["shards"]) == cross["planned"]
    assert [s["credited_in"] for s in summary["shards"]] == [s["cross_planned"] for s in summary["shards"]][::-1]

    manifest = orjson.loads((fleet / "manifest.json").read_bytes())
    assert manifest["generators"] == SHARDS
    assert [(p["part"], p["shards"], p["planned"]) for p in manifest["parts"]] == \
        [(k, [k], planned // SHARDS) for k in range(SHARDS)]
    assert all(p["schedule_lag_p99_ms"] is not None for p in manifest["parts"])
    assert len((fleet / "transactions.csv").read_text().splitlines()) == planned + 1
    assert orjson.loads((fleet / "live.json").read_bytes()) == {"running": False}

    # One process for both shards: the same files and summary keys.
    gen(devnet, single, "--generators", "1", "--tps", "20", "--duration", "2")
    one = orjson.loads((single / "summary.json").read_bytes())
    assert one["invariants"]["credited_exactly_once"] and one["counts"]["committed"] == 40
    assert keys_of(summary) == keys_of(one)
    assert sorted(p.name for p in fleet.iterdir() if p.is_file() and p.name != "live.json") == \
        sorted(p.name for p in single.iterdir())
    assert "generators" not in orjson.loads((single / "manifest.json").read_bytes())
    assert processes_mentioning(str(fleet)) == []


def test_more_generators_than_shards_is_refused_before_anything_is_signed(devnet: dict[str, Any]):
    done = subprocess.run(
        [str(VENV_BIN / "qmemo"), "gen", "--devnet", str(devnet["devnet"]), "--nodes", ",".join(devnet["urls"]),
         "--generators", "3", "--out", str(devnet["tmp"] / "three"), "--quiet"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "whole shards" in done.stdout + done.stderr
    assert not (devnet["tmp"] / "three" / "parts").exists()


def test_stopping_the_devnet_signals_every_node_first_then_waits_for_them_together(devnet: dict[str, Any]):
    """Last in the module: it stops the module's devnet. A sharded node's stop waits seconds
    for its requests in flight; one after another, the nodes' stops added up."""
    process = devnet["process"]
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 143
    took_s = time.monotonic() - started
    log = (devnet["tmp"] / "devnet.log").read_text()
    assert "stopped everything" in log and "did not stop" not in log, log[-3000:]
    (run,) = (devnet["tmp"] / "runs").iterdir()
    stopping = stop_times(run)
    assert len(stopping) == SHARDS * NODES, stopping
    assert max(stopping.values()) - min(stopping.values()) < 1.5, stopping
    assert took_s < 10, took_s
    assert processes_mentioning(str(devnet["devnet"])) == []
