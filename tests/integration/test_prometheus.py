"""Prometheus and Grafana against real nodes: deploy/prometheus.yml, a live scrape, the board's queries.

A real Prometheus server (the Debian package the setup installs) runs on a free loopback
port with its own storage in a temp dir, scraping three real nodes with the scrape config
of deploy/prometheus.yml (targets and interval adapted) while the real generator (`qmemo
gen`) loads them for 14 s; it is stopped by PID. Every wait is a predicate with a deadline.
The Grafana board (deploy/grafana/qmemo.json) is checked against the same live nodes:
every metric its queries name exists on a node's exposition, and every panel's every
query returns data when evaluated at a moment of the load, as Grafana would ask for it.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import REPO_ROOT, VENV_BIN, run_command
from tests.integration.nodes import Network, NodeProcess, Wallet, free_port, http, make_devnet

pytestmark = pytest.mark.slow

PROMETHEUS_CONFIG = REPO_ROOT / "deploy" / "prometheus.yml"
GRAFANA_BOARD = REPO_ROOT / "deploy" / "grafana" / "qmemo.json"
PROMETHEUS, PROMTOOL = shutil.which("prometheus"), shutil.which("promtool")
needs_prometheus = pytest.mark.skipif(
    PROMETHEUS is None or PROMTOOL is None,
    reason="prometheus/promtool not on PATH and the setup could not install them: scripts/setup.sh installs "
           "the Debian package `prometheus` (it needs apt-get and root or sudo)")

# PromQL words that look like metric names: aggregation modifiers and binary operators.
PROMQL_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
                   "bool", "offset"}


def promql_metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (not its functions, labels or keywords)."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)                # string literals
    expr = re.sub(r"\{[^}]*\}", "", expr)                           # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)                          # range selectors
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    names = re.findall(r"(?<![\w$.])([A-Za-z_:][A-Za-z0-9_:]*)\b(?!\s*\()", expr)
    return set(names) - PROMQL_KEYWORDS


def board_queries() -> list[tuple[str, str]]:
    """(panel title, PromQL) for every query of the Grafana board, rows' nested panels too."""
    board = orjson.loads(GRAFANA_BOARD.read_bytes())
    queries = []
    for panel in board["panels"] + [inner for row in board["panels"] for inner in row.get("panels", [])]:
        queries += [(panel["title"], target["expr"]) for target in panel.get("targets", [])]
    return queries


# Grafana's $__rate_interval is four scrape intervals (20 s with the deploy file's 5 s, the
# data source setting the board's description asks for); this test scrapes every second.
RATE_INTERVAL = "10s"
# The tests query at one moment, 12 s into the load (a 10 s window of load before it): the
# load goes on only 2 s past it, so the suite does not wait for seconds no query reads.
LOAD_TPS, LOAD_S = 100, 14


def as_live_query(expr: str) -> str:
    """A board query with Grafana's variables replaced as Grafana would (all nodes, a short window)."""
    return expr.replace("$__rate_interval", RATE_INTERVAL).replace("$instance", ".*")


def board_panels() -> list[dict[str, Any]]:
    board = orjson.loads(GRAFANA_BOARD.read_bytes())
    return [panel for panel in board["panels"] if panel["type"] != "row"]


def exposition_families(text: str) -> tuple[set[str], dict[str, str]]:
    """The sample names of a text exposition, and its declared families with their types."""
    samples = {re.split(r"[{ ]", line, maxsplit=1)[0] for line in text.splitlines() if line and line[0] != "#"}
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    return samples, types


# --- the deploy files on their own ----------------------------------------------------------------

