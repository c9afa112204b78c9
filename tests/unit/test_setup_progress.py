"""The setup's build progress line (scripts/lib/ninja-progress.sh): ninja's "[n/N]" lines
become one line rewritten in place, the clock moves on while the build is silent, and
the log still gets every line."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from tests.conftest import REPO_ROOT

FILTER = REPO_ROOT / "scripts" / "lib" / "ninja-progress.sh"


def follow(text: str, tmp_path) -> tuple[str, str]:
    """The filter over `text`, all at once; its silent-build ticks pushed out of reach
    (30 s), so what is shown is exactly one draw per input line."""
    log = tmp_path / "build.log"
    # Bytes, not text: text mode would turn the carriage returns into newlines.
    done = subprocess.run(["bash", "-c", f'"{FILTER}" liboqs 3>"{log}"'], input=text.encode(), capture_output=True,
                          timeout=30, check=True, env={**os.environ, "QMEMO_PROGRESS_TICK_S": "30"})
    return done.stdout.decode(), log.read_text()


def test_each_ninja_step_rewrites_one_line_and_the_log_keeps_everything(tmp_path):
    build = "-- Configuring\n[1/200] Building C object a.o\nwarning: x\n[150/200] Building C object b.o\n[200/200] Linking\n"
    shown, log = follow(build, tmp_path)
    assert log == build
    assert "\n" not in shown                          # one line, rewritten with carriage returns
    updates = [u.removeprefix("\033[K") for u in shown.split("\r")[1:] if "[" in u.split()[2]]
    assert [u.split()[2] for u in updates] == ["[1/200]", "[150/200]", "[200/200]"]
    assert updates[-1].startswith("setup:   liboqs [200/200] 100%")


def test_other_tools_show_their_newest_line_cut_to_fit(tmp_path):
    pip = "Collecting numpy\n\n   Downloading " + "x" * 200 + "\n"
    shown, log = follow(pip, tmp_path)
    assert log == pip
    # "setup:   liboqs  0 s  <the line>", one per non-blank input line
    echoed = [re.fullmatch(r"\033\[Ksetup:   liboqs  \d+ s  (.*)", u).group(1) for u in shown.split("\r") if u]
    assert echoed[0] == "Collecting numpy" and len(echoed) == 2
    assert echoed[1].startswith("Downloading xxx")       # leading blanks dropped
    assert len(echoed[1]) == 60                           # cut to the width
    assert "\n" not in shown


def test_a_last_line_without_its_newline_is_logged_and_shown(tmp_path):
    shown, log = follow("[1/2] a\n[2/2] Linking", tmp_path)
    assert log == "[1/2] a\n[2/2] Linking\n"
    assert shown.split("\r")[-1].startswith("\033[Ksetup:   liboqs [2/2] 100%")


@pytest.mark.skipif(shutil.which("ninja") is None, reason="ninja is not installed (scripts/setup.sh installs it)")
def test_a_real_ninja_build_keeps_the_line_moving_through_a_silent_edge(tmp_path):
    # ninja writes "[n/N]" when an edge finishes (its output is a pipe, not a terminal), so
    # during one long compile - liboqs has several of ~10 s on 2 cores - nothing arrives;
    # the filter must still redraw the line (same step, the clock moving on).
    (tmp_path / "build.ninja").write_text(
        "rule run\n  command = $cmd && touch $out\n  description = $out\n"
        "build a: run\n  cmd = true\n"
        "build b: run a\n  cmd = sleep 2.5\n"
        "build c: run b\n  cmd = true\n")
    log = tmp_path / "build.log"
    done = subprocess.run(["bash", "-c", f'ninja -j1 2>&1 | "{FILTER}" liboqs-build 3>"{log}"'], cwd=tmp_path,
                          capture_output=True, timeout=60, check=True)
    draws = [u.removeprefix("\033[K") for u in done.stdout.decode().split("\r") if u]
    steps = [re.match(r"setup:   liboqs-build (\[\d/3\])", d) for d in draws]
    shown = [m.group(1) for m in steps if m]
    # a's line, then redraws of it while b sleeps, then b's and c's lines
    assert shown[0] == "[1/3]" and shown[-2:] == ["[2/3]", "[3/3]"]
    assert shown.count("[1/3]") >= 2
    assert [line.split()[0] for line in log.read_text().splitlines()] == ["[1/3]", "[2/3]", "[3/3]"]
