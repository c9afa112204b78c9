"""The node's HTTP door held against any client: odd bodies, slow clients, idle floods.

Every request here goes over a raw socket to a real `qmemo node` process (a devnet of one
validator, producing a block every 500 ms), so the bytes on the wire are exactly the ones
named: an empty body with `Content-Length: 0`, a chunked body whose only chunk is the last
one, one byte, a client that half-closes its side mid-body. After each class of request the
node must still answer `/health` and still produce blocks (`NodeProcess.assert_live`, which
attaches every thread's stack to a failure).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.nodes import NodeProcess, lone_producer

POST_ROUTES = ("/txs", "/tx", "/txs/status", "/receipts/status", "/accounts",
               "/peer/txs", "/peer/block", "/peer/block_ids")
CONTENT_TYPES = ("application/octet-stream", "application/json")
REPEATS = 6         # more than once per process: aiohttp's empty body is one shared object


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with lone_producer(tmp_path_factory.mktemp("door")) as node:
        yield node


def raw_exchange(node: NodeProcess, head: str, body: bytes = b"", *, half_close: bool = False,
                 timeout_s: float = 5.0) -> bytes:
    """Send `head` (request line and headers, without the blank line) and `body`, then read
    until the node closes the connection (every request says `Connection: close`); a node
    that does not answer in `timeout_s` fails the test with its stacks."""
    try:
        with socket.create_connection(("127.0.0.1", node.port), timeout=timeout_s) as sock:
            sock.sendall(head.encode() + b"\r\nConnection: close\r\n\r\n" + body)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
            return answer
    except TimeoutError:
        pytest.fail(f"{node.name} did not answer {head.splitlines()[0]!r} within {timeout_s} s\n"
                    f"--- stacks:\n{node.stack_dump()}")


def status_of(answer: bytes) -> int:
    assert answer.startswith(b"HTTP/1.1 "), f"not an HTTP answer: {answer[:200]!r}"
    return int(answer[9:12])


BODIES = {
    "empty, Content-Length 0": ("Content-Length: 0", b""),
    "chunked, only the last chunk": ("Transfer-Encoding: chunked", b"0\r\n\r\n"),
    "chunked, one 1-byte chunk then the end": ("Transfer-Encoding: chunked", b"1\r\n{\r\n0\r\n\r\n"),
    "one byte": ("Content-Length: 1", b"x"),
}


@pytest.mark.parametrize("body_kind", BODIES)
def test_odd_bodies_to_every_post_route_are_answered_and_the_node_keeps_producing(node, body_kind):
    length_header, body = BODIES[body_kind]
    start_height = node.height() or 0
    for route in POST_ROUTES:
        for content_type in CONTENT_TYPES:
            for _ in range(REPEATS):
                answer = raw_exchange(node, f"POST {route} HTTP/1.1\r\nHost: x\r\n"
                                                 f"Content-Type: {content_type}\r\n{length_header}", body)
                assert 200 <= status_of(answer) < 500, f"POST {route} ({content_type}, {body_kind}): {answer[:300]!r}"
    node.assert_live(since_height=start_height)


def test_a_client_that_half_closes_mid_body_costs_nothing(node):
    start_height = node.height() or 0
    for route in POST_ROUTES:
        # 10 of the 100 bytes promised, then the client's side closes: nobody left to answer
        answer = raw_exchange(node, f"POST {route} HTTP/1.1\r\nHost: x\r\n"
                                         "Content-Type: application/octet-stream\r\nContent-Length: 100",
                              b"0123456789", half_close=True)
        assert answer == b"" or status_of(answer) in (400, 408), answer[:300]
    node.assert_live(since_height=start_height)


def test_the_three_commands_of_a_curl_user_are_all_answered(node):
    """POST an empty body to /txs twice, then GET /health: each is answered."""
    for _ in range(2):
        answer = raw_exchange(node, "POST /txs HTTP/1.1\r\nHost: x\r\n"
                                         "Content-Type: application/octet-stream\r\nContent-Length: 0")
        assert status_of(answer) == 200 and answer.endswith(b'{"results":[],"accepted":0,"duplicate":0,"rejected":0}')
    assert status_of(raw_exchange(node, "GET /health HTTP/1.1\r\nHost: x")) == 200


def test_a_wrong_method_answers_405_naming_the_methods_the_path_has(node):
    answer = raw_exchange(node, "DELETE /txs HTTP/1.1\r\nHost: x")
    assert status_of(answer) == 405 and b"\r\nAllow: POST\r\n" in answer, answer[:300]


@pytest.mark.parametrize("route, key", [("/txs/status", "ids"), ("/receipts/status", "ids"), ("/accounts", "addresses")])
def test_a_look_up_body_with_a_misspelt_key_is_refused(node, route, key):
    body = f'{{"{key}": [], "limit": 5}}'.encode()
    answer = raw_exchange(node, f"POST {route} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                f"Content-Length: {len(body)}", body)
    assert status_of(answer) == 400 and b"unknown keys ['limit']" in answer, answer[:300]


def test_a_chunked_body_whose_chunks_and_line_ends_arrive_apart_is_read_whole(node):
    """Each chunk's data and its CRLF in writes of their own: the body reader meets the end of
    one chunk with the body not yet ended, again and again."""
    with socket.create_connection(("127.0.0.1", node.port), timeout=5.0) as sock:
        sock.sendall(b"POST /accounts HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
        for byte in b'{"addresses": []}':
            for piece in (b"1\r\n" + bytes([byte]), b"\r\n"):
                sock.sendall(piece)
                time.sleep(0.005)
        sock.sendall(b"0\r\n\r\n")
        _, answer = closed_within(sock, 5.0)
    assert status_of(answer) == 200 and answer.endswith(b'{"accounts":[]}'), answer[:300]


# --- slow and idle clients: a node with short limits -----------------------------------------------

BODY_TIMEOUT_S = 1.0
IDLE_TIMEOUT_S = 3.0
SEND_TIMEOUT_S = 1.5
MAX_CONNECTIONS = 48
ANSWER_S = 5.0          # what a well-behaved client waits for its answer here (a loaded 2-core CI machine)


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    """A one-validator devnet's producer with short client limits."""
    root = tmp_path_factory.mktemp("door-strict")
    config = root / "node.toml"
    config.write_text(f"body_timeout_s = {BODY_TIMEOUT_S}\nidle_timeout_s = {IDLE_TIMEOUT_S}\n"
                      f"send_timeout_s = {SEND_TIMEOUT_S}\nmax_connections = {MAX_CONNECTIONS}\n")
    with lone_producer(root, extra=["--config", str(config)]) as node:
        yield node


