"""Nothing under qmemo.bench imports the CLI, a command, the console, or the rooms above it.

Benchmarks are library code that commands call (qmemo/commands/bench_*.py hold the
flags and the printing), so importing every benchmark module, in a fresh interpreter
where nothing else has loaded them first, must not load qmemo.cli, any
qmemo.commands module, or rich; and the layering (commands -> monitor -> analysis ->
bench -> ...) runs one way: no benchmark loads qmemo.analysis or qmemo.monitor.
"""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import qmemo.bench

PROBE = """
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
print(json.dumps(sorted(sys.modules)))
"""


def test_no_bench_module_loads_the_cli_the_commands_the_console_or_a_room_above():
    modules = [f"qmemo.bench.{m.name}" for m in pkgutil.iter_modules(qmemo.bench.__path__)]
    assert "qmemo.bench.node_bench" in modules and "qmemo.bench.c_runner" in modules
    done = subprocess.run([sys.executable, "-c", PROBE, *modules], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout)
    assert set(modules) <= set(loaded)
    upward = [m for m in loaded if m == "qmemo.cli" or m.startswith(("qmemo.commands", "qmemo.analysis", "qmemo.monitor"))
              or m.split(".")[0] == "rich"]
    assert upward == []
