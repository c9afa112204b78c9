"""qmemo/core stays pure: no I/O, clock, randomness, event loop or signature library."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import qmemo.core

CORE = Path(qmemo.core.__file__).parent
FORBIDDEN = {"asyncio", "aiohttp", "sqlite3", "time", "datetime", "random", "secrets", "os", "socket", "ctypes",
             "oqs", "nacl", "coincurve", "qmemo.crypto.schemes", "qmemo.crypto.liboqs", "qmemo.crypto.keys",
             "qmemo.crypto.verifier", "qmemo.node", "qmemo.net"}


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", sorted(CORE.glob("*.py")), ids=lambda p: p.name)
def test_core_module_imports_nothing_impure(path):
    bad = {name for name in imported_modules(path)
           if any(name == f or name.startswith(f + ".") for f in FORBIDDEN)}
    assert not bad, f"{path.name} imports {sorted(bad)}"