def closed_within(sock: socket.socket, seconds: float) -> tuple[bool, bytes]:
    """Whether the node closes `sock` within `seconds`, and what it sent before."""
    sock.settimeout(seconds)
    answer = b""
    try:
        while chunk := sock.recv(65536):
            answer += chunk
    except TimeoutError:
        return False, answer
    except ConnectionResetError:
        pass
    return True, answer


def health(node: NodeProcess) -> int:
    return status_of(raw_exchange(node, "GET /health HTTP/1.1\r\nHost: x", timeout_s=ANSWER_S))


def test_a_body_at_one_byte_at_a_time_is_answered_408_while_other_clients_are_served(strict):
    start_height = strict.height() or 0
    with socket.create_connection(("127.0.0.1", strict.port)) as slow:
        slow.sendall(b"POST /txs HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
                     b"Content-Length: 100\r\n\r\n")
        started = time.monotonic()
        while time.monotonic() - started < BODY_TIMEOUT_S * 0.8:
            slow.sendall(b"x")
            assert health(strict) == 200
            time.sleep(0.1)
        # answered (the node may then read for a moment what the client still sends)
        _, answer = closed_within(slow, BODY_TIMEOUT_S + 4.0)
    assert status_of(answer) == 408 and b'"error":"body_timeout"' in answer, answer[:300]
    strict.assert_live(since_height=start_height)


