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

from tests.integration.nodes import Devnet, Network, NodeProcess, make_devnet

POST_ROUTES = ("/txs", "/tx", "/txs/status", "/receipts/status", "/accounts",
               "/peer/txs", "/peer/block", "/peer/block_ids")
CONTENT_TYPES = ("application/octet-stream", "application/json")
REPEATS = 6         # more than once per process: aiohttp's empty body is one shared object


@pytest.fixture(scope="module")
def devnet(tmp_path_factory: pytest.TempPathFactory) -> Devnet:
    return make_devnet(tmp_path_factory.mktemp("door"), validators=1, accounts=2)


@pytest.fixture(scope="module")
def node(devnet: Devnet, tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with Network(devnet, tmp_path_factory.mktemp("door-nodes")) as network:
        network.start()
        yield network.nodes[0]


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
    "chunked, one empty-looking chunk boundary then the end": ("Transfer-Encoding: chunked", b"1\r\n{\r\n0\r\n\r\n"),
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
    """POST an empty body to /txs twice, then GET /health: what once stopped a node."""
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
    assert status_of(answer) in (400, 404) and (b"unknown keys" in answer or b"unsharded" in answer), answer[:300]


# --- slow and idle clients: a node with short limits -----------------------------------------------

BODY_TIMEOUT_S = 1.0
IDLE_TIMEOUT_S = 1.5
MAX_CONNECTIONS = 48


@pytest.fixture(scope="module")
def strict(devnet: Devnet, tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    """An observer of the devnet (it never produces) with short client limits."""
    root = tmp_path_factory.mktemp("door-strict")
    config = root / "node.toml"
    config.write_text(f"body_timeout_s = {BODY_TIMEOUT_S}\nidle_timeout_s = {IDLE_TIMEOUT_S}\n"
                      f"max_connections = {MAX_CONNECTIONS}\n")
    with Network(devnet, root, count=1, extra=["--config", str(config)], key=devnet.observer_key()) as network:
        network.start()
        yield network.nodes[0]


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


def test_a_body_at_one_byte_at_a_time_is_answered_408_while_other_clients_are_served(strict):
    with socket.create_connection(("127.0.0.1", strict.port)) as slow:
        slow.sendall(b"POST /txs HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n"
                     b"Content-Length: 100\r\n\r\n")
        started = time.monotonic()
        while time.monotonic() - started < BODY_TIMEOUT_S * 0.8:
            slow.sendall(b"x")
            assert status_of(raw_exchange(strict, "GET /health HTTP/1.1\r\nHost: x", timeout_s=1.0)) == 200
            time.sleep(0.1)
        # answered (aiohttp may then linger a while reading what the client still sends)
        _, answer = closed_within(slow, BODY_TIMEOUT_S + 2.0)
    assert status_of(answer) == 408 and b'"error":"body_timeout"' in answer, answer[:300]


def test_headers_never_finished_are_closed_after_the_idle_timeout(strict):
    with socket.create_connection(("127.0.0.1", strict.port)) as sock:
        sock.sendall(b"POST /txs HTTP/1.1\r\nHost: x\r\n")        # and never the blank line
        started = time.monotonic()
        closed, answer = closed_within(sock, IDLE_TIMEOUT_S + 3.0)
    assert closed and answer == b"" and time.monotonic() - started >= IDLE_TIMEOUT_S * 0.9


def test_a_flood_of_idle_connections_past_the_cap_never_locks_out_a_client(strict):
    flood = [socket.create_connection(("127.0.0.1", strict.port)) for _ in range(MAX_CONNECTIONS * 4)]
    try:
        for sock in flood[: MAX_CONNECTIONS * 2]:
            sock.sendall(b"GET /health HTTP/1.1\r\nHo")     # half a request line: idle, holding a slot
        for _ in range(20):
            assert status_of(raw_exchange(strict, "GET /health HTTP/1.1\r\nHost: x", timeout_s=2.0)) == 200
        closed = sum(closed_within(sock, 0.01)[0] for sock in flood)
        assert closed >= len(flood) - MAX_CONNECTIONS, f"{closed} of {len(flood)} closed"
    finally:
        for sock in flood:
            sock.close()
