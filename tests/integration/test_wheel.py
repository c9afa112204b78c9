"""The package installed from a wheel, outside the checkout: it finds the checkout through
QMEMO_HOME, and without it fails in one line naming QMEMO_HOME (qmemo/paths.py).

The wheel is built from a copy of the package's sources (so the build leaves nothing in
the checkout) and installed with `--no-deps` into a fresh venv whose dependencies come
from this checkout's .venv through a .pth line: the same pinned versions, without
downloading matplotlib again. A .pth *line* adds a folder to sys.path without running the
.pth files inside it, so .venv's editable-install hook stays off and `qmemo` can only be
the wheel's copy (the test checks which file it imported).
"""

from __future__ import annotations

import os
import shutil
import site
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, VENV_BIN, run_command

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO_ROOT / name, source / name)
    shutil.copytree(REPO_ROOT / "qmemo", source / "qmemo", ignore=shutil.ignore_patterns("__pycache__"))
    built = run_command([str(VENV_BIN / "pip"), "wheel", "--no-deps", "--no-build-isolation", "-q",
                         "-w", str(tmp / "dist"), str(source)], cwd=tmp, timeout=300)
    assert built.returncode == 0, built.stderr
    wheel = next((tmp / "dist").glob("qmemo-*.whl"))
    venv = tmp / "venv"
    made = run_command([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp)
    assert made.returncode == 0, made.stderr
    venv_site = next(venv.glob("lib/python3*/site-packages"))
    (venv_site / "qmemo_test_deps.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    installed = run_command([str(VENV_BIN / "pip"), "--python", str(venv / "bin" / "python"), "install",
                             "--no-deps", "-q", str(wheel)], cwd=tmp, timeout=300)
    assert installed.returncode == 0, installed.stderr
    return venv


def outside_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("QMEMO_HOME", "QMEMO_LIBOQS_PREFIX", "PYTHONPATH")}
    return {**env, **extra}


def test_the_wheel_imports_its_own_copy_not_the_checkout(wheel_venv, tmp_path):
    done = run_command([str(wheel_venv / "bin" / "python"), "-c", "import qmemo, qmemo.paths as p; "
                        "print(qmemo.__file__); print(p.HOME)"], env=outside_env(), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    module_file, home = done.stdout.split()
    assert Path(module_file).is_relative_to(wheel_venv) and home == "None"


def test_qmemo_schemes_from_the_wheel_works_with_qmemo_home(wheel_venv, tmp_path):
    done = run_command([str(wheel_venv / "bin" / "qmemo"), "schemes"], env=outside_env(QMEMO_HOME=str(REPO_ROOT)),
                       cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Falcon-512" in done.stdout and "ML-DSA-44" in done.stdout


def test_without_qmemo_home_the_error_is_one_line_naming_it(wheel_venv, tmp_path):
    done = run_command([str(wheel_venv / "bin" / "qmemo"), "schemes"], env=outside_env(), cwd=tmp_path)
    assert done.returncode == 1
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith("error:") and "QMEMO_HOME" in done.stderr


def test_without_qmemo_home_the_report_still_reads_result_files(wheel_venv, tmp_path):
    fixture = REPO_ROOT / "tests" / "fixtures" / "c-baseline-quick"
    done = run_command([str(wheel_venv / "bin" / "qmemo"), "report", "--results", str(fixture),
                        "--out", str(tmp_path / "out")], env=outside_env(), cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "REPORT.md").is_file() and (tmp_path / "out" / "REPORT.html").is_file()


def test_the_wheel_carries_the_conformance_case_files_a_node_checks_at_start(wheel_venv, tmp_path):
    code = ("import qmemo.crypto.conformance as c; print(c.__file__); "
            "print(sum(len(c.cases_for(name).cases) for name in sorted(c.REQUIRED)))")
    done = run_command([str(wheel_venv / "bin" / "python"), "-c", code], env=outside_env(QMEMO_HOME=str(REPO_ROOT)),
                       cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    module_file, count = done.stdout.split()
    assert Path(module_file).is_relative_to(wheel_venv) and int(count) > 0
