"""The node's rooms keep their walls: the node never loads the HTTP side, the wire format
never loads the node's machinery, only the clock module reads the wall clock, the frame
codec depends on nothing above it, and no room grows back into a house."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import qmemo.net
import qmemo.node

NODE = Path(qmemo.node.__file__).parent
NET = Path(qmemo.net.__file__).parent
MAX_MODULE_LINES = 450


def _loaded_by(module: str) -> set[str]:
    """The modules that importing `module` loads, in a fresh interpreter."""
    code = f"import sys, {module}; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_the_node_loads_nothing_of_http():
    loaded = _loaded_by("qmemo.node.service")
    assert not {name for name in loaded if name == "aiohttp" or name.startswith(("aiohttp.", "qmemo.net"))}


def test_the_frame_codec_loads_nothing_of_node_or_net():
    loaded = _loaded_by("qmemo.frames")
    assert not {name for name in loaded if name.startswith(("qmemo.node", "qmemo.net", "qmemo.core"))}


WALL_CLOCK_ATTRIBUTES = {"time", "time_ns"}                 # of the time module
DATE_NOW_ATTRIBUTES = {"now", "utcnow", "today"}           # of datetime.datetime / datetime.date
# Where reading the wall clock is the job itself.
WALL_CLOCK_READERS = {
    "node/clock.py": "the default NodeConfig.clock: the one read every chain decision goes through",
    "node/log.py": "log lines carry wall time, what a reader lines up with other logs; no chain decision reads it",
}


def wall_clock_reads(source: str) -> list[int]:
    """Lines that read the wall clock: `time.time()`/`time_ns()` under any alias of the
    module, `from time import time` (or `time_ns`), and `datetime.now()`/`utcnow()`/
    `date.today()`. Monotonic and CPU timers are fine: they measure, never stamp."""
    tree = ast.parse(source)
    time_aliases = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                    for alias in node.names if alias.name == "time"}
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "time":
            if any(alias.name in WALL_CLOCK_ATTRIBUTES for alias in node.names):
                lines.append(node.lineno)
        elif isinstance(node, ast.Attribute):
            owner = node.value
            owner_name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) \
                else None
            if node.attr in WALL_CLOCK_ATTRIBUTES and isinstance(owner, ast.Name) and owner.id in time_aliases:
                lines.append(node.lineno)
            elif node.attr in DATE_NOW_ATTRIBUTES and owner_name in ("datetime", "date"):
                lines.append(node.lineno)
    return sorted(lines)


@pytest.mark.parametrize("source, reads", [
    ("import time\ntime.time()", [2]),
    ("import time\ntime.time_ns()", [2]),
    ("import time as t\nt.time()", [2]),
    ("from time import time\ntime()", [1]),
    ("from time import time_ns as now\nnow()", [1]),
    ("import datetime\ndatetime.datetime.now()", [2]),
    ("from datetime import datetime\ndatetime.utcnow()", [2]),
    ("from datetime import date\ndate.today()", [2]),
    ("import time\ntime.monotonic(); time.perf_counter(); time.process_time()", []),
    ("from time import monotonic\nmonotonic()", []),
])
def test_the_wall_clock_guard_sees_every_spelling(source, reads):
    assert wall_clock_reads(source) == reads


@pytest.mark.parametrize("path", sorted([*NODE.glob("*.py"), *NET.glob("*.py")]),
                         ids=lambda p: p.parent.name + "/" + p.name)
def test_only_the_clock_module_reads_the_wall_clock(path):
    """The node and its HTTP side take time from NodeConfig.clock (tests drive it), never
    from the wall themselves."""
    where = f"{path.parent.name}/{path.name}"
    reads = wall_clock_reads(path.read_text())
    if where in WALL_CLOCK_READERS:
        assert reads, f"{where} is listed as a wall-clock reader ({WALL_CLOCK_READERS[where]}) but reads none"
    else:
        assert reads == [], f"{where} reads the wall clock at lines {reads}: use the node's clock"


def test_importing_the_wire_format_loads_no_node_internals():
    """qmemo.net.wire is a codec: it may know the node's answer values, never its machinery."""
    loaded = _loaded_by("qmemo.net.wire")
    node_modules = {name for name in loaded if name.startswith("qmemo.node.")}
    assert node_modules <= {"qmemo.node.answers"}, node_modules
    assert not loaded & {"sqlite3", "_sqlite3", "asyncio", "_asyncio", "aiohttp", "ctypes"}


@pytest.mark.parametrize("path", sorted([*NODE.glob("*.py"), *NET.glob("*.py")]), ids=lambda p: p.parent.name + "/" + p.name)
def test_no_room_is_over_the_size_of_one_job(path):
    assert len(path.read_text().splitlines()) <= MAX_MODULE_LINES
