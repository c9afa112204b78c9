"""The aiohttp application factory: routes, the error middleware, byte counting.

`make_app(node)` wires docs/api.md's routes to `Handlers`. The middleware is the HTTP
boundary of the error hierarchy: a `QmemoError` becomes `{"error": code, "detail": ...}`
with the error's own status (`Handlers.respond` adds Retry-After to a 429); aiohttp's own HTTP errors (unknown
route, wrong method, a body over the server's hard cap) get the same JSON shape; any
other exception is a bug - logged with its traceback, answered 500, never a crash.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from qmemo.errors import Misuse, QmemoError
from qmemo.net import wire
from qmemo.net.handlers import BODY_BYTES_KEY, Handlers
from qmemo.node.service import Node

NODE_KEY = web.AppKey("node", Node)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def make_app(node: Node) -> web.Application:
    metrics = node.metrics
    handlers = Handlers(node)

    @web.middleware
    async def boundary(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            response = await handler(request)
        except QmemoError as exc:
            if isinstance(exc, Misuse):     # our bug, named: answer 500 and keep its traceback in the log
                node.log.error("internal misuse in %s %s: %s", request.method, request.path, exc, exc_info=exc)
            response = handlers.respond(wire.dumps(exc.to_json()), exc.http_status)
        except web.HTTPException as exc:
            code = {404: "not_found", 405: "method_not_allowed", 413: "too_large"}.get(exc.status, "http")
            response = handlers.json(wire.error_json(code, exc.reason), status=exc.status)
        except Exception:   # a bug: answer 500, keep serving, keep the traceback in the log
            node.log.exception("internal error in %s %s", request.method, request.path)
            response = handlers.json(wire.error_json("internal", "internal error; see the node's log"), status=500)
        metrics.bytes_in += request.get(BODY_BYTES_KEY, 0)
        body = getattr(response, "body", None)
        if isinstance(body, (bytes, bytearray)):
            metrics.bytes_out += len(body)
        return response

    # aiohttp's own cap sits above every limit we enforce, so ours answer first.
    app = web.Application(middlewares=[boundary], client_max_size=node.config.max_peer_body_bytes + 1)
    app[NODE_KEY] = node
    app.add_routes([
        web.post("/tx", handlers.post_tx),
        web.post("/txs", handlers.post_txs),
        web.get("/tx/{tx_id}", handlers.get_tx),
        web.get("/blocks", handlers.get_blocks),
        web.get("/block/{height}", handlers.get_block),
        web.get("/account/{address}", handlers.get_account),
        web.post("/accounts", handlers.post_accounts),
        web.get("/status", handlers.get_status),
        web.get("/health", handlers.get_health),
        web.get("/metrics", handlers.get_metrics),
        web.get("/metrics/prometheus", handlers.get_prometheus),
        web.post("/peer/txs", handlers.peer_txs),
        web.post("/peer/block", handlers.peer_block),
        web.get("/peer/blocks", handlers.peer_blocks),
    ])
    return app
