"""Stand-in nodes for measuring the load generator alone: `python -m qmemo.bench.gen_standin`.

The generator's CPU per offered transaction (`generator_cpu_us_per_tx` in its summary)
matters most at rates the devnet reaches only on a quiet machine, and a run against real
nodes also measures what the nodes make it do (resends when they fall behind). These
stand-ins answer the part of the node API the generator uses - `GET /status`, `/health`,
`POST /accounts` (every account at nonce 0), `POST /txs` (every transaction accepted,
answered as a node answers), `GET /blocks?txs=ids|none` (a block every block interval
with what arrived, final once the next one exists), `POST /txs/status` - and do no
verifying, storing or relaying. They are never a node: nothing here checks a transaction.

A transaction's id is not computed (that would be a node's decode); it is looked up from
the generator's own workload cache (`<devnet>/workloads/*.bin`, qmemo.load.workload),
keyed by the encoding's last 32 bytes (inside its signature), re-read when a key is new.
`scripts/gen-cpu.sh` starts them, signs the plan, runs `qmemo gen` at each rate and prints
the generator's summary line.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from pathlib import Path

import orjson
import uvloop
from aiohttp import web

from qmemo import __version__
from qmemo.api_schema import STATUS_SCHEMA, UNKNOWN, AccountState, BlockSummary, NodeStatus, TxStatus
from qmemo.frames import decode_frames
from qmemo.load.workload import _CACHE_MAGIC, _RECORD
from qmemo.net.wire import block_summary_json, health_json, tx_status_json
from qmemo.records import to_json

KEY_BYTES = 32          # the tail of a signature: unique per transaction in a plan


class StandIn:
    """One chain shared by every stand-in port: the ids of what arrived, cut into blocks."""

    def __init__(self, workloads: Path, block_interval_s: float) -> None:
        self.workloads = workloads
        self.block_interval_s = block_interval_s
        self.ids: dict[bytes, str] = {}
        self.read_files: set[Path] = set()
        self.arrived: list[str] = []
        self.blocks: list[list[str]] = []
        self.started = time.monotonic()

    def _read_workloads(self) -> None:
        for path in sorted(self.workloads.glob("*.bin")):
            if path in self.read_files:
                continue
            data = path.read_bytes()
            if not data.startswith(_CACHE_MAGIC):
                continue
            offset = len(_CACHE_MAGIC)
            while offset + _RECORD.size <= len(data):
                tx_id, length = _RECORD.unpack_from(data, offset)
                offset += _RECORD.size
                self.ids[data[offset + length - KEY_BYTES:offset + length]] = tx_id.hex()
                offset += length
            self.read_files.add(path)

    def id_of(self, encoding: bytes) -> str:
        key = encoding[-KEY_BYTES:]
        if key not in self.ids:
            self._read_workloads()
        return self.ids[key]

    async def cut_blocks(self) -> None:
        while True:
            await asyncio.sleep(self.block_interval_s)
            self.blocks.append(self.arrived)
            self.arrived = []

    # --- the routes: the node API's own documents (qmemo.api_schema, qmemo.net.wire) -------

    def _hash(self, height: int) -> bytes:
        return height.to_bytes(64, "big")

    async def status(self, request: web.Request) -> web.Response:
        height = len(self.blocks)
        status = NodeStatus(schema=STATUS_SCHEMA, node=f"stand-in:{request.url.port}", version=__version__,
                            chain_id=0, genesis_hash=self._hash(0), height=height, tip_hash=self._hash(height),
                            tip_age_s=0.0, final_height=max(0, height - 1), mempool=0, mempool_held=0,
                            validator=None, scheme="stand-in", block_interval_ms=round(self.block_interval_s * 1e3),
                            peers=(), uptime_s=time.monotonic() - self.started, ready=True)
        return web.json_response(to_json(status))

    async def health(self, request: web.Request) -> web.Response:
        return web.json_response(health_json(True, f"stand-in:{request.url.port}"))

    async def accounts(self, request: web.Request) -> web.Response:
        addresses = orjson.loads(await request.read())["addresses"]
        return web.json_response(to_json({"accounts": [AccountState(bytes.fromhex(a), 10**12, 0, 0)
                                                       for a in addresses]}))

    async def txs(self, request: web.Request) -> web.Response:
        frames = decode_frames(await request.read(), 1 << 20, "transaction")
        ids = [self.id_of(frame) for frame in frames]
        self.arrived.extend(ids)
        body = orjson.dumps({"results": [{"id": tx_id, "status": "accepted"} for tx_id in ids],
                             "accepted": len(ids), "duplicate": 0, "rejected": 0})
        return web.Response(body=body, content_type="application/json")

    async def get_blocks(self, request: web.Request) -> web.Response:
        start, limit = int(request.query["from"]), int(request.query.get("limit", "20"))
        with_ids = request.query.get("txs", "ids") == "ids"
        tip = len(self.blocks)
        out = []
        for height in range(max(1, start), min(tip, start + limit - 1) + 1):
            ids = self.blocks[height - 1]
            summary = BlockSummary(height, self._hash(height), self._hash(height - 1), 0, 0, None, len(ids),
                                   bytes(64), tip - height + 1, height < tip)
            document = block_summary_json(summary)
            if with_ids:
                document["tx_ids"] = ids       # kept as hex: no conversion per request
            out.append(document)
        return web.Response(body=orjson.dumps({"blocks": out}), content_type="application/json")

    async def tx_statuses(self, request: web.Request) -> web.Response:
        ids = orjson.loads(await request.read())["ids"]
        return web.json_response({"statuses": [tx_status_json(TxStatus(bytes.fromhex(tx_id), UNKNOWN))
                                                for tx_id in ids]})


async def serve(ports: list[int], workloads: Path, block_interval_s: float) -> None:
    standin = StandIn(workloads, block_interval_s)
    app = web.Application(client_max_size=64 << 20)
    app.add_routes([web.get("/status", standin.status), web.get("/health", standin.health),
                    web.post("/accounts", standin.accounts), web.post("/txs", standin.txs),
                    web.get("/blocks", standin.get_blocks), web.post("/txs/status", standin.tx_statuses)])
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    for port in ports:
        await web.TCPSite(runner, "127.0.0.1", port).start()
    print(f"stand-in nodes on {', '.join(map(str, ports))} since {time.strftime('%H:%M:%S')}", flush=True)
    await standin.cut_blocks()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ports", required=True, help="comma-separated ports on 127.0.0.1")
    parser.add_argument("--devnet", type=Path, required=True, help="the devnet whose workloads/ the generator signs into")
    parser.add_argument("--block-interval", type=float, default=2.0, help="seconds between blocks (default 2)")
    args = parser.parse_args()
    uvloop.run(serve([int(p) for p in args.ports.split(",")], args.devnet / "workloads", args.block_interval))


if __name__ == "__main__":
    main()
