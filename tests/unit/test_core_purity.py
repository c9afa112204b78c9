"""qmemo/core stays pure all the way down: no I/O, clock, randomness, event loop or signature library.

Two checks, because each sees what the other cannot:
- What importing a core module *loads* (h11's rule): each core module is imported in a
  fresh interpreter and `sys.modules` is read afterwards, so a forbidden module pulled in
  through any chain of imports (core -> some helper -> ctypes) fails here.
- What each core file imports *itself*: `time`, `os` and friends are loaded by every
  interpreter at startup, so only the file's own import lines show that it uses them.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import qmemo.core

CORE = Path(qmemo.core.__file__).parent
CORE_MODULES = sorted(f"qmemo.core.{path.stem}" for path in CORE.glob("*.py") if path.stem != "__init__")

# Never loaded, directly or transitively, by importing any core module: I/O, sockets,
# the event loop, randomness, native-call machinery, the signature libraries and the
# scheme registry (the C extension modules are listed too: they are what does the work).
NEVER_LOADED = {
    "ctypes", "_ctypes", "sqlite3", "_sqlite3", "asyncio", "_asyncio", "aiohttp", "socket", "_socket",
    "random", "_random", "secrets", "oqs", "nacl", "coincurve",
    # all of qmemo.crypto: its package __init__ loads the scheme registry (schemes, liboqs)
    "qmemo.crypto", "qmemo.node", "qmemo.net",
}

# Never imported by a core file itself: also the modules every interpreter loads anyway.
NEVER_IMPORTED = NEVER_LOADED | {"time", "datetime", "os"}

# Runs in the fresh interpreter: snapshot sys.modules before `json` adds its own.
_PROBE = "import importlib, sys; importlib.import_module(sys.argv[1]); loaded = list(sys.modules); " \
         "import json; print(json.dumps(loaded))"


def _forbidden(names: set[str], forbidden: set[str]) -> list[str]:
    return sorted(name for name in names if any(name == f or name.startswith(f + ".") for f in forbidden))


def loaded_by_importing(module: str) -> set[str]:
    """Every module in `sys.modules` after importing `module` in a fresh interpreter."""
    # -I: no PYTHON* variables, no user site, no current directory on sys.path.
    result = subprocess.run([sys.executable, "-I", "-c", _PROBE, module], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, f"importing {module} failed:\n{result.stderr}"
    return set(json.loads(result.stdout))


def imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_every_core_module_is_checked():
    assert {"qmemo.core.hashing", "qmemo.core.state", "qmemo.core.scheme_rules"} <= set(CORE_MODULES)


@pytest.mark.parametrize("module", ["qmemo.core", *CORE_MODULES])
def test_importing_a_core_module_loads_nothing_impure(module):
    loaded = loaded_by_importing(module)
    assert module in loaded
    bad = _forbidden(loaded, NEVER_LOADED)
    assert not bad, f"importing {module} loads {bad}"


@pytest.mark.parametrize("path", sorted(CORE.glob("*.py")), ids=lambda p: p.name)
def test_core_module_imports_nothing_impure(path):
    bad = _forbidden(imported_modules(path), NEVER_IMPORTED)
    assert not bad, f"{path.name} imports {bad}"
