"""scripts/memlog: a process that names `node` among its arguments logs its memory
accounting; any other process, or one without QMEMO_MEMLOG, is left alone."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallinfo2 is glibc's")

LINE = re.compile(r"^t=\d+ rss=[\d.]+ pyblocks=\d+ heap=[\d.]+ heap_used=[\d.]+ heap_free=[\d.]+ mmap=[\d.]+ "
                  r"mmaps=\d+ threads=\d+$")


def _run(tmp_path: Path, *args: str, memlog: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT / "scripts" / "memlog"), "QMEMO_MEMLOG_DIR": str(tmp_path),
           "QMEMO_MEMLOG_PERIOD": "0.05"}
    if memlog:
        env["QMEMO_MEMLOG"] = "1"
    return subprocess.run([sys.executable, "-c", "import time; time.sleep(0.5)", *args], env=env, check=True)


def test_a_node_process_writes_one_line_per_period_with_every_field(tmp_path: Path):
    _run(tmp_path, "node")
    log = next(tmp_path.glob("mem-*.log"))
    lines = log.read_text().splitlines()
    assert len(lines) >= 3 and all(LINE.match(line) for line in lines), lines


def test_other_processes_and_a_node_without_the_switch_are_left_alone(tmp_path: Path):
    _run(tmp_path, "gen")
    _run(tmp_path, "node", memlog=False)
    assert list(tmp_path.glob("mem-*.log")) == []
