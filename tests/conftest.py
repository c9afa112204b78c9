"""Shared test helpers: where the repo is, and how to run the project's own commands."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from qmemo.paths import REPO_ROOT  # noqa: F401 - one definition of the checkout's root, re-exported for tests
VENV_BIN = Path(sys.executable).parent


def run_command(args: list[str], *, env: dict[str, str] | None = None, timeout: float = 120,
                cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess[str]:
    """Run a command to completion with captured text output (never hangs past `timeout`)."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(args, cwd=cwd, env=full_env, capture_output=True, text=True,
                          timeout=timeout, check=False)
