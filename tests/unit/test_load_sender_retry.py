"""The sender's rounds over the nodes (qmemo.load.sender): a batch no node answered in time
is tried again, each round waiting twice as long, until the request timeout - a busy node
past saturation answers late, and a dropped batch leaves its senders with nonce gaps."""

from __future__ import annotations

import asyncio

from aiohttp import web

from qmemo.load.latency import ACCEPTED, FAILED, Timings
from qmemo.load.sender import Batch, SendProgress, _NodeHealth, _post, _Sending
from qmemo.net.client import open_clients
from tests.unit.scripted_http import serve


async def slow_node(delay_s: float) -> tuple[web.AppRunner, str]:
    """A node that answers every POST /txs after `delay_s`, accepting one transaction."""
    async def txs(request: web.Request) -> web.Response:
        await request.read()
        await asyncio.sleep(delay_s)
        return web.json_response({"accepted": 1, "results": [{"id": "00", "status": "accepted"}]})

    app = web.Application()
    app.router.add_post("/txs", txs)
    return await serve(app)


async def post_once(urls: list[str], attempt_s: float, request_s: float) -> tuple[Timings, SendProgress]:
    timings, progress = Timings([0.0]), SendProgress(in_flight=1)
    timings.mark_sent(0, 0.0)
    async with open_clients(urls) as clients:
        await _post(Batch(0, 1, urls[0], b"x"),
                    _Sending(dict(zip(urls, clients)), timings, 0.0, progress, _NodeHealth(urls, 0.0), attempt_s,
                             request_s))
    return timings, progress


async def test_a_batch_every_node_answers_late_is_tried_again_with_longer_waits_until_answered():
    nodes = [await slow_node(0.5), await slow_node(0.5)]
    try:
        urls = [url for _, url in nodes]
        timings, progress = await post_once(urls, attempt_s=0.2, request_s=10)   # 0.2, 0.4 s: late; 0.8 s: answered
        assert timings.status[0] == ACCEPTED
        assert progress.node_failures == {urls[0]: 2, urls[1]: 2} and progress.failovers == 1
    finally:
        for runner, _ in nodes:
            await runner.cleanup()


async def test_a_batch_no_node_answers_within_the_request_timeout_fails():
    # Later than the whole request timeout (1 s), and no later: cleanup waits for the node's
    # last answer (its request sent ~0.7 s in), so a longer delay is only waited for.
    runner, url = await slow_node(1.5)
    try:
        timings, progress = await post_once([url], attempt_s=0.1, request_s=1.0)     # 0.1, 0.2, 0.4, then 0.3 s left
        assert timings.status[0] == FAILED and progress.node_failures[url] >= 3
    finally:
        await runner.cleanup()
