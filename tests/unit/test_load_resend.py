"""The generator's resend (`qmemo gen --resend-for`): a batch no node answered is tried
again, every node in turn, until the window closes - so a client whose nodes all died
for a moment loses nothing, as docs/api.md asks of it; without the window it fails at once."""

from __future__ import annotations

import asyncio

import orjson
from aiohttp import web

from qmemo.frames import decode_frames, encode_frames
from qmemo.load.latency import ACCEPTED, FAILED, REJECTED, Timings
from qmemo.load.sender import Batch, SendConfig, SendProgress, send_batches


def _node_down_for(first_requests: int) -> tuple[web.Application, list[int]]:
    """A node that answers 503 (not ready: try another) to its first requests, then accepts."""
    seen: list[int] = []

    async def txs(request: web.Request) -> web.Response:
        seen.append(1)
        if len(seen) <= first_requests:
            return web.json_response({"error": "not_ready", "detail": "starting"}, status=503)
        return web.json_response({"results": [{"status": "accepted"}, {"status": "accepted"}]})

    app = web.Application()
    app.router.add_post("/txs", txs)
    return app, seen


async def _send(aiohttp_server, resend_for_s: float, down_requests: int,
                request_timeout_s: float = 30.0) -> tuple[Timings, list[int]]:
    app, seen = _node_down_for(down_requests)
    server = await aiohttp_server(app)
    url = str(server.make_url("")).rstrip("/")
    timings = Timings([0.0, 0.0])
    config = SendConfig(resend_for_s=resend_for_s, attempt_timeout_s=1.0, request_timeout_s=request_timeout_s)
    await send_batches([Batch(0, 2, url, b"")], timings, config, start=0.0, progress=SendProgress(),
                       stop=asyncio.Event(), nodes=[url])
    return timings, seen


async def test_a_batch_no_node_answered_is_sent_again_within_the_window(aiohttp_server):
    timings, seen = await _send(aiohttp_server, resend_for_s=5.0, down_requests=2)
    assert len(seen) == 3                                    # two refusals, then the resend that landed
    assert list(timings.status) == [ACCEPTED, ACCEPTED]


async def test_without_a_window_the_batch_is_tried_until_the_request_timeout_then_fails(aiohttp_server):
    timings, seen = await _send(aiohttp_server, resend_for_s=0.0, down_requests=10_000, request_timeout_s=0.6)
    assert 2 <= len(seen) < 10_000                           # rounds within the timeout, then it gives up
    assert list(timings.status) == [FAILED, FAILED] and timings.reasons[0] == "not_ready"   # the 503's code


async def test_a_window_longer_than_the_request_timeout_extends_it(aiohttp_server):
    timings, seen = await _send(aiohttp_server, resend_for_s=5.0, down_requests=8, request_timeout_s=0.3)
    assert len(seen) == 9                                    # still tried after the 0.3 s timeout
    assert list(timings.status) == [ACCEPTED, ACCEPTED]


def _node_full_for(refusals: int) -> tuple[web.Application, list[list[bytes]]]:
    """A node whose held queue is full: it refuses the second transaction of each request
    `held_full` for its first `refusals` requests, and takes the rest."""
    bodies: list[list[bytes]] = []

    async def txs(request: web.Request) -> web.Response:
        frames = decode_frames(await request.read(), 100)
        bodies.append(frames)
        results = [{"status": "accepted"} for _ in frames]
        if len(bodies) <= refusals and len(frames) > 1:
            results[1] = {"status": "rejected", "code": "held_full", "detail": "the held queue is full"}
        return web.json_response({"results": results})

    app = web.Application()
    app.router.add_post("/txs", txs)
    return app, bodies


async def _send_refused(aiohttp_server, refusals: int, request_timeout_s: float) -> tuple[Timings, list, SendProgress]:
    app, bodies = _node_full_for(refusals)
    server = await aiohttp_server(app)
    url = str(server.make_url("")).rstrip("/")
    timings, progress = Timings([0.0, 0.0, 0.0]), SendProgress()
    body = encode_frames([b"tx-a", b"tx-b", b"tx-c"])
    await send_batches([Batch(0, 3, url, body)], timings, SendConfig(request_timeout_s=request_timeout_s),
                       start=0.0, progress=progress, stop=asyncio.Event(), nodes=[url])
    return timings, bodies, progress


