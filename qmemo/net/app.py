"""The aiohttp application factory: routes, the error middleware, byte counting.

`make_app(node)` routes the API's operations (qmemo.net.openapi.OPERATIONS, the table
`GET /openapi.json` describes) to `Handlers`. The middleware is the HTTP
boundary of the error hierarchy: a `QmemoError` becomes `{"error": code, "detail": ...}`
with the error's own status (`Handlers.respond` adds Retry-After to a 429); aiohttp's own HTTP errors (unknown
route, wrong method, a body over the server's hard cap) get the same JSON shape; any
other exception is a bug - logged with its traceback, answered 500, never a crash.

Client faults aiohttp's parser catches before the app (qmemo.net.client_faults) are
answered in JSON by `NodeRunner`'s connections (qmemo.net.connections) and logged as one rate-limited WARNING
line, never a traceback; a body that breaks while a handler reads it is answered here.
The parser's line limit sits above the app's URL limit, so a URL up to that limit is
answered here (414 `url_too_long`).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from qmemo.errors import Misuse, NodeBusy, QmemoError, SlowBody
from qmemo.net import wire
from qmemo.net.client_faults import PARSER_MAX_LINE_BYTES, ClientFaultLog, fault_body, parser_fault
from qmemo.net.handlers import BODY_BYTES_KEY, Handlers
from qmemo.net.openapi import OPERATIONS
from qmemo.node.service import Node

NODE_KEY = web.AppKey("node", Node)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# The longest URL (path and query) the app reads. The longest a client needs is a
# GET /tx/<128 hex digits> or /account/<64>; 8 KiB is what aiohttp itself allowed.
MAX_URL_BYTES = 8 * 1024


def make_app(node: Node) -> web.Application:
    metrics = node.metrics
    handlers = Handlers(node)
    fault_log = ClientFaultLog(node.log)

    @web.middleware
    async def boundary(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            if len(request.raw_path) > MAX_URL_BYTES:
                response = handlers.json({"error": "url_too_long", "detail": f"the URL is {len(request.raw_path)} "
                                          f"bytes, the limit is {MAX_URL_BYTES}"}, status=414)
            else:
                response = await handler(request)
        except QmemoError as exc:
            if isinstance(exc, Misuse):     # our bug, named: answer 500 and keep its traceback in the log
                node.log.error("internal misuse in %s %s: %s", request.method, request.path, exc, exc_info=exc)
            response = handlers.respond(wire.dumps(exc.to_json()), exc.http_status)
            if isinstance(exc, NodeBusy):   # its own wait, in the header's whole seconds
                response.headers["Retry-After"] = str(max(1, math.ceil(exc.retry_after_ms / 1000)))
            if isinstance(exc, SlowBody):   # the rest of its body may still be on the way
                response.force_close()
        except (HttpProcessingError, web.RequestPayloadError) as exc:
            fault = parser_fault(exc)       # the body broke while a handler read it
            if fault is None:
                raise
            fault_log.client_fault(f"{request.method} {request.path}", fault)
            status, body = fault_body(fault)
            response = handlers.respond(body, status)
            response.force_close()          # the parser has lost its place in the connection
        except web.HTTPException as exc:
            code = {404: "not_found", 405: "method_not_allowed", 413: "too_large"}.get(exc.status, "http")
            response = handlers.json(wire.error_json(code, exc.reason), status=exc.status)
            if "Allow" in exc.headers:      # a 405 names the methods the path has (RFC 9110 15.5.6)
                response.headers["Allow"] = exc.headers["Allow"]
        except Exception:   # a bug: answer 500, keep serving, keep the traceback in the log
            node.log.exception("internal error in %s %s", request.method, request.path)
            response = handlers.json(wire.error_json("internal", "internal error; see the node's log"), status=500)
        metrics.bytes_in += request.get(BODY_BYTES_KEY, 0)
        body = getattr(response, "body", None)
        if isinstance(body, (bytes, bytearray)):
            metrics.bytes_out += len(body)
        return response

    # aiohttp's own cap (its request.read(), which read_body does not call) sits above every
    # limit we enforce, so ours answer first should anything call it.
    app = web.Application(middlewares=[boundary], client_max_size=node.config.max_peer_body_bytes + 1,
                          handler_args={"logger": fault_log, "max_line_size": PARSER_MAX_LINE_BYTES,
                                        "max_field_size": PARSER_MAX_LINE_BYTES})
    app[NODE_KEY] = node
    app.add_routes([web.route(op.method, op.path, getattr(handlers, op.handler)) for op in OPERATIONS])
    return app
