"""Unknown outcomes (qmemo.load.sender): a try whose answer was lost - the connection closed
under it, a 5xx other than 503 - may have been admitted, so the same bytes go to another
node (or the same one, back); the answer that resolves it is counted once, and the summary
says how each such transaction ended. A refused connection is not one: nothing left."""

from __future__ import annotations

import asyncio
import socket

from aiohttp import web

from qmemo.frames import decode_frames, encode_frames
from qmemo.load.latency import ACCEPTED, DUPLICATE, FAILED, REJECTED, Timings
from qmemo.load.sender import Batch, SendConfig, SendProgress, send_batches
from qmemo.load.summary import RESOLVED_ACCEPTED, RESOLVED_DUPLICATE, RESOLVED_UNANSWERED, unknown_resolutions
from tests.unit.scripted_http import serve

BODY = encode_frames([b"tx-a", b"tx-b"])


def _node(first_answers: list[str], admitted: set[bytes], bodies: list[bytes]) -> web.Application:
    """A node that admits what it reads, then answers its first requests as `first_answers`
    says ("close": the connection closes before any answer; "500": internal error; "503":
    not ready, nothing admitted), and every later one per transaction: "duplicate" for
    what it admitted before, else "accepted"."""
    async def txs(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        bodies.append(body)
        script = first_answers.pop(0) if first_answers else "answer"
        frames = decode_frames(body, 100)
        if script == "503":
            return web.json_response({"error": "not_ready", "detail": "starting"}, status=503)
        results = [{"status": "duplicate" if frame in admitted else "accepted"} for frame in frames]
        admitted.update(frames)
        if script == "close":
            request.transport.close()           # admitted, then the answer is lost
            await asyncio.sleep(1)
        if script == "500":
            return web.json_response({"error": "internal", "detail": "internal error"}, status=500)
        return web.json_response({"results": results})

    app = web.Application()
    app.router.add_post("/txs", txs)
    return app


async def _send(scripts: list[list[str]], *, request_timeout_s: float = 10.0,
                refused_first: bool = False) -> tuple[Timings, SendProgress, list[list[bytes]]]:
    """Send one two-transaction batch to the first of `len(scripts)` scripted nodes (behind a
    port nothing listens on, if `refused_first`), failing over among them."""
    admitted: set[bytes] = set()       # one chain: what one node admitted, the others know (relay)
    bodies: list[list[bytes]] = [[] for _ in scripts]
    runners, urls = [], []
    for script, seen in zip(scripts, bodies):
        runner, url = await serve(_node(script, admitted, seen))
        runners.append(runner)
        urls.append(url)
    if refused_first:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            urls.insert(0, f"http://127.0.0.1:{probe.getsockname()[1]}")     # closed again: refused
    try:
        timings, progress = Timings([0.0, 0.0]), SendProgress()
        config = SendConfig(attempt_timeout_s=0.5, request_timeout_s=request_timeout_s, down_for_s=0.0)
        await send_batches([Batch(0, 2, urls[0], BODY)], timings, config, start=0.0, progress=progress,
                           stop=asyncio.Event(), nodes=urls)
        return timings, progress, bodies
    finally:
        for runner in runners:
            await runner.cleanup()


async def test_an_answer_lost_after_admission_is_resent_to_another_node_and_counted_once_as_duplicate():
    timings, progress, bodies = await _send([["close"], []])
    assert bodies == [[BODY], [BODY]]                          # the same bytes, to the next node
    assert list(timings.status) == [DUPLICATE, DUPLICATE] and not timings.reasons
    assert progress.outcome_unknown == bytearray([1, 1]) and progress.unknown_resends == 1
    assert unknown_resolutions(progress.outcome_unknown, timings) == {RESOLVED_DUPLICATE: 2}


async def test_a_500_is_an_unknown_outcome_resent_not_a_final_failure():
    # The node failed while handling the batch (500 `internal`): a client cannot tell whether
    # it was admitted. Before, the generator marked it failed and its senders' later nonces
    # waited behind the gap for good.
    timings, progress, bodies = await _send([["500"]])
    assert bodies == [[BODY, BODY]]                            # the same node, once more
    assert list(timings.status) == [DUPLICATE, DUPLICATE]
    assert progress.outcome_unknown.count(1) == 2


async def test_a_503_says_nothing_was_taken_so_the_resend_is_not_an_unknown_outcome():
    timings, progress, bodies = await _send([["503"], []])
    assert list(timings.status) == [ACCEPTED, ACCEPTED]
    assert progress.outcome_unknown.count(1) == 0 and progress.failovers == 1


async def test_a_refused_connection_is_a_failover_not_an_unknown_outcome():
    timings, progress, bodies = await _send([[]], refused_first=True)
    assert bodies == [[BODY]] and list(timings.status) == [ACCEPTED, ACCEPTED]
    assert progress.outcome_unknown.count(1) == 0 and progress.failovers == 1


async def test_an_unknown_outcome_never_answered_in_the_window_is_failed_and_said_so():
    timings, progress, bodies = await _send([["500"] * 1000], request_timeout_s=0.4)
    assert list(timings.status) == [FAILED, FAILED] and timings.reasons[0] == "internal"
    assert unknown_resolutions(progress.outcome_unknown, timings) == {RESOLVED_UNANSWERED: 2}


def test_resolutions_name_each_ending_and_add_up_to_the_flagged():
    timings = Timings([0.0] * 6)
    for i, status in enumerate((ACCEPTED, DUPLICATE, REJECTED, FAILED, FAILED, ACCEPTED)):
        timings.mark_answer(i, 1.0, status, "nonce_gap" if status == REJECTED else None)
    timings.mark_committed(4, 2.0)               # never answered, but a block carried it
    flags = bytearray([1, 1, 1, 1, 1, 0])         # the last was never in doubt
    assert unknown_resolutions(flags, timings) == {
        RESOLVED_ACCEPTED: 1, RESOLVED_DUPLICATE: 1, "rejected: nonce_gap": 1, RESOLVED_UNANSWERED: 1,
        RESOLVED_UNANSWERED + ", final in the chain": 1}
