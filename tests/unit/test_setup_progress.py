"""The setup's build progress line (scripts/lib/ninja-progress.sh): ninja's "[n/N]" lines
become one line rewritten in place, and the log still gets every line."""

from __future__ import annotations

import re
import subprocess

from tests.conftest import REPO_ROOT

FILTER = REPO_ROOT / "scripts" / "lib" / "ninja-progress.sh"


def follow(text: str, tmp_path) -> tuple[str, str]:
    log = tmp_path / "build.log"
    # Bytes, not text: text mode would turn the carriage returns into newlines.
    done = subprocess.run(["bash", "-c", f'"{FILTER}" liboqs 3>"{log}"'], input=text.encode(), capture_output=True,
                          timeout=30, check=True)
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
