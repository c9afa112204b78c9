"""Requests aiohttp's HTTP parser refuses before our app sees them: log them as client faults.

A request line past aiohttp's limit, a body running past its Content-Length (its tail
parses as a broken next request), bytes that are not HTTP: aiohttp answers these itself
(400 text/plain, connection closed) and, by default, writes an ERROR with a traceback
for every one (issue 12: a 12 KB URL per request filled the log). They are the client's
fault, not ours, so `ClientFaultLog` - the `logger` aiohttp's request handler takes -
turns them into one WARNING line naming the node, at most one per `interval_s` with a
count of those not shown. Anything else aiohttp logs keeps its traceback.

What aiohttp lets us change is the log and the parser's limits (`handler_args`), not the
body of the answer it writes itself: that stays text/plain. So the app's own limits sit
below the parser's, and the common client faults (a long URL, a long header) are answered
by the app with the JSON error body instead (app.py).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from aiohttp.http_exceptions import HttpProcessingError

# The request line and header sizes aiohttp's parser accepts (its default is 8,190 bytes).
# Above the app's own URL limit (MAX_URL_BYTES in app.py), so that limit answers in JSON.
PARSER_MAX_LINE_BYTES = 64 * 1024


class ClientFaultLog:
    """The logger object aiohttp's request handler writes to (`handler_args["logger"]`)."""

    def __init__(self, log: logging.LoggerAdapter, interval_s: float = 1.0) -> None:
        self._log = log
        self._interval_s = interval_s
        self._last_s = float("-inf")
        self._suppressed = 0

    def exception(self, message: str, *args: Any, exc_info: Any = None, **kwargs: Any) -> None:
        if isinstance(exc_info, HttpProcessingError):
            self.client_fault(message % args if args else message, exc_info)
        else:           # not a client's fault: a bug, keep the traceback
            self._log.exception(message, *args, exc_info=exc_info or True, **kwargs)

    def client_fault(self, what: str, exc: HttpProcessingError, now_s: float | None = None) -> None:
        """One WARNING line, unless one was written less than `interval_s` ago."""
        now_s = time.monotonic() if now_s is None else now_s
        if now_s - self._last_s < self._interval_s:
            self._suppressed += 1
            return
        more = f" ({self._suppressed} more since the last such line)" if self._suppressed else ""
        self._log.warning("client fault: %s: %s %s%s", what, type(exc).__name__,
                          str(exc.message or exc).strip()[:200], more)
        self._last_s, self._suppressed = now_s, 0

    def debug(self, message: str, *args: Any, exc_info: Any = None, **kwargs: Any) -> None:
        # aiohttp logs non-HTTP bytes on a fresh connection at DEBUG with the traceback
        self._log.debug(message, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._log, name)     # warning, info, error: as the node's log has them
