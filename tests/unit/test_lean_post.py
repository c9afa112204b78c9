"""The generator's lean POST (qmemo.net.lean_post) against real servers on loopback: the
node's own server kind (aiohttp) for the ordinary answers and connection reuse, and a raw
asyncio server for answers aiohttp would never send (split, closed early, chunked)."""

from __future__ import annotations

import asyncio
import socket

import pytest
from aiohttp import web

from qmemo.errors import NodeUnreachable
from qmemo.net.lean_post import MAX_HEAD_BYTES, LeanPosts, _parse_head


async def _aiohttp_node(aiohttp_server, seen: list[tuple[int, bytes]]):
    """A node's kind of server: each request's connection (the client's port) and body go to `seen`."""
    async def txs(request: web.Request) -> web.Response:
        body = await request.read()
        seen.append((request.transport.get_extra_info("peername")[1], body))   # the client's port: its connection
        if body == b"refuse":
            return web.json_response({"error": "malformed", "detail": "no"}, status=400)
        return web.json_response({"accepted": len(body)})

    app = web.Application()
    app.router.add_post("/txs", txs)
    return await aiohttp_server(app)


async def test_answers_come_back_whole_and_one_connection_carries_the_requests_in_turn(aiohttp_server):
    seen: list[tuple[int, bytes]] = []
    server = await _aiohttp_node(aiohttp_server, seen)
    posts = LeanPosts(4)
    node = posts.node(f"http://127.0.0.1:{server.port}")
    big = bytes(range(256)) * 4000          # ~1 MB: written over many socket writes
    answers = [await node.post_txs(body, timeout_s=5) for body in (b"abc", big, b"refuse")]
    posts.close()
    assert [a.status for a in answers] == [200, 200, 400]
    assert answers[0].json() == {"accepted": 3} and answers[1].json() == {"accepted": len(big)}
    assert answers[2].error() == "malformed"
    assert [body for _, body in seen] == [b"abc", big, b"refuse"]
    assert len({port for port, _ in seen}) == 1      # kept alive, reused


async def test_requests_in_flight_at_once_each_get_their_own_answer(aiohttp_server):
    seen: list[tuple[int, bytes]] = []
    server = await _aiohttp_node(aiohttp_server, seen)
    posts = LeanPosts(3)
    node = posts.node(f"http://127.0.0.1:{server.port}")
    bodies = [bytes([i]) * (i + 1) for i in range(12)]
    answers = await asyncio.gather(*(node.post_txs(body, timeout_s=5) for body in bodies))
    posts.close()
    assert [a.json()["accepted"] for a in answers] == [len(b) for b in bodies]
    assert len({port for port, _ in seen}) <= 3      # never more connections than allowed


async def test_a_refused_connection_says_the_request_never_left():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]         # bound, not listening: connections are refused
        posts = LeanPosts(1)
        with pytest.raises(NodeUnreachable) as refused:
            await posts.node(f"http://127.0.0.1:{port}").post_txs(b"x", timeout_s=2)
    assert refused.value.request_left is False and refused.value.transport == "ConnectionRefusedError"