@needs_prometheus
def test_deploy_prometheus_config_passes_promtool():
    result = run_command([PROMTOOL, "check", "config", str(PROMETHEUS_CONFIG)], timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout + result.stderr


def test_deploy_prometheus_config_scrapes_the_devnet_nodes_metrics_path():
    text = PROMETHEUS_CONFIG.read_text()
    assert "metrics_path: /metrics/prometheus" in text
    assert '"127.0.0.1:8000", "127.0.0.1:8001", "127.0.0.1:8002"' in text  # devnet.sh's default ports


def test_grafana_board_takes_its_datasource_from_a_variable():
    board = orjson.loads(GRAFANA_BOARD.read_bytes())
    variables = {variable["name"]: variable for variable in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    panels = [panel for panel in board["panels"] if panel["type"] != "row"]
    assert len({panel["id"] for panel in board["panels"]}) == len(board["panels"])
    for panel in panels:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"] and all(t["datasource"]["uid"] == "${datasource}" for t in panel["targets"])
    titles = " ".join(panel["title"].lower() for panel in panels)
    for topic in ("per second", "verify duration", "pending", "height", "rejected, by reason", "by stage"):
        assert topic in titles


def test_promql_metric_names_are_parsed_from_a_query():
    expr = ('histogram_quantile(0.99, sum by (le, path) (rate(qmemo_a_bucket{job="qmemo", x=~"$instance"}'
            '[$__rate_interval]))) / on(instance) group_left(node) qmemo_b * 60 + count(qmemo_c) and 1e-05')
    assert promql_metric_names(expr) == {"qmemo_a_bucket", "qmemo_b", "qmemo_c"}


# --- a live devnet scraped by a real Prometheus -----------------------------------------------------

class Prometheus:
    """One Prometheus server process on loopback, with its own storage, stopped by PID."""

    def __init__(self, root: Path, targets: list[str]) -> None:
        self.port = free_port()
        self.root = root
        config = PROMETHEUS_CONFIG.read_text()
        # The deploy file's scrape config, pointed at this test's nodes and scraping every second.
        config, replaced = re.subn(r'- targets: \[[^\]]*\]', "- targets: " + orjson.dumps(targets).decode(), config)
        assert replaced == 1, "deploy/prometheus.yml has no single `- targets: [...]` line to point at the nodes"
        config, replaced = re.subn(r"scrape_interval: \S+", "scrape_interval: 1s", config)
        assert replaced == 1
        self.config = root / "prometheus.yml"
        self.config.write_text(config)
        self.log_path = root / "prometheus.log"
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [PROMETHEUS, f"--config.file={self.config}", f"--storage.tsdb.path={root / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}"], stdout=log, stderr=subprocess.STDOUT)

    def api(self, path: str, **params: str) -> Any:
        answer = http("GET", f"http://127.0.0.1:{self.port}/api/v1/{path}?{urllib.parse.urlencode(params)}")
        return answer.json() if answer.body.startswith(b"{") else {"status": "error", "error": answer.body[:300]}

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        answer = self.api("query", query=expr, **({"time": f"{at:.3f}"} if at is not None else {}))
        assert answer["status"] == "success", f"{expr}: {answer}"
        return answer["data"]["result"]

    def wait_until(self, predicate: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = predicate()
            except OSError:  # not listening yet
                value = None
            if value:
                return value
            if self.process.poll() is not None:
                raise AssertionError(f"prometheus exited with {self.process.returncode} while waiting for "
                                     f"{what}\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{self.log_tail()}")
            time.sleep(0.2)

    def log_tail(self) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-30:])

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


def exposition(node: NodeProcess) -> str:
    answer = http("GET", node.url + "/metrics/prometheus")
    assert answer.status == 200
    return answer.body.decode()


