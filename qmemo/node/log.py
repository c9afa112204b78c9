"""Node logging: every line names the node that wrote it.

`node_logger(name)` returns an adapter that stamps its records with the node's name, and
installs (once per process) a stderr handler whose format prints it; records from
libraries (aiohttp, asyncio) get the process's first node name, so no line is anonymous.
"""

from __future__ import annotations

import logging
import sys

LOG_FORMAT = "%(asctime)s %(node)s %(levelname)s %(name)s: %(message)s"


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
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
        root.addHandler(handler)
        root.setLevel(level.upper())
        logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    return logging.LoggerAdapter(logging.getLogger("qmemo.node"), {"node": name})
