"""Requests aiohttp's HTTP parser refuses before our app sees them: JSON answers, one log line.

A request line past aiohttp's limit, a body running past its Content-Length (its tail
parses as a broken next request), a malformed header, bytes that are not HTTP: aiohttp
answers these itself, before any app code or middleware runs, with a text/plain 400
(`RequestHandler.handle_error`, aiohttp/web_protocol.py), and by default writes an ERROR
with a traceback for every one (a flood of long URLs, one per request, fills the log).

- The answer: `NodeRunner` serves connections with `JsonFaultHandler`, whose
  `handle_error` answers a parser fault with the JSON error body and the status that
  names it (`fault_answer`: 414 for a request line too long, 431 for a header, 400
  otherwise); the connection is still closed, since the parser has lost its place in the
  stream. Errors that are not parser faults (500s) keep aiohttp's own answer.
- The log: `ClientFaultLog` - the `logger` aiohttp's request handler takes - turns them
  into one WARNING line naming the node, at most one per `interval_s` with a count of
  those not shown. Anything else aiohttp logs keeps its traceback.

What aiohttp does not let us change (aiohttp 3.14, _http_parser.pyx `feed_data` and
web_protocol.py `data_received`; docs/api.md section 2 has the details): a valid request
in the same socket read as a later parser fault is dropped with it; a bad chunk size met
after a handler began reading the body leaves that handler waiting until the client
closes the connection.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import (BadStatusLine, HttpProcessingError, InvalidHeader, LineTooLong,
                                     PayloadEncodingError)
from aiohttp.web_protocol import RequestHandler

from qmemo.net import wire
from qmemo.node.log import Throttle, held_back

# The request line and header sizes aiohttp's parser accepts (its default is 8,190 bytes).
# Above the app's own URL limit (MAX_URL_BYTES in app.py), so that limit answers in JSON.
PARSER_MAX_LINE_BYTES = 64 * 1024
_REQUEST_TARGET = re.compile(r"reading: (?:bytearray\()?b['\"]/")


class ClientFaultLog:
    """The logger object aiohttp's request handler writes to (`handler_args["logger"]`)."""

    def __init__(self, log: logging.LoggerAdapter, interval_s: float = 1.0) -> None:
        self._log = log
        self._throttle = Throttle(interval_s)

    def exception(self, message: str, *args: Any, exc_info: Any = None, **kwargs: Any) -> None:
        fault = parser_fault(exc_info) if isinstance(exc_info, BaseException) else None
        if fault is not None:
            self.client_fault(message % args if args else message, fault)
        else:           # not a client's fault: a bug, keep the traceback
            self._log.exception(message, *args, exc_info=exc_info or True, **kwargs)

    def client_fault(self, what: str, exc: HttpProcessingError, now_s: float | None = None) -> None:
        """One WARNING line, unless one was written less than `interval_s` ago."""
        more = self._throttle.allow(None, now_s)
        if more is not None:
            self._log.warning("client fault: %s: %s %s%s", what, type(exc).__name__,
                              str(exc.message or exc).strip()[:200], held_back(more))

    def debug(self, message: str, *args: Any, exc_info: Any = None, **kwargs: Any) -> None:
        # aiohttp logs non-HTTP bytes on a fresh connection at DEBUG with the traceback
        self._log.debug(message, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._log, name)     # warning, info, error: as the node's log has them


def parser_fault(exc: BaseException) -> HttpProcessingError | None:
    """The parser's error behind `exc`: itself, or - for a body that broke while a handler
    read it (a Content-Encoding that does not decode) - the cause of aiohttp's
    `RequestPayloadError`. None if `exc` is no client fault."""
    if isinstance(exc, web.RequestPayloadError):
        exc = exc.__cause__
    return exc if isinstance(exc, HttpProcessingError) else None


def fault_answer(exc: HttpProcessingError) -> tuple[int, str]:
    """(HTTP status, error code) for a request aiohttp's parser refused."""
    if isinstance(exc, LineTooLong):
        # aiohttp quotes the start of the line it was reading: a request target starts with "/"
        return (414, "url_too_long") if _REQUEST_TARGET.search(exc.message) else (431, "header_too_large")
    if isinstance(exc, BadStatusLine):
        return 400, "bad_request_line"
    if isinstance(exc, InvalidHeader):
        return 400, "bad_header"
    if isinstance(exc, PayloadEncodingError):      # chunking, Content-Length, Content-Encoding
        return 400, "bad_body"
    return 400, "bad_http"


def fault_body(exc: HttpProcessingError) -> tuple[int, bytes]:
    """(HTTP status, JSON error body) answering a parser fault."""
    status, code = fault_answer(exc)
    detail = " ".join(str(exc.message or exc).split())[:200]      # aiohttp's carets span lines
    return status, wire.dumps(wire.error_json(code, f"the request is not valid HTTP: {detail}"))


class JsonFaultHandler(RequestHandler):
    """aiohttp's per-connection protocol, answering parser faults in JSON."""

    def handle_error(self, request: web.BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        answer = super().handle_error(request, status, exc, message)    # logs (ClientFaultLog), checks nothing was sent
        if not isinstance(exc, HttpProcessingError) or status >= 500:
            return answer
        status, body = fault_body(exc)
        response = web.Response(body=body, status=status, content_type="application/json")
        response.force_close()          # the parser has lost its place in this connection's bytes
        return response