@pytest.fixture(scope="module")
def scraped(tmp_path_factory) -> Iterator[tuple[Network, Prometheus, float]]:
    """Three nodes, a rejected (forged) transaction and 14 s of the generator's load at
    100 TPS, scraped by Prometheus; with a moment 12 s into the load to query at."""
    if PROMETHEUS is None or PROMTOOL is None:
        pytest.skip(needs_prometheus.kwargs["reason"])
    root = tmp_path_factory.mktemp("prometheus")
    devnet = make_devnet(root / "devnet", accounts=60)
    with Network(devnet, root) as network:
        network.start()
        prometheus = Prometheus(root, [node.url.removeprefix("http://") for node in network.nodes])
        try:
            # Until its storage is open the server answers 503 and its API no JSON.
            prometheus.wait_until(lambda: http("GET", f"http://127.0.0.1:{prometheus.port}/-/ready").status == 200,
                                  "prometheus ready")
            wallet = Wallet(devnet)
            assert network.nodes[0].post_txs(wallet.transfers(6)).status == 200
            forged = wallet.transfer(0, 1, signer=1)          # signed with another account's key
            network.nodes[0].post_txs([forged])
            yield network, prometheus, load_for_a_while(devnet, network, root)
        finally:
            prometheus.stop()


def load_for_a_while(devnet, network: Network, root: Path) -> float:
    """The real generator at LOAD_TPS for LOAD_S against the nodes; the wall time at which
    it had sent for 12 s (a 10 s window ending there is all load)."""
    live = root / "live.json"
    generator = subprocess.Popen(
        [str(VENV_BIN / "qmemo"), "gen", "--genesis", str(devnet.genesis),
         "--accounts", str(devnet.path / "accounts.keys.json"), "--nodes", ",".join(n.url for n in network.nodes),
         "--tps", str(LOAD_TPS), "--duration", str(LOAD_S), "--out", str(root / "gen"), "--live", str(live),
         "--no-cache", "--quiet"],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ, "COLUMNS": "200"})
    try:
        def sent_for_12_s() -> bool:
            status = orjson.loads(live.read_bytes()) if live.exists() else {}
            return status.get("running") is True and (status.get("elapsed_s") or 0) >= 12
        network.wait_until(sent_for_12_s, "the generator 12 s into its load", timeout=180)
        during = time.time()
        output = generator.communicate(timeout=180)[0].decode(errors="replace")
    finally:
        if generator.poll() is None:
            generator.kill()
            generator.wait()
    assert generator.returncode == 0, output + network.logs()
    return during


@needs_prometheus
def test_prometheus_scrapes_every_node_and_serves_qmemo_series(scraped):
    network, prometheus, _ = scraped

    def all_targets_up() -> bool:
        answer = prometheus.api("targets")
        targets = answer["data"]["activeTargets"] if answer["status"] == "success" else []
        return len(targets) == len(network.nodes) and all(t["health"] == "up" for t in targets)

    prometheus.wait_until(all_targets_up, "every node's target up")
    heights = prometheus.wait_until(
        lambda: (lambda rows: rows if len(rows) == len(network.nodes) else None)(
            prometheus.query('qmemo_chain_height{job="qmemo"}')), "a chain height from every node")
    assert {row["metric"]["instance"] for row in heights} == {n.url.removeprefix("http://") for n in network.nodes}
    assert all(row["metric"]["devnet"] == "local" for row in heights)  # the deploy file's static label
    accepted = prometheus.wait_until(
        lambda: sum(float(r["value"][1]) for r in prometheus.query("qmemo_transactions_accepted_total")) >= 6,
        "the accepted transactions counted")
    assert accepted
    rejected = prometheus.wait_until(
        lambda: prometheus.query('qmemo_transactions_rejected_total{reason="bad_signature"}'),
        "the forged transaction's rejection")
    assert float(rejected[0]["value"][1]) >= 1
    nodes = prometheus.query('qmemo_node_info{job="qmemo"}')
    assert {row["metric"]["node"] for row in nodes} == {node.name for node in network.nodes}


@needs_prometheus
def test_promtool_check_metrics_accepts_a_live_node_exposition(scraped):
    network, _, _ = scraped
    text = exposition(network.nodes[0])
    result = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    lint = result.stdout.strip() + result.stderr.strip()
    assert lint == "", f"promtool linted: {lint}"


