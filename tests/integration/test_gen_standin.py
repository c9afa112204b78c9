"""The stand-in nodes of `scripts/gen-cpu.sh` (qmemo.bench.gen_standin) answer the node
API's own documents: the typed client reads them as it reads a node's, so the generator
measured against them runs the code it runs against nodes."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
from pathlib import Path

from qmemo.api_schema import UNKNOWN
from qmemo.net.client import base_url, open_clients


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def _read_everything(url: str) -> None:
    async with open_clients([url]) as (client,):
        for _ in range(100):
            if (await client.health()).ready:
                break
            await asyncio.sleep(0.05)
        status = await client.status()
        for _ in range(200):                          # until a block is final: two cut
            if (await client.status()).final_height >= 1:
                break
            await asyncio.sleep(0.05)
        blocks = await client.blocks(1, 10)
        summaries = await client.blocks(1, 10, txs="none")
        accounts = await client.accounts([bytes(32), b"\x01" * 32])
        statuses = await client.tx_statuses([b"\x02" * 32])
        answer = await client.post_txs(b"")
    assert status.ready and status.block_interval_ms == 100
    assert blocks and all(block.tx_ids == () for block in blocks) and blocks[0].final
    assert [block.tx_ids for block in summaries] == [None] * len(summaries)
    assert [account.address for account in accounts] == [bytes(32), b"\x01" * 32]
    assert statuses[0].status == UNKNOWN
    assert answer.status == 200 and answer.counts().accepted == 0


def test_the_typed_client_reads_every_stand_in_answer(tmp_path: Path):
    (tmp_path / "workloads").mkdir()
    port = _free_port()
    log = tmp_path / "standin.log"
    process = subprocess.Popen([sys.executable, "-m", "qmemo.bench.gen_standin", "--ports", str(port),
                                "--devnet", str(tmp_path), "--block-interval", "0.1"],
                               stdout=log.open("wb"), stderr=subprocess.STDOUT)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                if process.poll() is not None:
                    raise AssertionError(log.read_text()) from None
                asyncio.run(asyncio.sleep(0.05))
        asyncio.run(_read_everything(base_url("127.0.0.1", port)))
    finally:
        process.terminate()
        process.wait(timeout=10)