async def test_a_transaction_refused_for_now_is_sent_again_alone_until_taken(aiohttp_server):
    timings, bodies, progress = await _send_refused(aiohttp_server, refusals=1, request_timeout_s=30.0)
    assert bodies == [[b"tx-a", b"tx-b", b"tx-c"], [b"tx-b"]]      # only the refused one, the same bytes
    assert list(timings.status) == [ACCEPTED, ACCEPTED, ACCEPTED] and not timings.reasons
    assert (progress.resends, progress.resend_txs, progress.answered) == (1, 1, 3)
    assert timings.accepted[1] > timings.accepted[0]                # taken on the resend, after its wait


async def test_a_refusal_that_lasts_past_the_window_is_the_final_answer(aiohttp_server):
    timings, bodies, progress = await _send_refused(aiohttp_server, refusals=10_000, request_timeout_s=0.3)
    assert len(bodies) == 1                       # the first wait (0.5 s) would end past the window
    assert list(timings.status) == [ACCEPTED, REJECTED, ACCEPTED] and timings.reasons == {1: "held_full"}
    assert progress.resends == 0


def _scripted_node(answers: dict[bytes, list[dict]]) -> tuple[web.Application, list[list[bytes]]]:
    """A node that answers each transaction (its bytes) with the next of its scripted
    results, and "accepted" once the script runs out."""
    bodies: list[list[bytes]] = []

    async def txs(request: web.Request) -> web.Response:
        frames = decode_frames(await request.read(), 100)
        bodies.append(frames)
        results = [answers[frame].pop(0) if answers.get(frame) else {"status": "accepted"} for frame in frames]
        return web.json_response({"results": results})

    app = web.Application()
    app.router.add_post("/txs", txs)
    return app, bodies


async def _run_scripted(aiohttp_server, answers, batches_frames, previous, max_in_flight=64):
    app, bodies = _scripted_node(answers)
    server = await aiohttp_server(app)
    url = str(server.make_url("")).rstrip("/")
    count = sum(len(frames) for frames in batches_frames)
    timings, progress = Timings([0.0] * count), SendProgress()
    batches, first = [], 0
    for frames in batches_frames:
        batches.append(Batch(first, first + len(frames), url, encode_frames(frames)))
        first += len(frames)
    await send_batches(batches, timings, SendConfig(max_in_flight=max_in_flight), start=0.0, progress=progress,
                       stop=asyncio.Event(), nodes=[url], previous=previous)
    return timings, bodies


GAP = {"status": "rejected", "code": "nonce_gap"}
FULL = {"status": "rejected", "code": "held_full"}


async def test_a_nonce_gap_behind_a_nonce_refused_for_good_is_final_at_once(aiohttp_server):
    # b is a's sender's next nonce; a is refused for good, so b's gap can never fill.
    answers = {b"a": [{"status": "rejected", "code": "bad_signature"}], b"b": [GAP]}
    timings, bodies = await _run_scripted(aiohttp_server, answers, [[b"a", b"b"]], previous=[-1, 0])
    assert bodies == [[b"a", b"b"]]                                  # not resent
    assert list(timings.status) == [REJECTED, REJECTED] and timings.reasons == {0: "bad_signature", 1: "nonce_gap"}


async def test_a_nonce_gap_behind_a_nonce_still_being_resent_is_resent_with_it(aiohttp_server):
    answers = {b"a": [FULL], b"b": [GAP]}
    timings, bodies = await _run_scripted(aiohttp_server, answers, [[b"a", b"b"]], previous=[-1, 0])
    assert bodies == [[b"a", b"b"], [b"a", b"b"]]                    # together, in nonce order
    assert list(timings.status) == [ACCEPTED, ACCEPTED] and not timings.reasons


async def test_a_batch_waiting_to_resend_gives_its_in_flight_slot_to_the_schedule(aiohttp_server):
    answers = {b"a": [FULL]}
    timings, bodies = await _run_scripted(aiohttp_server, answers, [[b"a"], [b"c"]], previous=[-1, -1],
                                          max_in_flight=1)
    assert bodies == [[b"a"], [b"c"], [b"a"]]                        # c left while a waited
    assert list(timings.status) == [ACCEPTED, ACCEPTED]