@needs_prometheus
def test_every_metric_the_grafana_board_queries_exists_on_a_live_node(scraped):
    network, _, _ = scraped
    samples, types = exposition_families(exposition(network.nodes[0]))
    used = {name for _, expr in board_queries() for name in promql_metric_names(expr)}
    assert used, "no metric names parsed from the board"
    # A label-split counter with nothing counted yet is declared (HELP, TYPE) without samples.
    missing = sorted(name for name in used if name not in samples and types.get(name) != "counter")
    assert missing == [], f"the board queries metrics no node exposes: {missing}"
    for family in ("qmemo_signature_verify_duration_seconds", "qmemo_mempool_transactions",
                   "qmemo_chain_height", "qmemo_transactions_rejected_total", "qmemo_transactions_accepted_total",
                   "qmemo_stage_cpu_seconds_total", "qmemo_stage_transactions_total"):
        assert any(name == family or name.startswith(family + "_") for name in used), family


@needs_prometheus
def test_every_grafana_panel_shows_data_from_a_devnet_under_load(scraped):
    """Every query of every panel, evaluated at a moment of the load with Grafana's variables
    filled in, returns series; and every panel has a number to draw (a quantile of a path
    nothing took may be NaN, as long as another line of its panel is not)."""
    _, prometheus, during = scraped
    empty, blank = [], []
    for panel in board_panels():
        values = []
        for target in panel["targets"]:
            rows = prometheus.query(as_live_query(target["expr"]), at=during)
            if not rows:
                empty.append(f"{panel['title']!r}: {target['expr']}")
            values += [float(row["value"][1]) for row in rows]
        if not any(math.isfinite(v) for v in values):
            blank.append(panel["title"])
    assert empty == [], "queries without data:\n" + "\n".join(empty)
    assert blank == [], f"panels without a number to draw: {blank}"


@needs_prometheus
def test_the_board_shows_load_where_a_devnet_has_it(scraped):
    """Under load the rates are the load's: committed and admitted near the generator's rate
    (one node's, not the sum over three nodes), pending in one node's mempool, cache lines."""
    network, prometheus, during = scraped
    board = {panel["title"]: panel for panel in board_panels()}

    def value(title: str) -> list[float]:
        rows = prometheus.query(as_live_query(board[title]["targets"][0]["expr"]), at=during)
        return [float(row["value"][1]) for row in rows]

    [committed] = value("Committed TPS")
    admitted = value("Admitted TPS (per node)")
    assert len(admitted) == len(network.nodes)
    # Each node admits every transaction: its rate is the load's, and so is the chain's
    # committed rate; a sum over the nodes would be three times that.
    assert all(0.5 * LOAD_TPS < rate < 1.5 * LOAD_TPS for rate in admitted), admitted
    assert 0.3 * LOAD_TPS < committed < 2 * LOAD_TPS, committed
    assert max(value("Key cache (fast verifiers)")) > 0
    assert sum(value("Block pushes")) > 0


def test_the_board_counts_each_transaction_once_and_fits_a_short_run():
    """Stats over nodes take one node's figure, never the sum of the same transactions on
    every node; no window is minutes long (a run lasts 60 s)."""
    board = {panel["title"]: panel for panel in board_panels()}
    for title in ("Committed TPS", "Admitted TPS (per node)", "Mempool (largest node's)"):
        assert not board[title]["targets"][0]["expr"].startswith("sum("), title
    windows = {w for panel in board.values() for t in panel["targets"] for w in re.findall(r"\[([^\]]+)\]", t["expr"])}
    assert windows == {"$__rate_interval"}, windows
    for topic in ("Key cache (fast verifiers)", "Key cache hit rate (fast verifiers)", "Block pushes"):
        assert topic in board
    used = {name for panel in board.values() for t in panel["targets"] for name in promql_metric_names(t["expr"])}
    assert {"qmemo_key_cache_keys", "qmemo_key_cache_hits_total", "qmemo_blocks_pushed_total",
            "qmemo_block_ids_missing_total"} <= used
