"""`qmemo soak` in short form (the real run is ten minutes, not in CI; docs/soak.md)."""

from __future__ import annotations

import contextlib
import io
import os
import select
import signal
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from qmemo.cli import main as qmemo_main
from tests.conftest import REPO_ROOT, VENV_BIN
from tests.integration.nodes import processes_using

pytestmark = pytest.mark.slow


def test_a_short_soak_samples_every_node_checks_the_accounting_and_stops_everything(tmp_path: Path):
    out = tmp_path / "soak"
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        status = qmemo_main(["soak", "--rate", "60", "--duration", "12", "--interval", "1", "--cost-window", "3",
                             "--out", str(out), "--accounts", "30", "--block-interval-ms", "500"])
    document = orjson.loads((out / "soak.json").read_bytes())
    assert document["schema"] == "qmemo-soak/3" and set(document["nodes"]) == {"node-0", "node-1", "node-2"}
    assert document["memory"].startswith("anonymous")
    for name in document["nodes"]:
        node_samples = [s for s in document["timeline"] if s["node"] == name]
        assert len(node_samples) >= 8 and all(0 < s["rss_anon_bytes"] < s["rss_bytes"] and s["fds"] > 0
                                              for s in node_samples)
        assert document["summary"][name]["verdict"] in ("flat", "growing")
    accounting = document["accounting"]
    assert accounting["holds"] and accounting["counts"]["planned"] == 720, printed.getvalue()
    assert document["load"]["held"] == (document["load"]["committed_share"] >= 0.99), document["load"]
    assert document["verdict"] in ("flat", "not flat")
    costs = document["stage_costs"]            # each node's stage costs read every 3 s under load
    for name in document["nodes"]:
        windows = [w for w in costs["windows"] if w["node"] == name]
        assert len(windows) >= 3 and all(w["t_end_s"] - w["t_start_s"] >= 3 for w in windows)
        loaded = [w for w in windows if w["admitted"]]
        assert loaded and all(w["us_per_tx"]["store"] > 0 and w["us_per_tx"]["verify"] > 0 for w in loaded), windows
        assert costs["summary"][name]["verdict"] in ("flat", "growing", "too few samples")
    assert costs["verdict"] in ("flat", "not flat", "too few samples")
    assert status == (0 if document["verdict"] == "flat" and costs["verdict"] != "not flat"
                      and document["load"]["held"] else 1)
    assert "verdict:" in printed.getvalue() and "identity holds" in printed.getvalue()
    for pid in document["nodes"].values():        # every node stopped
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert set(document["exit_codes"].values()) == {0}


def test_sigterm_to_the_soak_stops_every_process_it_started_and_exits_130(tmp_path: Path):
    out = tmp_path / "soak"
    process = subprocess.Popen([str(VENV_BIN / "qmemo"), "soak", "--rate", "30", "--duration", "120", "--interval",
                                "1", "--out", str(out), "--accounts", "30", "--block-interval-ms", "500"],
                               cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + 120
        while True:                             # the nodes are up once it says so
            assert time.monotonic() < deadline, "the soak never said its nodes were ready"
            if not select.select([process.stdout], [], [], 1.0)[0]:
                continue
            line = process.stdout.readline()
            assert line, f"the soak ended before its nodes were ready (exit {process.wait()})"
            if "nodes ready" in line:
                break
        started = processes_using(out)
        assert len(started) >= 3, started
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=90)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, output
    assert processes_using(out) == []
