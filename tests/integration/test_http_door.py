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
