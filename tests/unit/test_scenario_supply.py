"""The supply watch (qmemo.scenario.supply) against a scripted node: a read that a block
crossed is not judged, the end is tried again until one is consistent, and a consistent
read off the genesis total is a violation written at once."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import orjson

from qmemo.net.client import open_clients
from qmemo.records import to_json
from qmemo.scenario import supply
from qmemo.scenario.supply import END_TRIES, SupplyWatch, sample
from tests.integration.nodes import make_devnet
from tests.unit.api_documents import node_status


def _sample(url: str, addresses: list[bytes]) -> dict:
    async def one() -> dict:
        async with open_clients([url]) as (client,):
            return await sample(client, addresses)
    return asyncio.run(one())


class ScriptedNode(BaseHTTPRequestHandler):
    """/status answers the next of `heights` (the last one for good); /accounts gives `balance` each."""

    heights: list[int] = [0]
    balance = 0

    def do_GET(self) -> None:
        heights = type(self).heights
        height = heights.pop(0) if len(heights) > 1 else heights[0]
        self._answer(to_json(node_status(height=height, tip_hash=bytes([height]) * 64)))

    def do_POST(self) -> None:
        addresses = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["addresses"]
        self._answer({"accounts": [{"address": a, "balance": type(self).balance, "nonce": 0, "pending_nonce": 0}
                                   for a in addresses]})

    def _answer(self, document: dict) -> None:
        body = orjson.dumps(document)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _serve() -> tuple[ThreadingHTTPServer, str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), ScriptedNode)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def test_a_read_a_block_crossed_is_not_consistent_and_the_end_is_tried_again(tmp_path: Path, monkeypatch):
    devnet = make_devnet(tmp_path / "devnet", validators=3, accounts=4, balance=25)
    server, url = _serve()
    try:
        ScriptedNode.heights, ScriptedNode.balance = [4, 5], 0
        assert _sample(url, [b"\xaa" * 32])["consistent"] is True         # one request holds every account: one state
        monkeypatch.setattr(supply, "ACCOUNTS_PER_REQUEST", 1)
        ScriptedNode.heights = [4, 5]
        assert _sample(url, [b"\xaa" * 32, b"\xbb" * 32])["consistent"] is False  # two requests, a block between
        watch = SupplyWatch({"node-0": url}, devnet.genesis, tmp_path / "run", every_s=3600)
        assert watch.expected == 100 and len(watch.addresses) == 4 + 3    # accounts and validators' fee accounts
        ScriptedNode.heights = [5, 6, 6]                                    # the first try is crossed, the second not
        ScriptedNode.balance = 100 // len(watch.addresses) + 1            # 7 x 15 = 105: a coin was made
        watch.sample_all(at_end=True)
        watch.stop()
        lines = [orjson.loads(line) for line in (tmp_path / "run" / "chain" / "supply.jsonl").read_bytes().splitlines()]
        assert [line["consistent"] for line in lines] == [False, True] and len(lines) < END_TRIES
        assert lines[-1]["at_end"] and lines[-1]["supply"] == 105 and lines[-1]["expected"] == 100
        violations = (tmp_path / "run" / "chain" / "violations.jsonl").read_bytes().splitlines()
        assert [orjson.loads(v)["what"] for v in violations] == ["supply changed"]
    finally:
        server.shutdown()
