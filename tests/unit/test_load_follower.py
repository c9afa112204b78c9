"""The block follower against a scripted node: included when first seen in a block,
committed only once the block is final, and a replaced block's transactions wait for
the block that carries them now."""

from __future__ import annotations

import asyncio
import math

from aiohttp import web

import numpy as np

from qmemo.api_schema import BlockSummary
from qmemo.load.follower import FollowState, final_mask, follow_blocks, lost_reasons, plan_index
from qmemo.net.wire import block_summary_json
from qmemo.load.latency import ACCEPTED, Timings, summarize
from tests.unit.scripted_http import serve

A, B, C = b"\xaa" * 64, b"\xbb" * 64, b"\xcc" * 64


class ScriptedNode:
    """Serves `/blocks` from `chain` (a list of (hash, tx ids)), final up to `final_height`."""

    def __init__(self) -> None:
        self.chain: list[tuple[str, list[bytes]]] = []
        self.final_height = 0

    async def blocks(self, request: web.Request) -> web.Response:
        start, limit = int(request.query["from"]), int(request.query["limit"])
        with_ids = request.query["txs"] == "ids"
        out = [block_summary_json(BlockSummary(height, hash_.encode().ljust(64, b"\0"), bytes(64), 0, 0, None, len(ids),
                                               bytes(64), 1, height <= self.final_height,
                                               tuple(ids) if with_ids else None))
               for height, (hash_, ids) in enumerate(self.chain, start=1) if start <= height < start + limit]
        return web.json_response({"blocks": out})


