"""devnet.sh end to end: three real nodes, the generator at a low rate, the dashboard once.

One headless devnet run (`devnet.sh --no-monitor --duration 10 --tps 50 --block-ms 500`) is
shared by the tests that read its results; a second, without load, keeps nodes up while
the dashboard takes one snapshot of them. Both must end by themselves and leave no process.
"""

from __future__ import annotations

import csv
import math
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import orjson
import pytest

from qmemo.analysis.devnet import load_devnet_run
from qmemo.load.node_stages import NODE_STAGES_FILE, read_node_stages
from tests.conftest import REPO_ROOT, VENV_BIN, run_command

pytestmark = pytest.mark.slow
NODES = 3


def _ephemeral_ports_start() -> int:
    """The first port the kernel hands out for outbound connections (Linux's default 32768)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_base_port(count: int = NODES) -> int:
    """A base port whose `count` consecutive ports are all free now.

    The search starts at an offset taken from this process's id: test suites of several
    checkouts running at once on one machine would otherwise all probe 21000, 21097, ...
    in the same order, and two of them could pick the same ports between this probe and
    devnet.sh binding them (its nodes then fail while the other suite's nodes answer).

    The search stays below the kernel's ephemeral range: a port in it can be taken by any
    outbound connection between this probe and the nodes' bind (a CI run's node-2 found
    39044 "already in use" that way)."""
    top = _ephemeral_ports_start() - count
    start = 21000 + (os.getpid() % 100) * 97
    for base in [*range(start, top, 97), *range(21000, start, 97)]:
        sockets = []
        try:
            for port in range(base, base + count):
                sock = socket.socket()
                sockets.append(sock)
                sock.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for sock in sockets:
                sock.close()
    raise RuntimeError("no free ports")


def processes_mentioning(text: str) -> list[str]:
    """Command lines of live processes that mention `text` (our temp paths are unique)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        line = b" ".join(args).decode(errors="replace")
        if text in line and "pytest" not in line:
            found.append(line)
    return found


def _bindable(port: int) -> bool:
    """Nothing listens on `port` (SO_REUSEADDR: closed connections in TIME_WAIT do not count)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def devnet_command(tmp: Path, base: int, *extra: str) -> list[str]:
    return ["bash", str(REPO_ROOT / "devnet.sh"), "--no-monitor", "--base-port", str(base),
            "--dir", str(tmp / "devnet"), "--runs", str(tmp / "runs"), "--accounts", "60", *extra]


@pytest.fixture(scope="module")
def devnet_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("devnet")
    base = free_base_port()
    # 500 ms blocks (devnet.sh's default is 2 s): the run's last transactions are final in
    # about a second after the load, not five.
    result = run_command(devnet_command(tmp, base, "--duration", "10", "--tps", "50", "--block-ms", "500"), timeout=240)
    runs = sorted((tmp / "runs").iterdir())
    return {"tmp": tmp, "base": base, "result": result, "run": runs[-1] if runs else None}


def attach_logs(run: Path | None) -> str:
    if run is None:
        return "(no run folder)"
    return "\n".join(f"--- {log.name}\n{log.read_text()[-3000:]}" for log in sorted((run / "logs").glob("*.log")))


def _signals_as_at_a_terminal() -> None:
    """In the child: Ctrl-C, SIGTERM and SIGHUP as a shell at a terminal gets them. A suite
    started in the background inherits SIGINT ignored, and a shell cannot trap a signal
    ignored when it started, so devnet.sh would never see the test's Ctrl-C."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def start_nodes_only_devnet(tmp: Path, base: int) -> subprocess.Popen[str]:
    """devnet.sh without load for up to 300 s, returned once all its nodes are healthy."""
    devnet = subprocess.Popen(devnet_command(tmp, base, "--no-load", "--duration", "300"),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              preexec_fn=_signals_as_at_a_terminal)
    urls = [f"http://127.0.0.1:{base + i}" for i in range(NODES)]
    ready = run_command([str(VENV_BIN / "qmemo"), "health", *urls, "--wait", "60"], timeout=90)
    if ready.returncode != 0:
        output = stop_devnet(devnet, signal.SIGINT)
        raise AssertionError(f"the devnet's nodes did not become healthy:\n{ready.stdout}\n{output}")
    return devnet


