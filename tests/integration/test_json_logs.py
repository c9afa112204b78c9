"""`--log-format json` end to end: a node's log, the generator's output, and devnet.sh's run folder.

Every line must be one JSON object (nothing else on the stream), and every line of a node's
log must carry the node's name.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import REPO_ROOT, VENV_BIN, run_command
from tests.integration.nodes import Network, Wallet, make_devnet
from tests.integration.test_devnet import devnet_command, free_base_port

pytestmark = pytest.mark.slow


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every non-empty line as a JSON object; fails naming the first line that is not one."""
    documents = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            document = orjson.loads(line)
        except orjson.JSONDecodeError:
            raise AssertionError(f"line {number} is not JSON: {line!r}") from None
        assert isinstance(document, dict), f"line {number} is not an object: {line!r}"
        documents.append(document)
    return documents


def test_node_and_generator_write_json_lines(tmp_path: Path):
    devnet = make_devnet(tmp_path / "devnet", validators=2, accounts=4)
    with Network(devnet, tmp_path, extra=["--log-format", "json"]) as network:
        network.start()
        wallet = Wallet(devnet)
        assert network.nodes[0].post_txs(wallet.transfers(4)).status == 200
        network.wait_until(lambda: all((n.height() or 0) >= 2 for n in network.nodes), "two blocks on each node")
        gen = run_command([str(VENV_BIN / "qmemo"), "gen", "--devnet", str(devnet.path),
                           "--nodes", ",".join(n.url for n in network.nodes), "--tps", "20", "--duration", "2",
                           "--no-cache", "--out", str(tmp_path / "gen"), "--log-format", "json"], timeout=120)
        for node in network.nodes:
            assert node.stop() == 0
    assert gen.returncode == 0, gen.stdout + gen.stderr
    events = json_lines(gen.stdout)
    assert [event["message"] for event in events] == ["started", "run finished"]
    assert all(event["component"] == "gen" and event["ts"] and event["level"] == "INFO" for event in events)
    finished = events[-1]
    assert finished["counts"]["planned"] == 40 and finished["counts"]["accounted"] == 40
    assert finished["out"] == str(tmp_path / "gen") and "latency_ms" in finished
    for node in network.nodes:
        lines = json_lines(node.log_path.read_text())
        assert lines, f"{node.name} logged nothing"
        assert all(line["node"] == node.name for line in lines), node.log_tail()
        messages = [line["message"] for line in lines]
        assert any(message.startswith("ready") for message in messages)
        assert any(message.startswith("stopped at height") for message in messages)


def test_a_node_that_cannot_start_says_why_in_json_too(tmp_path: Path):
    devnet = make_devnet(tmp_path / "devnet", validators=1, accounts=1)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        result = run_command([str(VENV_BIN / "qmemo"), "node", "--genesis", str(devnet.genesis),
                              "--key", str(devnet.validator_key(0)), "--data", str(tmp_path / "data"),
                              "--port", str(busy.getsockname()[1]), "--name", "node-x", "--log-format", "json"],
                             timeout=60)
    assert result.returncode == 1
    lines = json_lines(result.stdout + result.stderr)
    assert lines[-1]["level"] == "ERROR" and lines[-1]["error"] == "config" and lines[-1]["node"] == "node-x"
    assert lines[-1]["message"].startswith("cannot listen on 127.0.0.1:")


def test_devnet_sh_passes_the_log_format_to_nodes_and_generator(tmp_path: Path):
    result = run_command(devnet_command(tmp_path, free_base_port(), "--duration", "3", "--tps", "20",
                                        "--block-ms", "500", "--log-format", "json"), timeout=240)
    run = sorted((tmp_path / "runs").iterdir())[-1]
    assert result.returncode == 0, result.stdout + result.stderr
    for index in range(3):
        lines = json_lines((run / "logs" / f"node-{index}.log").read_text())
        assert lines and all(line["node"] == f"node-{index}" for line in lines)
    events = json_lines((run / "logs" / "gen.log").read_text())
    assert events[-1]["message"] == "run finished" and events[-1]["counts"]["planned"] == 60


def test_devnet_sh_refuses_an_unknown_log_format(tmp_path: Path):
    result = run_command(["bash", str(REPO_ROOT / "devnet.sh"), "--log-format", "xml", "--dir", str(tmp_path / "d")],
                         timeout=30)
    assert result.returncode == 2
    assert result.stderr.strip() == "devnet.sh: --log-format must be text or json"
