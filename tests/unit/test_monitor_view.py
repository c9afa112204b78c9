"""The dashboard view: rendered to a fixed-width console and read back as text."""

from aiohttp import web
from rich.console import Console

from qmemo.api_schema import KeyCacheFigures
from qmemo.monitor.poll import poll_node
from qmemo.monitor.view import Baseline, NodePoll, Snapshot, derive, render
from qmemo.net.client import open_clients
from tests.unit.api_documents import metrics_snapshot


def metrics(node, *, accepted, committed, verify_count, verify_seconds, cpu_seconds, height=10, verifier="liboqs"):
    return metrics_snapshot(node, accepted=accepted, committed=committed, verify_count=verify_count,
                            verify_seconds=verify_seconds, cpu_seconds=cpu_seconds, height=height,
                            latency_us=(47.0, 95.0), cache=(900, 100), verifier=verifier, key_cache=None)


def snapshot_pair(baseline=Baseline(20_000.0, "results/x/summary.json"), verifier="liboqs"):
    before = Snapshot(100.0, [
        NodePoll("http://a", 100.0, metrics("node-0", accepted=0, committed=0, verify_count=0,
                                             verify_seconds=0.0, cpu_seconds=1.0, verifier=verifier)),
        NodePoll("http://b", 100.0, metrics("node-1", accepted=0, committed=0, verify_count=0,
                                             verify_seconds=0.0, cpu_seconds=1.0)),
    ], baseline)
    return Snapshot(102.0, [
        NodePoll("http://a", 102.0, metrics("node-0", accepted=2_000, committed=1_800, verify_count=6_000,
                                             verify_seconds=0.4, cpu_seconds=2.5, height=11, verifier=verifier)),
        NodePoll("http://b", 102.0, None, "ClientConnectorError"),
    ], baseline, target_tps=1_000.0, previous=before)


def text_of(snapshot, width=160):
    console = Console(width=width, record=True, color_system=None)
    console.print(render(snapshot))
    return console.export_text()


def test_a_down_node_is_shown_down_and_the_others_keep_their_rates():
    text = text_of(snapshot_pair())
    line_a = next(line for line in text.splitlines() if "node-0" in line and "up" in line)
    line_b = next(line for line in text.splitlines() if "http://b" in line and "DOWN" in line)
    assert "1,000" in line_a          # accepted/s: 2,000 over 2 s
    assert "900" in line_a            # committed TPS: 1,800 over 2 s
    assert "3,000" in line_a          # verify/s: 6,000 over 2 s
    assert "75%" in line_a            # CPU: 1.5 s over 2 s
    assert "90%" in line_a            # cache hit rate 900 / 1,000
    assert "-" in line_b
    assert "nodes up" in text and "1 of 2" in text


def test_verify_rate_per_core_is_set_against_the_c_baseline():
    text = text_of(snapshot_pair())
    # 6,000 verifications in 0.4 s of verify time: 15,000/s per core, 75% of 20,000.
    row = next(line for line in text.splitlines() if line.strip().startswith("│ node-0") and "%" in line and "x" in line)
    assert "15,000" in row and "75%" in row
    assert "6.0x" in row              # 15,000 / 2,500 (MEMO conservative, per shard)
    assert "results/x/summary.json" in text


def test_missing_baseline_says_which_command_measures_it():
    text = text_of(snapshot_pair(Baseline(None, "no C baseline yet: run `qmemo bench c --quick`")))
    assert "qmemo bench c --quick" in text
    assert "verifier (1 core)" not in text


def test_first_snapshot_has_no_rates_but_renders():
    first = snapshot_pair().previous
    text = text_of(first)
    assert "node-0" in text and "node-1" in text


def test_a_restarted_node_gives_no_negative_rate():
    snap = snapshot_pair()
    restarted = NodePoll("http://a", 104.0, metrics("node-0", accepted=5, committed=0, verify_count=5,
                                                     verify_seconds=0.001, cpu_seconds=0.2))
    row = derive(restarted, snap.polls[0])
    assert row.accepted_per_s is None and row.cpu_percent is None


async def test_a_node_answering_another_version_shows_down_saying_why(aiohttp_server):
    async def old_metrics(request: web.Request) -> web.Response:
        return web.json_response({"schema": "qmemo-node-metrics/0", "node": "n", "height": "tall"})

    app = web.Application()
    app.router.add_get("/metrics", old_metrics)
    server = await aiohttp_server(app)
    async with open_clients([str(server.make_url(""))]) as (client,):
        poll = await poll_node(client)
    row = derive(poll, None)
    assert not row.up and poll.metrics is None and "qmemo-node-metrics/0" in row.error


def test_a_narrow_terminal_still_shows_each_node_and_which_is_down():
    text = text_of(snapshot_pair(), width=100)
    assert "node-0" in text and "DOWN" in text and "ClientConnectorError"[:10] in text


def test_each_node_shows_its_falcon_verifier_and_key_cache():
    fast = metrics_snapshot("node-0", verifier="fast",
                            key_cache=KeyCacheFigures(1204, 4096, 99, 1, 0.99, ("Falcon-512",)))
    liboqs = metrics_snapshot("node-1", verifier="liboqs", key_cache=None)
    text = text_of(Snapshot(1.0, [NodePoll("http://a", 1.0, fast), NodePoll("http://b", 1.0, liboqs)],
                            Baseline(20_000.0, "x")), width=200)
    [line_a] = [line for line in text.splitlines() if "node-0" in line and "up" in line]
    [line_b] = [line for line in text.splitlines() if "node-1" in line and "up" in line]
    assert "fast (1,204, 99%)" in line_a
    assert "liboqs" in line_b and "fast" not in line_b


def test_a_fast_verifier_node_is_set_against_the_fast_verifiers_c_rate():
    snapshot = snapshot_pair(Baseline(20_000.0, "results/x/summary.json", fast_verify_per_s=50_000.0), "fast")
    text = text_of(snapshot)
    assert "C fast verifier (1 core, cached key)" in text and "50,000" in text
    row = next(line for line in text.splitlines() if line.strip().startswith("│ node-0") and "30%" in line)
    assert "15,000" in row            # 15,000/s per core is 30% of the fast verifier's 50,000, not 75% of liboqs's


def test_the_baseline_carries_the_same_runs_fast_verifier_rate():
    import json
    from pathlib import Path

    from qmemo.monitor.poll import MonitorConfig, load_baseline

    path = Path(__file__).parents[1] / "fixtures" / "c-baseline-quick" / "summary.json"
    rows = json.loads(path.read_text())["verify_implementations"]
    [fast] = [r for r in rows if r["scheme"] == "Falcon-512" and r["public_key"] == "cached decoded key"]
    baseline = load_baseline(MonitorConfig(node_urls=[], baseline_path=path))
    assert baseline.fast_verify_per_s == fast["ops_per_s"] and fast["hash_to_point"] == "variable-time"
