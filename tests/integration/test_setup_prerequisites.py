"""The setup's prerequisites: what it cannot install itself is one line naming it, not a crash later.

The setup runs from a scratch copy of `scripts/` (so its `.deps/` is empty and liboqs is
still to be built) with a PATH that has neither cargo nor apt-get: it must stop at the
first step, name cargo, and start no fetch or build.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests.conftest import REPO_ROOT, run_command

HIDDEN_TOOLS = {"cargo", "apt-get", "cmake", "git", "curl", "wget"}


def path_without(tools: set[str], bin_dir: Path) -> str:
    """A PATH of one folder linking every system tool except `tools`."""
    bin_dir.mkdir()
    for folder in ("/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"):
        if not os.path.isdir(folder):
            continue
        for entry in os.scandir(folder):
            target = bin_dir / entry.name
            if entry.name not in tools and not target.exists() and os.access(entry.path, os.X_OK):
                target.symlink_to(entry.path)
    return str(bin_dir)


def test_missing_cargo_without_apt_is_one_line_naming_it(tmp_path: Path):
    clone = tmp_path / "clone"
    shutil.copytree(REPO_ROOT / "scripts", clone / "scripts")
    # An empty QMEMO_LIBOQS_PREFIX counts as unset: liboqs is to be built from source.
    env = {"PATH": path_without(HIDDEN_TOOLS, tmp_path / "bin"), "HOME": str(tmp_path), "QMEMO_LIBOQS_PREFIX": ""}
    result = run_command(["bash", str(clone / "scripts" / "setup.sh")], env=env, cwd=clone, timeout=60)
    assert result.returncode == 1, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("setup: ERROR: missing packages (") and "cargo" in lines[0]
    assert "no apt-get" in lines[0]
    # Stopped before step 2: nothing fetched, nothing built.
    assert not (clone / ".deps" / "fetch-liboqs").exists()
    assert not (clone / ".deps" / "liboqs").exists()


def test_cargo_is_not_asked_for_when_liboqs_comes_from_elsewhere(tmp_path: Path):
    """With QMEMO_LIBOQS_PREFIX nothing is fetched, so a missing cargo is no reason to stop."""
    clone = tmp_path / "clone"
    shutil.copytree(REPO_ROOT / "scripts", clone / "scripts")
    env = {"PATH": path_without(HIDDEN_TOOLS, tmp_path / "bin"), "HOME": str(tmp_path),
           "QMEMO_LIBOQS_PREFIX": str(tmp_path / "empty-prefix")}
    result = run_command(["bash", str(clone / "scripts" / "setup.sh")], env=env, cwd=clone, timeout=60)
    # It goes past the apt step and stops at the liboqs step, on the prefix, not on cargo.
    assert result.returncode == 1
    assert "missing packages" not in result.stderr and "installing Debian packages" not in result.stdout
    assert "has no lib/liboqs.so" in result.stderr