def stop_devnet(devnet: subprocess.Popen[str], sig: signal.Signals) -> str:
    """Send `sig` to devnet.sh and wait for it to end: its output."""
    devnet.send_signal(sig)
    output, _ = devnet.communicate(timeout=60)
    return output


def assert_stopped_everything(output: str, tmp: Path) -> None:
    """devnet.sh said so, and no process it started (they all mention `tmp`) is left."""
    assert "stopped everything" in output
    deadline = time.monotonic() + 10
    while processes_mentioning(str(tmp)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_mentioning(str(tmp)) == []


def stop_times(run: Path) -> dict[str, float]:
    """Each node's "stopping" log line (SIGTERM seen), as seconds of the day."""
    out = {}
    for log in sorted((run / "logs").glob("*node-*.log")):
        for line in log.read_text().splitlines():
            if line.endswith(" stopping"):
                clock = line.split()[1]                       # 13:41:16,299
                h, m, sec = clock.replace(",", ".").split(":")
                out[log.stem] = int(h) * 3600 + int(m) * 60 + float(sec)
    return out


def test_headless_devnet_ends_by_itself_and_commits(devnet_run):
    result = devnet_run["result"]
    assert result.returncode == 0, result.stdout + result.stderr + attach_logs(devnet_run["run"])
    summary = orjson.loads((devnet_run["run"] / "gen" / "summary.json").read_bytes())
    assert summary["counts"]["committed"] > 0
    assert "committed" in result.stdout and "run folder" in result.stdout


def test_headless_devnet_leaves_no_process_and_frees_its_ports(devnet_run):
    assert processes_mentioning(str(devnet_run["tmp"])) == []
    assert all(_bindable(port) for port in range(devnet_run["base"], devnet_run["base"] + NODES))


def test_every_planned_transaction_is_accounted_for(devnet_run):
    counts = orjson.loads((devnet_run["run"] / "gen" / "summary.json").read_bytes())["counts"]
    assert counts["planned"] == 500  # 50 TPS for 10 s
    assert (counts["committed"] + counts["rejected_total"] + counts["lost"] + counts["failed"]
            + counts["unsent"]) == counts["planned"]
    assert counts["accounted"] == counts["planned"]


def test_latencies_are_ordered_for_every_transaction(devnet_run):
    rows = list(csv.DictReader((devnet_run["run"] / "gen" / "transactions.csv").open()))
    assert len(rows) == 500
    committed = [r for r in rows if r["committed_s"] and r["accepted_s"]]
    assert committed
    for row in committed:
        intended, sent, accepted, done = (float(row[k]) for k in ("intended_s", "sent_s", "accepted_s", "committed_s"))
        assert intended <= sent <= accepted  # never sent early; answered after sent
        # intended->committed >= sent->committed >= sent->accepted
        assert done - intended >= done - sent >= 0
        assert done - sent >= accepted - sent or math.isclose(done, accepted, abs_tol=0.2)


def test_summary_has_every_documented_field(devnet_run):
    summary = orjson.loads((devnet_run["run"] / "gen" / "summary.json").read_bytes())
    for key in ("schema", "target_tps", "committed_tps", "counts", "latency_ms", "schedule_lag_ms",
                "generator_fell_behind", "warmup_s", "measured_s", "throughput_saturated", "latency_saturated", "why"):
        assert key in summary
    for name in ("intended_to_committed", "sent_to_committed", "sent_to_accepted"):
        percentiles = summary["latency_ms"][name]["percentiles_ms"]
        assert set(percentiles) == {"p50", "p90", "p95", "p99", "p99.9"}
    ordered = summary["latency_ms"]
    assert (ordered["intended_to_committed"]["percentiles_ms"]["p50"]
            >= ordered["sent_to_committed"]["percentiles_ms"]["p50"]
            >= ordered["sent_to_accepted"]["percentiles_ms"]["p50"])
    # The report reads the run with the writer's own schema, verdicts included.
    run = load_devnet_run(devnet_run["run"] / "gen")
    assert (run.committed_tps, run.throughput_saturated, run.latency_saturated) == \
        (summary["committed_tps"], summary["throughput_saturated"], summary["latency_saturated"])
    manifest = orjson.loads((devnet_run["run"] / "gen" / "manifest.json").read_bytes())
    assert manifest["genesis_hash"] and manifest["machine"]["cpu_model"]
    sender = manifest["sender"]
    assert 1 <= sender["max_in_flight_seen"] <= manifest["config"]["send"]["max_in_flight"]
    assert sender["blocks_seen"] >= 1
    # Which Falcon verifier each node ran (devnet.sh's default: the fast one) and its key cache.
    verifiers = manifest["node_verifiers"]
    assert len(verifiers) == NODES and all(v["verifier"] == "fast" and v["key_cache"]["size"] >= 1
                                           for v in verifiers.values())


def test_dashboard_snapshot_of_live_nodes_then_ctrl_c_stops_everything(tmp_path):
    """Nodes without load; `qmemo monitor --once` shows all three up; SIGINT (Ctrl-C) to
    devnet.sh stops every process it started, long before its duration ends."""
    base = free_base_port()
    devnet = start_nodes_only_devnet(tmp_path, base)
    try:
        shot = run_command([str(VENV_BIN / "qmemo"), "monitor", "--count", str(NODES), "--base-port", str(base),
                            "--interval", "1", "--once"], env={"COLUMNS": "200"}, timeout=60)
        assert shot.returncode == 0, shot.stdout + shot.stderr
        for i in range(NODES):
            assert f"node-{i}" in shot.stdout
        assert shot.stdout.count(" up ") >= NODES and "DOWN" not in shot.stdout
        assert "against the C baseline" in shot.stdout
    finally:
        output = stop_devnet(devnet, signal.SIGINT)
    assert devnet.returncode == 130, output
    assert_stopped_everything(output, tmp_path)
    # Every node is signalled first and then waited for together: their stops overlap (one
    # after another, each waited for the one before it, up to ~4 s a node).
    (run,) = (tmp_path / "runs").iterdir()
    stopping = stop_times(run)
    assert len(stopping) == NODES and max(stopping.values()) - min(stopping.values()) < 1.5, stopping


def test_nodes_only_run_ends_by_itself_and_stops_its_nodes(tmp_path):
    base = free_base_port()
    result = run_command(devnet_command(tmp_path, base, "--no-load", "--duration", "1"), timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "stopped everything" in result.stdout
    assert processes_mentioning(str(tmp_path)) == []


def test_a_folder_that_is_not_a_devnet_is_never_deleted(tmp_path):
    precious = tmp_path / "notes"
    precious.mkdir()
    (precious / "keep.txt").write_text("precious")
    result = run_command(["bash", str(REPO_ROOT / "devnet.sh"), "--no-monitor", "--no-load", "--duration", "1",
                          "--base-port", str(free_base_port()), "--dir", str(precious)], timeout=60)
    assert result.returncode == 1
    assert "not a devnet" in result.stderr
    assert (precious / "keep.txt").read_text() == "precious"


def test_ports_in_use_are_refused_before_anything_starts(tmp_path):
    base = free_base_port()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", base + 1))
        busy.listen()
        result = run_command(devnet_command(tmp_path, base, "--no-load", "--duration", "1"), timeout=60)
    assert result.returncode == 1
    assert f"port {base + 1} is already in use" in result.stderr
    assert not (tmp_path / "devnet").exists()


@pytest.mark.parametrize("args", [["--nodes", "08"], ["--tps", "0"], ["--duration", "-3"], ["--bogus"]])
def test_bad_options_are_refused_with_one_line(tmp_path, args):
    result = run_command(["bash", str(REPO_ROOT / "devnet.sh"), *args, "--dir", str(tmp_path / "d")], timeout=30)
    assert result.returncode == 2
    assert result.stderr.startswith("devnet.sh: ") and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "d").exists()


def test_devnet_prints_a_report_command_that_writes_a_folder_of_its_own_run(devnet_run, tmp_path):
    """The last line devnet.sh prints is a `qmemo report --devnet <run folder>` that runs, and
    the folder it names for the report is the run's own (docs/results/<run id>/), so the
    next run's report lands beside it, not over it."""
    line = next(l for l in devnet_run["result"].stdout.splitlines() if "its report (into " in l)
    folder, command = line.split("its report (into ", 1)[1].split("): ", 1)
    command = command.split()
    run = devnet_run["run"]
    assert command[1:] == ["report", "--devnet", str(run)] and folder == f"docs/results/{run.name}/"
    fixture = REPO_ROOT / "tests" / "fixtures" / "c-baseline-quick"
    # QMEMO_HOME puts docs/results/ under tmp_path: the report is written where a checkout's would be.
    done = run_command([*command, "--results", str(fixture)], env={**os.environ, "QMEMO_HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    report = (tmp_path / folder / "REPORT.md").read_text()
    assert f"devnet run: `{run / 'gen' / 'summary.json'}`" in report
    assert report.startswith(f"# qMEMO report: devnet run {run.name}\n")
    # The run folder keeps the command as typed, for the README's results block.
    assert (run / "command").read_text().startswith("./devnet.sh --no-monitor --base-port ")


def test_the_generator_folder_keeps_its_latency_histograms(devnet_run):
    """A real run's .hgrm ends at percentile 1 with summary.json's count and max."""
    gen = devnet_run["run"] / "gen"
    latency = orjson.loads((gen / "summary.json").read_bytes())["latency_ms"]["intended_to_committed"]
    last = [line.split() for line in (gen / "latency-intended_to_committed.hgrm").read_text().splitlines()
            if line[:1] == " " and line.strip()][-1]
    assert (float(last[0]), float(last[1]), int(last[2])) == (latency["max_ms"], 1.0, latency["count"])
    for kind in ("intended_to_committed", "sent_to_committed", "sent_to_accepted", "schedule_lag"):
        assert (gen / f"latency-{kind}.hlog").read_text().count("\n") == 5


def test_the_generator_folder_keeps_every_nodes_stage_costs(devnet_run):
    """node-stages.json: each node's CPU by stage over the run, read with the writer's schema."""
    costs = read_node_stages(devnet_run["run"] / "gen" / NODE_STAGES_FILE)
    assert len(costs.nodes) == NODES
    for node in costs.nodes:
        assert node.admitted > 0, node.node
        assert node.event_loop == "uvloop", node.node      # devnet.sh's default, read from the node
        assert node.cpu_s["verify"] > 0 and node.cpu_s["decode_hash"] > 0, node.node
        # "other" is the rest of the process's CPU (never below zero: a pool job that straddled
        # the first reading may tip the stages over it by that job's CPU)
        assert sum(node.cpu_s.values()) == pytest.approx(node.process_cpu_s, abs=0.01), node.node
        # That tip is the overrun, kept in the file: at most the jobs in flight at the first
        # reading (one per verify thread, plus a store write), each a chunk of a batch that
        # takes milliseconds here, so 10 ms; more would mean a stage counts CPU twice.
        assert node.overrun_cpu_s is not None and 0 <= node.overrun_cpu_s <= 0.01, node.node
        assert sum(node.cpu_s.values()) == pytest.approx(node.process_cpu_s + node.overrun_cpu_s), node.node
