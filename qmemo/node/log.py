"""Log lines for nodes and the generator: every line names who wrote it, as text or as JSON.

`node_logger(name)` returns an adapter that stamps its records with the node's name, and
installs (once per process) a stderr handler whose format prints it; records from
libraries (aiohttp, asyncio) get the process's first node name, so no line is anonymous.

`--log-format json` (`use_log_format("json")` before the first `node_logger`) makes each
line one JSON object - `ts` (UTC, ISO 8601), `level`, `node`, `component` (the logger),
`message`, and any extra fields of the record - for log shippers (Loki, Elasticsearch,
`jq`). `json_event` writes the same shape for programs that report events rather than
log (the generator). This module must not print anything but log lines.
"""

from __future__ import annotations

import datetime
import logging
import sys
import time
from collections.abc import Hashable
from typing import Any, TextIO

import orjson

from qmemo.errors import Misuse

LOG_FORMAT = "%(asctime)s %(node)s %(levelname)s %(name)s: %(message)s"
LOG_FORMATS = ("text", "json")

_format = "text"

# Attributes every LogRecord has: anything else on a record is an extra field worth keeping.
_RECORD_ATTRIBUTES = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "node"}


def use_log_format(log_format: str) -> None:
    """Choose the format of the handler `node_logger` installs (call it before the first one)."""
    global _format
    if log_format not in LOG_FORMATS:
        # The CLI and NodeConfig accept only these: another value is our bug, not the user's.
        raise Misuse(f"log format {log_format!r} is not one of {', '.join(LOG_FORMATS)}", code="bad_log_format")
    _format = log_format


def _timestamp(created: float) -> str:
    return datetime.datetime.fromtimestamp(created, datetime.timezone.utc).isoformat(timespec="milliseconds")


def _json_line(document: dict[str, Any]) -> str:
    # default=str: an extra field of any type (a Path, an exception) still makes a line.
    return orjson.dumps(document, default=str).decode()


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (a traceback goes in `exc`, escaped)."""

    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, Any] = {
            "ts": _timestamp(record.created), "level": record.levelname, "node": getattr(record, "node", None),
            "component": record.name, "message": record.getMessage(),
        }
        document.update({key: value for key, value in vars(record).items()
                         if key not in _RECORD_ATTRIBUTES and key not in document})
        if record.exc_info:
            document["exc"] = self.formatException(record.exc_info)
        return _json_line(document)


class _NodeName(logging.Filter):
    def __init__(self, name: str) -> None:
        super().__init__()
        self.node_name = name

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "node"):
            record.node = self.node_name
        return True


def node_logger(name: str, level: str = "INFO") -> logging.LoggerAdapter:
    root = logging.getLogger()
    if not any(isinstance(f, _NodeName) for handler in root.handlers for f in handler.filters):
        handler = logging.StreamHandler(sys.stderr)
        handler.addFilter(_NodeName(name))
        handler.setFormatter(JsonFormatter() if _format == "json" else logging.Formatter(LOG_FORMAT))
        root.addHandler(handler)
        root.setLevel(level.upper())
        logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    return logging.LoggerAdapter(logging.getLogger("qmemo.node"), {"node": name})


def json_event(component: str, message: str, *, level: str = "INFO", stream: TextIO | None = None,
               **fields: Any) -> None:
    """Write one event as a JSON log line (the shape JsonFormatter writes, `component` naming the writer)."""
    line = _json_line({"ts": _timestamp(datetime.datetime.now().timestamp()), "level": level,
                       "component": component, "message": message, **fields})
    print(line, file=stream or sys.stdout, flush=True)


class Throttle:
    """At most one log line per key per `interval_s`, and how many were held back.

    For a condition that repeats with every request or round (a parser fault, a peer
    whose chain we cannot follow, a journal on a full disk): the first line says what
    happened, the next one no sooner than `interval_s` later with the count held back
    in between, so the log stays readable and the count stays honest. Keys are the
    condition's identity (None: one condition); at most `max_keys` are remembered, the
    oldest forgotten first (with its count), so a hostile stream of distinct keys cannot
    grow it."""

    def __init__(self, interval_s: float, max_keys: int = 1024) -> None:
        self.interval_s = interval_s
        self.max_keys = max_keys
        self._last: dict[Hashable, tuple[float, int]] = {}     # key -> (when last shown, held back since)

    def allow(self, key: Hashable = None, now_s: float | None = None) -> int | None:
        """None: hold this line back. Otherwise write it: the number held back since the last one."""
        now_s = time.monotonic() if now_s is None else now_s
        last = self._last.get(key)
        if last is not None and now_s - last[0] < self.interval_s:
            self._last[key] = (last[0], last[1] + 1)
            return None
        self._last.pop(key, None)           # re-inserted last: the dict stays oldest first
        self._last[key] = (now_s, 0)
        if len(self._last) > self.max_keys:
            del self._last[next(iter(self._last))]
        return last[1] if last is not None else 0


def held_back(count: int) -> str:
    """The suffix of a throttled line: how many like it were not written."""
    return f" ({count} more since the last such line)" if count else ""


def log_refusal(error: Exception, code: str) -> None:
    """A node's fatal error as an ERROR log line, for a JSON log that must stay all JSON.

    Through the node's handler when one is installed (it stamps the node's name); before
    that (the genesis or key file unreadable) as an event of the same shape on stderr.
    """
    if any(isinstance(f, _NodeName) for handler in logging.getLogger().handlers for f in handler.filters):
        logging.getLogger("qmemo.node").error("%s", error, extra={"error": code})
    else:
        json_event("qmemo.node", str(error), level="ERROR", stream=sys.stderr, error=code)
