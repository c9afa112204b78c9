"""Where things are: the qMEMO home (the checkout that ran scripts/setup.sh), defined once.

The setup builds into the checkout's `.deps/` (liboqs, our native libraries), the C
suite's sources are its `bench_c/`, benchmarks write `results/`, reports go to
`docs/results/`. None of that is Python package data: the native libraries are built on
and for this machine, so a wheel cannot carry them. The home is therefore found, not
shipped:

1. `$QMEMO_HOME`, when set: a package installed from a wheel (`pip install .` into any
   environment) uses the checkout it names;
2. else the checkout this package was imported from, when it is one (the editable
   install the setup makes: `qmemo/` sits beside `bench_c/` and `scripts/setup.sh`);
3. else no home (`HOME is None`): code that needs the checkout's files raises an error
   whose text is `NO_HOME`, one line naming QMEMO_HOME. Results and reports then go
   under the current directory.

Every module that needs one of these folders takes it from here, so moving one is a
one-line change. This module must import nothing from qmemo (the pure core may import
it); its only I/O is reading the environment and two existence checks, at import.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

HOME_ENV = "QMEMO_HOME"
PACKAGE_PARENT = Path(__file__).resolve().parents[1]   # the checkout, for an editable install
NO_HOME = (f"no qMEMO checkout is known: set {HOME_ENV} to the qMEMO checkout where scripts/setup.sh ran "
           "(it holds .deps/ and bench_c/); a package installed from a wheel carries neither")


def is_checkout(folder: Path) -> bool:
    """A qMEMO checkout: what the setup and the C suite need are there."""
    return (folder / "bench_c").is_dir() and (folder / "scripts" / "setup.sh").is_file()


def find_home(environ: Mapping[str, str] = os.environ, package_parent: Path = PACKAGE_PARENT) -> Path | None:
    """$QMEMO_HOME, else the checkout the package runs from, else None (see the module text)."""
    if value := environ.get(HOME_ENV):
        return Path(value).expanduser().resolve()
    return package_parent if is_checkout(package_parent) else None


HOME = find_home()
# Without a home, what we measure and report still has to go somewhere the user chose:
# the current directory, as any command-line tool's output would.
REPO_ROOT = HOME if HOME is not None else Path.cwd()
DEPS_DIR = REPO_ROOT / ".deps"
LIBOQS_DIR = DEPS_DIR / "liboqs"          # what scripts/setup.sh installs (or links)
NATIVE_DIR = DEPS_DIR / "native"          # our batch verifier, built by the setup
BENCH_C_DIR = REPO_ROOT / "bench_c"
RESULTS_DIR = REPO_ROOT / "results"       # measured here, never committed
DOCS_RESULTS_DIR = REPO_ROOT / "docs" / "results"
