"""The node's rooms keep their walls: the node never loads the HTTP side, only the clock
module reads the wall clock, the frame codec depends on nothing above it, and no room
grows back into a house."""

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


def _wall_clock_calls(path: Path) -> list[int]:
    """Lines calling time.time() or time.time_ns() (the wall clock; monotonic timers are fine)."""
    return [node.lineno for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Attribute) and node.attr in ("time", "time_ns")
            and isinstance(node.value, ast.Name) and node.value.id == "time"]


@pytest.mark.parametrize("path", sorted(NODE.glob("*.py")), ids=lambda p: p.name)
def test_only_the_clock_module_reads_the_wall_clock(path):
    if path.name == "clock.py":
        assert _wall_clock_calls(path), "clock.py is where the default clock reads the wall"
    else:
        assert _wall_clock_calls(path) == [], f"{path.name} reads the wall clock: use the node's clock"


@pytest.mark.parametrize("path", sorted([*NODE.glob("*.py"), *NET.glob("*.py")]), ids=lambda p: p.parent.name + "/" + p.name)
def test_no_room_is_over_the_size_of_one_job(path):
    assert len(path.read_text().splitlines()) <= MAX_MODULE_LINES
