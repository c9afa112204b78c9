"""Where things are in the repository checkout: the one definition of its root.

qMEMO runs from its checkout (an editable install): the setup builds into `.deps/`,
benchmarks write `results/`, reports go to `docs/results/`. Every module that needs one
of these folders takes it from here, so moving one is a one-line change.

This module must import nothing from qmemo and do no I/O: the pure core may import it.
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
DEPS_DIR = REPO_ROOT / ".deps"
LIBOQS_DIR = DEPS_DIR / "liboqs"          # what scripts/setup.sh installs (or links)
NATIVE_DIR = DEPS_DIR / "native"          # our batch verifier, built by the setup
BENCH_C_DIR = REPO_ROOT / "bench_c"
RESULTS_DIR = REPO_ROOT / "results"       # measured here, never committed
DOCS_RESULTS_DIR = REPO_ROOT / "docs" / "results"
