"""The setup and the liboqs loader: clear failures, no downloads, idempotent second run."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, VENV_BIN, run_command

LIBOQS = REPO_ROOT / ".deps" / "liboqs"


@pytest.fixture
def no_network_tools(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment whose git/cmake/curl/wget only record that they were called."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    marker = tmp_path / "called"
    for tool in ("git", "cmake", "curl", "wget"):
        script = fake_bin / tool
        script.write_text(f"#!/bin/sh\necho {tool} \"$@\" >> {marker}\nexit 1\n")
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
    empty_prefix = tmp_path / "no-liboqs"
    empty_prefix.mkdir()
    env = {
        "PATH": f"{fake_bin}{os.pathsep}{os.environ['PATH']}",
        "HOME": str(tmp_path),  # liboqs-python's fallback location would be ~/_oqs
        "QMEMO_LIBOQS_PREFIX": str(empty_prefix),
    }
    return env, marker


def test_missing_liboqs_names_the_setup_command_and_downloads_nothing(no_network_tools):
    env, marker = no_network_tools
    result = run_command([sys.executable, "-c", "from qmemo.crypto import get_scheme; get_scheme('Falcon-512')"],
                         env=env)
    assert result.returncode != 0
    assert "LiboqsNotFound" in result.stderr
    assert "scripts/setup.sh" in result.stderr
    assert not marker.exists(), f"a download or build was attempted: {marker.read_text()}"


def test_cli_reports_missing_liboqs_in_one_line(no_network_tools):
    env, marker = no_network_tools
    result = run_command([str(VENV_BIN / "qmemo"), "schemes"], env=env)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "error:" in result.stderr and "scripts/setup.sh" in result.stderr
    assert not marker.exists()


def test_importing_the_package_and_the_pure_hashing_needs_no_liboqs(no_network_tools):
    env, _ = no_network_tools
    result = run_command([sys.executable, "-c", "import qmemo, qmemo.crypto; from qmemo.crypto import blake3_512"],
                         env=env)
    assert result.returncode == 0, result.stderr


def test_built_liboqs_provides_the_context_string_symbol():
    from qmemo.crypto.liboqs import load_oqs

    oqs = load_oqs()
    # ML-DSA (FIPS 204) signs with a context string; Falcon in liboqs 0.13 does not.
    assert oqs.sig_supports_context("ML-DSA-44") is True
    assert oqs.sig_supports_context("Falcon-512") is False
    assert oqs.sig_supports_context("No-Such-Scheme") is False


def test_liboqs_is_loaded_from_the_setup_folder():
    from qmemo.crypto.liboqs import liboqs_version, load_oqs

    assert Path(load_oqs().oqs.native()._name).resolve().is_relative_to(LIBOQS.resolve())
    assert liboqs_version() == "0.13.0"


@pytest.mark.slow
def test_second_setup_run_builds_and_changes_nothing():
    library = next(LIBOQS.glob("lib*/liboqs.so.0.13.0"))
    stamps = [LIBOQS / ".qmemo-stamp", REPO_ROOT / ".venv" / ".qmemo-stamp"]
    before = [p.stat().st_mtime_ns for p in [library, *stamps]]
    result = run_command(["bash", str(REPO_ROOT / "scripts" / "setup.sh")], timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "", f"the second run did work: {result.stdout}"
    assert [p.stat().st_mtime_ns for p in [library, *stamps]] == before


def test_setup_refuses_a_liboqs_prefix_without_a_library(tmp_path):
    result = run_command(["bash", str(REPO_ROOT / "scripts" / "setup.sh")],
                         env={"QMEMO_LIBOQS_PREFIX": str(tmp_path)})
    assert result.returncode != 0
    assert "has no lib/liboqs.so" in result.stderr
    assert not LIBOQS.is_symlink()
