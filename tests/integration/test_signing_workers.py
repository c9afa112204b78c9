"""The generator's signing workers end with it: a generator killed while it signs a large
plan (a soak stopped during signing) must not leave its worker processes behind."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="plans are signed on processes with 2+ cores")

SIGNER = """
from qmemo.core.transaction import derive_address
from qmemo.crypto.schemes import get_scheme
from qmemo.load import workload

scheme = get_scheme("Falcon-512")
keys = [scheme.keypair() for _ in range(3)]
accounts = [workload.Account(k.public_key, k.secret_key, derive_address(scheme.info.scheme_id, k.public_key), 0)
            for k in keys]
workload.PROCESS_SIGNING_MIN = 1
for n, _ in enumerate(workload.sign_chunks([(i % 3, i // 3) for i in range(300_000)], accounts, scheme="Falcon-512",
                                          chain_id=5, fee=2)):
    if n == 0:
        print("first chunk signed", flush=True)     # the plan is under way: the test may kill us now
"""


def _workers(pid: int) -> list[int]:
    """The pool's worker processes among `pid`'s children (not multiprocessing's resource tracker)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                status = (entry / "status").read_text()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if f"\nPPid:\t{pid}\n" in status and b"spawn_main" in cmdline:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        return "\nState:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def test_signing_workers_exit_when_the_generator_is_killed():
    parent = subprocess.Popen([sys.executable, "-c", SIGNER], cwd=REPO_ROOT, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        workers: list[int] = []
        while len(workers) < 2:
            assert parent.poll() is None and time.monotonic() < deadline, "no signing workers started"
            time.sleep(0.1)
            workers = _workers(parent.pid)
        # Well into the plan (sixty chunks of 5,000): once the first chunk is back, the workers
        # hold the next ones and the queue's lock.
        assert parent.stdout is not None
        while not select.select([parent.stdout], [], [], 0.5)[0] or not parent.stdout.readline():
            assert parent.poll() is None and time.monotonic() < deadline, "no chunk signed"
        assert parent.poll() is None and len(_workers(parent.pid)) >= 2
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 30
        while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = [pid for pid in workers if _alive(pid)]
    finally:
        if parent.poll() is None:
            parent.kill()
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == [], f"signing workers {left} outlived their generator"
