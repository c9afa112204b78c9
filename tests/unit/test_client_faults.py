"""Parser faults aiohttp reports: one rate-limited WARNING line naming the node, no traceback;
anything else keeps its traceback."""

from __future__ import annotations

import logging

from aiohttp.http_exceptions import BadStatusLine, LineTooLong

from qmemo.net.client_faults import ClientFaultLog


def fault_log(caplog) -> ClientFaultLog:
    caplog.set_level(logging.DEBUG)
    return ClientFaultLog(logging.LoggerAdapter(logging.getLogger("qmemo.test.node"), {}), interval_s=1.0)


def test_client_faults_are_one_warning_per_interval_with_the_count_not_shown(caplog):
    log = fault_log(caplog)
    log.client_fault("request from 1.2.3.4", LineTooLong("line", "8190"), now_s=10.0)
    for offset in (0.1, 0.5, 0.9):
        log.client_fault("request from 1.2.3.4", BadStatusLine("xx"), now_s=10.0 + offset)
    log.client_fault("request from 1.2.3.4", BadStatusLine("xx"), now_s=11.2)
    lines = [r for r in caplog.records if r.name == "qmemo.test.node"]
    assert [r.levelno for r in lines] == [logging.WARNING, logging.WARNING]
    assert not any(r.exc_info for r in lines)
    assert "LineTooLong" in lines[0].getMessage() and "3 more since the last such line" in lines[1].getMessage()


def test_what_aiohttp_logs_as_an_exception_keeps_its_traceback_unless_it_is_a_client_fault(caplog):
    log = fault_log(caplog)
    log.exception("Error handling request from %s", "1.2.3.4", exc_info=BadStatusLine("xx"))
    try:
        raise RuntimeError("a bug")
    except RuntimeError as exc:
        log.exception("Unhandled exception", exc_info=exc)
    lines = [r for r in caplog.records if r.name == "qmemo.test.node"]
    assert [(r.levelno, bool(r.exc_info)) for r in lines] == [(logging.WARNING, False), (logging.ERROR, True)]
    assert "1.2.3.4" in lines[0].getMessage()