async def _raw_node(reply, ended: list[str] | None = None):
    """A server that reads a request's head and body, then lets `reply(writer)` answer;
    "client closed" goes to `ended` when the client closes a connection first."""
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
                if not await reply(writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            if ended is not None:
                ended.append("client closed")
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def _two_posts(reply):
    """Two posts in turn through one connection slot to a `_raw_node(reply)`: their answers."""
    server, port = await _raw_node(reply)
    async with server:
        posts = LeanPosts(1)
        node = posts.node(f"http://127.0.0.1:{port}")
        first = await node.post_txs(b"x", timeout_s=5)
        second = await node.post_txs(b"y", timeout_s=5)
        posts.close()
    return first, second


async def test_an_answer_arriving_in_pieces_is_put_together():
    async def reply(writer):
        for piece in (b"HTTP/1.1 200 OK\r\nContent-Le", b"ngth: 11\r\n\r\nhello", b" world"):
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(0.01)
        return True

    server, port = await _raw_node(reply)
    async with server:
        posts = LeanPosts(1)
        answer = await posts.node(f"http://127.0.0.1:{port}").post_txs(b"x", timeout_s=5)
        posts.close()
    assert (answer.status, answer.body) == (200, b"hello world")


async def test_an_answer_without_a_length_runs_to_the_close_and_the_connection_is_not_reused():
    async def reply(writer):
        writer.write(b"HTTP/1.1 503 Service Unavailable\r\n\r\n{\"error\": \"not_ready\"}")
        await writer.drain()
        return False

    first, second = await _two_posts(reply)
    assert first.status == second.status == 503 and first.error() == "not_ready"


async def test_a_connection_closed_before_the_answer_leaves_the_outcome_unknown():
    async def reply(writer):
        return False                          # the request was read, no answer

    server, port = await _raw_node(reply)
    async with server:
        posts = LeanPosts(1)
        with pytest.raises(NodeUnreachable) as lost:
            await posts.node(f"http://127.0.0.1:{port}").post_txs(b"x", timeout_s=5)
    assert lost.value.request_left is True and lost.value.transport == "ConnectionResetError"


async def test_no_answer_in_time_is_unknown_and_the_late_answer_never_reaches_the_next_request():
    answers = iter((b"late", b"next"))

    async def reply(writer):
        body = next(answers)
        if body == b"late":
            await asyncio.sleep(0.5)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
        return True

    server, port = await _raw_node(reply)
    async with server:
        posts = LeanPosts(1)
        node = posts.node(f"http://127.0.0.1:{port}")
        with pytest.raises(NodeUnreachable) as timed_out:
            await node.post_txs(b"x", timeout_s=0.2)
        assert timed_out.value.request_left is True and timed_out.value.transport == "TimeoutError"
        answer = await node.post_txs(b"y", timeout_s=5)      # on a new connection
        posts.close()
    assert answer.body == b"next"


async def test_a_node_that_closed_an_idle_connection_is_reached_on_a_new_one(aiohttp_server):
    seen: list[tuple[int, bytes]] = []
    server = await _aiohttp_node(aiohttp_server, seen)
    posts = LeanPosts(1)
    node = posts.node(f"http://127.0.0.1:{server.port}")
    assert (await node.post_txs(b"a", timeout_s=5)).status == 200
    for protocol in list(server.runner.server.connections):   # the node drops its kept-alive connections
        protocol.force_close()
    await asyncio.sleep(0.1)
    assert (await node.post_txs(b"b", timeout_s=5)).status == 200
    posts.close()
    assert len({port for port, _ in seen}) == 2


async def test_bytes_past_an_answer_are_never_read_as_the_next_answer():
    async def reply(writer):
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst"
                     b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale")
        await writer.drain()
        return True

    first, second = await _two_posts(reply)      # the second on a new connection: its own answer
    assert first.body == second.body == b"first"


async def test_a_connection_whose_request_is_cancelled_or_outlives_close_is_closed_not_kept():
    release = asyncio.Event()
    ended: list[str] = []

    async def reply(writer):
        await release.wait()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        return True

    server, port = await _raw_node(reply, ended)
    async with server:
        posts = LeanPosts(2)
        node = posts.node(f"http://127.0.0.1:{port}")
        cancelled = asyncio.create_task(node.post_txs(b"a", timeout_s=5))
        outliving = asyncio.create_task(node.post_txs(b"b", timeout_s=5))
        await asyncio.sleep(0.1)
        cancelled.cancel()
        posts.close()                        # while `outliving` waits for its answer
        release.set()
        assert (await outliving).body == b"ok"
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        for _ in range(50):
            if len(ended) == 2:
                break
            await asyncio.sleep(0.02)
    assert ended == ["client closed", "client closed"] and posts._idle == {}


async def test_an_answer_head_past_its_limit_is_unreadable_and_the_outcome_unknown():
    async def reply(writer):
        writer.write(b"HTTP/1.1 200 OK\r\n" + b"X-Pad: " + b"p" * (MAX_HEAD_BYTES + 10))
        await writer.drain()
        await asyncio.sleep(1)
        return False

    server, port = await _raw_node(reply)
    async with server:
        posts = LeanPosts(1)
        with pytest.raises(NodeUnreachable) as unreadable:
            await posts.node(f"http://127.0.0.1:{port}").post_txs(b"x", timeout_s=5)
    assert unreadable.value.transport == "ValueError" and unreadable.value.request_left is True


@pytest.mark.parametrize("head, why", [
    (b"SPDY/3 200 OK", "status line"),
    (b"HTTP/1.1 2x0 OK", "status line"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: -1", "Content-Length"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked", "Transfer-Encoding"),
])
def test_answers_it_cannot_read_are_refused_with_the_reason(head, why):
    with pytest.raises(ValueError, match=why):
        _parse_head(head)


def test_keep_alive_follows_the_version_and_the_connection_header():
    assert _parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 0") == (200, 0, True)
    assert _parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close") == (200, 0, False)
    assert _parse_head(b"HTTP/1.0 200 OK\r\nContent-Length: 0") == (200, 0, False)
    assert _parse_head(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\nConnection: keep-alive") == (200, 0, True)
    assert _parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close, upgrade") == (200, 0, False)
    assert _parse_head(b"HTTP/1.1 200 OK") == (200, None, False)          # the body runs to the close
    assert _parse_head(b"HTTP/1.1 204 No Content") == (204, 0, True)      # never a body


def test_a_node_url_must_be_plain_http():
    with pytest.raises(ValueError, match="http://host:port"):
        LeanPosts(1).node("https://127.0.0.1:8000")


async def test_only_a_bare_http_host_and_port_names_a_node():
    posts = LeanPosts(1)
    assert posts.node("http://127.0.0.1:8001/").address == ("127.0.0.1", 8001)
    for bad in ("https://127.0.0.1:8001", "127.0.0.1:8001", "http://127.0.0.1:8001/prefix", "http://h:1/?a=b"):
        with pytest.raises(ValueError, match="must be http://host:port"):
            posts.node(bad)
