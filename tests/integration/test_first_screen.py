"""The first screen of `./devnet.sh` on a machine with no C baseline: "% of C" figures at once.

devnet.sh runs on a pseudo-terminal (as a person's shell would give it), with an empty
results folder: it must measure a quick, verify-only baseline (with its progress line),
start the devnet and the dashboard, and the dashboard's first screens must name that run
and set every node against it. A second `--if-missing` call then finds the run and
measures nothing.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest

from qmemo.bench.c_baseline import find_c_baseline
from qmemo.bench import fingerprint
from tests.conftest import REPO_ROOT, VENV_BIN
from tests.integration.test_devnet import free_base_port, processes_mentioning

pytestmark = pytest.mark.slow
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\r")
# A node's row of the baseline table: the node, the C row it is set against, a percentage.
NODE_AGAINST_C = re.compile(r"node-\d\s.*C (fast verifier|liboqs)\s.*\s\d[\d,]*%")


def read_until(fd: int, process: subprocess.Popen, done, deadline_s: float) -> str:
    """Everything the terminal showed, until `done(text)` or the deadline (or the process ends)."""
    chunks: list[bytes] = []
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                chunks.append(os.read(fd, 65536))
            except OSError:      # the terminal closed: the process is gone
                break
            if done(ANSI.sub("", b"".join(chunks).decode(errors="replace"))):
                break
        elif process.poll() is not None:
            break
    return ANSI.sub("", b"".join(chunks).decode(errors="replace"))


def test_first_devnet_run_measures_a_quick_baseline_and_shows_percent_of_c(tmp_path):
    base = free_base_port()
    results = tmp_path / "results"
    primary, secondary = pty.openpty()
    # A wide terminal, so the tables are not squeezed into wrapped columns.
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 60, 220, 0, 0))
    command = ["bash", str(REPO_ROOT / "devnet.sh"), "--base-port", str(base), "--dir", str(tmp_path / "devnet"),
               "--runs", str(tmp_path / "runs"), "--results", str(results), "--accounts", "200",
               "--tps", "100", "--duration", "60"]
    process = subprocess.Popen(command, stdin=secondary, stdout=secondary, stderr=secondary, cwd=REPO_ROOT,
                               start_new_session=True, env={**os.environ, "TERM": "xterm-256color"})
    os.close(secondary)
    try:
        screen = read_until(primary, process, lambda text: NODE_AGAINST_C.search(text), deadline_s=150)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)       # Ctrl-C, as a person would
        try:
            rest = read_until(primary, process, lambda text: "stopped everything" in text, deadline_s=60)
        finally:
            os.close(primary)
        process.wait(timeout=30)
    measured = find_c_baseline("Falcon-512", fingerprint.current(), results)
    assert measured is not None, screen[-3000:]
    assert measured.summary.quick and measured.kind == "quick, verify only"
    assert f"C baseline {measured.run_id} (quick, verify only)" in screen        # the one line bench c ends with
    assert f"run {measured.run_id} (quick, verify only, measured" in screen      # the dashboard names it
    assert NODE_AGAINST_C.search(screen), screen[-3000:]
    assert "stopped everything" in rest
    assert processes_mentioning(str(tmp_path)) == []
    # A second first screen finds the run and measures nothing.
    again = subprocess.run([str(VENV_BIN / "qmemo"), "bench", "c", "--verify-only", "--if-missing", "Falcon-512",
                            "--results", str(results), "--brief"], capture_output=True, text=True, timeout=60)
    assert again.returncode == 0 and "nothing to measure" in again.stdout
    assert sorted(p.name for p in results.iterdir()) == [measured.run_id]
