"""Schemathesis drives every operation of the node's OpenAPI document against a real node.

One `qmemo node` process (a devnet of one validator, a block every 500 ms) on loopback; one
test per operation, each sending `QMEMO_FUZZ_EXAMPLES` generated requests (valid and
invalid: schemathesis's positive and negative cases) with every schemathesis check on: no
5xx, a status the document names, a content type and body that match the schema, the
headers it names. Each answer must also come within `MAX_RESPONSE_S`. After each
operation's requests the node must still answer `/health` and still produce blocks; a node
that does not fails the test with its stacks.

The document is the one the node serves (`GET /openapi.json`, checked equal to the one the
code builds), so a route or field the document does not describe is found here.

The longer run (docs/api.md, section 2): `QMEMO_FUZZ_EXAMPLES=300 scripts/test.sh
tests/integration/test_api_fuzz.py`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import negative_data_rejection, positive_data_acceptance

from qmemo.net.openapi import openapi_document
from tests.integration.nodes import NodeProcess, lone_producer

EXAMPLES = int(os.environ.get("QMEMO_FUZZ_EXAMPLES", "25"))
MAX_RESPONSE_S = 2.0

schema = schemathesis.openapi.from_dict(openapi_document())

# Operations where a request the schema allows may still be refused, for a reason no schema
# can state: a signature, a binary encoding, a chain id, a nonce (400/422), or `limit`'s
# bound depending on `txs` (/blocks). Every other check holds for them too.
SEMANTIC = {"POST /tx", "POST /txs", "POST /peer/txs", "POST /peer/block", "POST /peer/block_ids", "GET /blocks",
            "GET /block/{height}"}
# A JSON batch's transactions are judged one by one: one that does not decode is that
# transaction's rejection in a 200 answer, not the request's 400 (docs/api.md section 3).
PER_ITEM = {"POST /txs"}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    with lone_producer(tmp_path_factory.mktemp("fuzz")) as node:
        yield node


@pytest.fixture(scope="module")
def session() -> Iterator[requests.Session]:
    with requests.Session() as session:
        yield session


@pytest.fixture
def live_after(node: NodeProcess) -> Iterator[None]:
    """The node still answers and still produces once the test's requests are done."""
    start_height = node.height() or 0
    yield
    node.assert_live(since_height=start_height)


def test_the_node_serves_the_document_the_code_builds(node):
    assert node.get("/openapi.json") == openapi_document()


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
def test_every_operation_answers_as_its_schema_says(case, node, session, live_after):
    operation = f"{case.method} {case.path}"
    excluded = [check for check, where in ((positive_data_acceptance, SEMANTIC), (negative_data_rejection, PER_ITEM))
                if operation in where]
    response = case.call_and_validate(base_url=node.url, session=session, timeout=10, excluded_checks=excluded)
    assert response.elapsed < MAX_RESPONSE_S, f"{case.method} {case.formatted_path}: {response.elapsed:.2f} s"
