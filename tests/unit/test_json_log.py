"""JSON log lines: one object per line, with the time, level, writer, message and extra fields."""

from __future__ import annotations

import io
import logging

import orjson
import pytest

from qmemo.errors import Misuse
from qmemo.node.log import JsonFormatter, json_event, use_log_format


def record(message: str, *args: object, **extra: object) -> logging.LogRecord:
    made = logging.LogRecord("qmemo.node", logging.WARNING, __file__, 1, message, args, None)
    made.__dict__.update(extra)
    return made


def test_a_record_is_one_json_line_with_its_node_and_extra_fields():
    line = JsonFormatter().format(record("block %d from %s", 7, "node-2", node="node-0", height=7, peer="x"))
    assert "\n" not in line
    document = orjson.loads(line)
    assert document["message"] == "block 7 from node-2"
    assert document["node"] == "node-0" and document["component"] == "qmemo.node"
    assert document["level"] == "WARNING" and document["ts"].endswith("+00:00")
    assert document["height"] == 7 and document["peer"] == "x"
    assert "args" not in document and "msg" not in document  # the record's own attributes stay out


def test_a_traceback_stays_inside_its_line():
    try:
        raise RuntimeError("boom\non two lines")
    except RuntimeError:
        import sys

        failed = record("failed", node="node-1")
        failed.exc_info = sys.exc_info()
    line = JsonFormatter().format(failed)
    assert "\n" not in line
    assert "RuntimeError: boom" in orjson.loads(line)["exc"]


def test_an_event_is_written_in_the_same_shape():
    out = io.StringIO()
    json_event("gen", "run finished", stream=out, committed=5, out_dir=None)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    document = orjson.loads(lines[0])
    assert document["component"] == "gen" and document["message"] == "run finished"
    assert document["committed"] == 5 and document["level"] == "INFO" and "ts" in document


def test_an_unknown_log_format_is_refused_as_our_misuse():
    """The CLI and NodeConfig offer only text and json: another value is our bug (500)."""
    with pytest.raises(Misuse, match="not one of text, json") as refused:
        use_log_format("xml")
    assert (refused.value.code, refused.value.http_status) == ("bad_log_format", 500)


def test_a_throttle_shows_one_line_per_key_per_interval_and_counts_the_rest():
    from qmemo.node.log import Throttle, held_back

    throttle = Throttle(interval_s=60.0, max_keys=2)
    assert throttle.allow("peer-a", now_s=0.0) == 0
    assert [throttle.allow("peer-a", now_s=t) for t in (1.0, 30.0, 59.9)] == [None, None, None]
    assert throttle.allow("peer-b", now_s=2.0) == 0           # another key is not held back by the first
    assert throttle.allow("peer-a", now_s=60.0) == 3           # the interval passed: with the count held back
    assert held_back(3) == " (3 more since the last such line)" and held_back(0) == ""
    throttle.allow("peer-c", now_s=61.0)                       # a third key: the oldest (peer-b) is forgotten
    assert throttle.allow("peer-a", now_s=62.0) is None and throttle.allow("peer-b", now_s=62.0) == 0