async def _until(predicate, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


async def test_a_transaction_is_committed_only_once_final_and_follows_a_fork_switch():
    node = ScriptedNode()
    app = web.Application()
    app.router.add_get("/blocks", node.blocks)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
    timings = Timings([0.0, 0.0, 0.0])
    for index in range(3):
        timings.mark_sent(index, 0.0)
        timings.mark_answer(index, 0.0, ACCEPTED)
    state, stop = FollowState(next_height=1), asyncio.Event()
    follower = asyncio.create_task(follow_blocks([url], state, plan_index([A, B, C]), timings, start=0.0, stop=stop,
                                                 poll_s=0.01))
    try:
        node.chain = [("h1", [A]), ("h2", [B])]
        await _until(lambda: state.included_seen == 2)
        assert not math.isnan(timings.included[0]) and math.isnan(timings.committed[0])   # in a block, not final
        assert not final_mask(timings).any()
        node.chain[1] = ("h2-other", [C])              # a fork switch replaces block 2: B is back in the pool
        node.chain.append(("h3", [B]))
        node.final_height = 3
        await _until(lambda: final_mask(timings).all())
        assert state.branch_switches == 1 and state.committed_seen == 3
        assert all(not math.isnan(timings.committed[i]) for i in range(3))
        assert all(timings.included[i] <= timings.committed[i] for i in range(3))
    finally:
        stop.set()
        await follower
        await runner.cleanup()
    run = summarize(timings, warmup_s=0.0)
    assert run.counts.committed == 3 and run.counts.included == 3 and run.counts.accounted == 3
    assert run.intended_to_included.count == 3 and run.included_to_committed.count == 3


async def test_a_block_is_marked_in_bulk_once_per_transaction_and_only_for_ours():
    """A block's ids are looked up and marked at once (numpy over the timings' arrays): only
    planned ones, each included and committed once, a later sighting changing nothing; the
    block's bytes are those of ours in it."""
    from qmemo.load.follower import _see

    ids = [bytes([i]) * 64 for i in range(6)]
    timings = Timings([0.5 * i for i in range(6)])
    state = FollowState(next_height=1, tx_bytes=np.arange(100, 106, dtype=np.int64))
    index_of = plan_index(ids)
    stranger = b"\xee" * 64

    def block(height: int, final: bool, tx_ids: tuple[bytes, ...]) -> BlockSummary:
        return BlockSummary(height, bytes([height]) * 64, bytes(64), 0, 0, None, len(tx_ids), bytes(64), 1, final, tx_ids)

    _see(block(1, True, (ids[4], stranger, ids[1])), state, index_of, timings, 10.0)
    _see(block(2, False, (ids[1], ids[2])), state, index_of, timings, 12.0)
    assert (state.included_seen, state.committed_seen) == (3, 2)
    assert [timings.included[i] for i in (1, 2, 4)] == [10.0, 12.0, 10.0] and math.isnan(timings.included[0])
    assert final_mask(timings).tolist() == [False, True, False, False, True, False]
    assert state.blocks[1].tx_count == 3 and state.blocks[1].ours == 2 and state.blocks[1].our_tx_bytes == 101 + 104
    assert sorted(state.recent[0][1].tolist()) == [10.0 - 2.0, 10.0 - 0.5]      # intended -> committed of 4 and 1
    assert state.unfinal[0][0] == 2 and state.unfinal[0][2].tolist() == [1, 2]


async def _status_nodes(answers: list[dict[str, dict]], asked: list[list[int]]) -> tuple[list, list[str]]:
    """Scripted nodes answering `POST /txs/status` from `answers` (id hex -> status
    document; anything else: unknown); each request's size goes to `asked[node]`."""
    runners, urls = [], []
    for index, known in enumerate(answers):
        async def statuses(request: web.Request, known=known, index=index) -> web.Response:
            ids = (await request.json())["ids"]
            asked[index].append(len(ids))
            return web.json_response({"statuses": [{"id": tx_id, **known.get(tx_id, {"status": "unknown"})}
                                                   for tx_id in ids]})
        app = web.Application()
        app.router.add_post("/txs/status", statuses)
        runner, url = await serve(app)
        runners.append(runner)
        urls.append(url)
    return runners, urls


async def test_every_lost_transaction_gets_the_reason_the_first_node_knowing_it_gives():
    answers = [{A.hex(): {"status": "evicted", "reason": "nonce_gap_timeout"}},           # node 1
               {A.hex(): {"status": "pending"}, B.hex(): {"status": "committed", "final": True}}]  # node 2
    asked: list[list[int]] = [[], []]
    runners, urls = await _status_nodes(answers, asked)
    try:
        final: list[bytes] = []
        reasons = await lost_reasons(urls, [A, B, C], final=final)
        assert reasons == {"evicted: nonce_gap_timeout": 1, f"final on {urls[1]}": 1, "unknown to every node": 1}
        assert final == [B]                 # committed late: the caller counts it committed, not lost
        assert asked == [[3], [2]]          # one batch each; the second node only for what the first did not know
        assert await lost_reasons(urls, [A, B], budget_s=0) == {"not asked (time budget)": 2}
    finally:
        for runner in runners:
            await runner.cleanup()


async def test_lost_reasons_are_asked_in_batches_and_a_silent_node_passes_its_ids_on():
    ids = [bytes([i % 256, i // 256]) * 32 for i in range(2_500)]
    answers = [{}, {tx_id.hex(): {"status": "held"} for tx_id in ids[:2_000]}]
    asked: list[list[int]] = [[], []]
    runners, urls = await _status_nodes(answers, asked)
    try:
        reasons = await lost_reasons(["http://127.0.0.1:9", *urls], ids, batch_ids=1_000)   # port 9: nobody
        assert reasons == {"held": 2_000, "unknown to every node": 500}
        assert sum(reasons.values()) == len(ids)
        assert sorted(asked[0]) == [500, 1_000, 1_000] and sorted(asked[1]) == [500, 1_000, 1_000]
    finally:
        for runner in runners:
            await runner.cleanup()


async def test_a_node_without_the_batch_route_is_asked_one_id_at_a_time():
    async def tx(request: web.Request) -> web.Response:
        known = {A.hex(): {"status": "evicted", "reason": "nonce_gap_timeout"}}
        return web.json_response({"id": request.match_info["tx_id"],
                                  **known.get(request.match_info["tx_id"], {"status": "unknown"})})
    app = web.Application()
    app.router.add_get("/tx/{tx_id}", tx)          # no POST /txs/status: 404
    runner, url = await serve(app)
    try:
        assert await lost_reasons([url], [A, B]) == {"evicted: nonce_gap_timeout": 1, "unknown to every node": 1}
    finally:
        await runner.cleanup()


async def test_one_id_at_a_time_stops_asking_when_the_time_budget_runs_out():
    async def slow_tx(request: web.Request) -> web.Response:
        await asyncio.sleep(0.05)
        return web.json_response({"id": request.match_info["tx_id"], "status": "pending"})
    app = web.Application()
    app.router.add_get("/tx/{tx_id}", slow_tx)      # no POST /txs/status: 404
    runner, url = await serve(app)
    ids = [bytes([i]) * 64 for i in range(200)]
    try:
        reasons = await lost_reasons([url], ids, budget_s=0.3)
        # 16 GETs at a time, 50 ms each: about a hundred fit in 0.3 s, not all 200
        assert reasons.get("not asked (time budget)", 0) > 0 and reasons.get("pending", 0) > 0
        assert sum(reasons.values()) == len(ids)
    finally:
        await runner.cleanup()