def test_headers_never_finished_are_closed_after_the_idle_timeout(strict):
    with socket.create_connection(("127.0.0.1", strict.port)) as sock:
        sock.sendall(b"POST /txs HTTP/1.1\r\nHost: x\r\n")        # and never the blank line
        started = time.monotonic()
        closed, answer = closed_within(sock, IDLE_TIMEOUT_S + 5.0)
    assert closed and answer == b"" and time.monotonic() - started >= IDLE_TIMEOUT_S * 0.9


def test_a_flood_of_idle_connections_past_the_cap_never_locks_out_a_client(strict):
    start_height = strict.height() or 0
    started = time.monotonic()
    flood = [socket.create_connection(("127.0.0.1", strict.port)) for _ in range(MAX_CONNECTIONS * 4)]
    try:
        for sock in flood[: MAX_CONNECTIONS * 2]:
            sock.sendall(b"GET /health HTTP/1.1\r\nHo")     # half a request line: idle, holding a slot
        for _ in range(10):
            assert health(strict) == 200
        closed = sum(closed_within(sock, 0.01)[0] for sock in flood)
        # all of it before the idle timeout could have closed any of them
        assert time.monotonic() - started < IDLE_TIMEOUT_S, "too slow to tell the cap from the idle timeout"
        assert closed >= len(flood) - MAX_CONNECTIONS, f"{closed} of {len(flood)} closed"
    finally:
        for sock in flood:
            sock.close()
    strict.assert_live(since_height=start_height)


def test_past_the_cap_with_every_connection_busy_a_new_one_is_answered_503_busy(strict):
    start_height = strict.height() or 0
    log_size = strict.log_path.stat().st_size
    busy = [socket.create_connection(("127.0.0.1", strict.port)) for _ in range(MAX_CONNECTIONS)]
    try:
        for sock in busy:    # headers promising a body that never comes: a request under way
            sock.sendall(b"POST /txs HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n")
        time.sleep(0.2)
        answer = raw_exchange(strict, "GET /health HTTP/1.1\r\nHost: x", timeout_s=ANSWER_S)
        assert status_of(answer) == 503 and b'"error":"busy"' in answer and b"Retry-After: 1" in answer, answer
    finally:
        for sock in busy:
            sock.close()
    strict.assert_live(since_height=start_height)
    logged = strict.log_path.read_bytes()[log_size:]
    assert b"ERROR" not in logged and b"Traceback" not in logged, logged[-2000:]


def test_clients_that_never_read_their_answers_are_cut_off_and_free_their_slots(strict):
    start_height = strict.height() or 0
    pipelined = b"GET /openapi.json HTTP/1.1\r\nHost: x\r\n\r\n" * 300     # ~13 MB of answers
    readers = []
    for _ in range(MAX_CONNECTIONS):
        sock = socket.create_connection(("127.0.0.1", strict.port))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.sendall(pipelined)
        readers.append(sock)
    try:
        deadline = time.monotonic() + SEND_TIMEOUT_S + 10.0
        while health_or_none(strict) != 200:         # 503 busy while the readers hold every slot
            assert time.monotonic() < deadline, "the slots of clients that never read were never freed"
            time.sleep(0.2)
    finally:
        for sock in readers:
            sock.close()
    strict.assert_live(since_height=start_height)


def health_or_none(node: NodeProcess) -> int | None:
    try:
        with socket.create_connection(("127.0.0.1", node.port), timeout=ANSWER_S) as sock:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = closed_within(sock, ANSWER_S)[1]
            return status_of(answer) if answer else None
    except OSError:
        return None
