"""`qmemo deploy collect` takes this run's generator task, and only a run that wrote its summary.

The docker client is a stand-in on PATH that answers from a list of the generator's tasks
(newest first, as `docker service ps` lists them): the command's own calls, nothing else.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from qmemo.cli import main
from qmemo.deploy.collect import ServiceLogLine, generator_state, read_service_log
from qmemo.scenario.propagation import parse_log

FAKE_DOCKER = '''#!{python}
import json, sys
tasks = json.load(open({tasks!r}))
args = sys.argv[1:]
if args[:2] == ["service", "ps"] and "{{{{.ID}}}} {{{{.CurrentState}}}}" in args:
    print("\\n".join(f"{{t['id']}} {{t['state']}}" for t in tasks))
elif args[:2] == ["inspect", "--type"]:
    by_id = {{t["id"]: t["args"] for t in tasks}}
    print("\\n".join(json.dumps(by_id[i]) for i in args[5:]))
elif args[:2] == ["stack", "services"]:
    print("qmemo_gen")
elif args[:2] == ["service", "logs"]:    # as the client formats it; --raw drops the task and host
    line = "2026-12-02 07:50:01,123 gen INFO qmemo.load: a line of the generator's log"
    print(("" if "--raw" in args else "qmemo_gen.1.k3x9q2abcdefghijklmnopqrs@qmemo-host-0    | ") + line
          if "--timestamps" not in args else
          "2026-12-02T07:50:01.123456789Z " + ("" if "--raw" in args else
          "qmemo_gen.1.k3x9q2abcdefghijklmnopqrs@qmemo-host-0    | ") + line)
else:                                   # service ps / node ls as JSON lines
    print("{{}}")
'''


def task(task_id: str, run: str, state: str) -> dict:
    """A generator task of run `run`: its arguments as gen_service writes them (the part that names the run)."""
    return {"id": task_id, "state": state,
            "args": ["--out", f"/runs/{run}/gen", "--live", f"/runs/{run}/gen/live.json"]}


@pytest.fixture
def swarm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., object]:
    """Sets the generator's tasks the stand-in docker reports."""
    (tmp_path / "bin").mkdir()
    docker = tmp_path / "bin" / "docker"
    docker.write_text(FAKE_DOCKER.format(python=sys.executable, tasks=str(tmp_path / "tasks.json")))
    docker.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    return lambda *tasks: (tmp_path / "tasks.json").write_text(json.dumps(list(tasks)))


def collect(folder: Path, run: str, wait_s: str = "0") -> int:
    return main(["deploy", "collect", str(folder), "--stack", "qmemo", "--run", run, "--wait", wait_s])


def test_the_generator_state_is_this_runs_task_not_the_newest(swarm: Callable[..., object]) -> None:
    swarm(task("t2", "2", "Running 1 second ago"), task("t1", "1", "Complete 5 minutes ago"))
    assert generator_state("qmemo", "2") == "Running 1 second ago"
    assert generator_state("qmemo", "1") == "Complete 5 minutes ago"
    assert generator_state("qmemo", "3") == ""


def test_collect_does_not_take_the_previous_runs_completed_task(swarm: Callable[..., object], tmp_path: Path) -> None:
    swarm(task("t1", "1", "Complete 5 minutes ago"))    # run 2 deployed, its task not there yet
    (tmp_path / "runs" / "1" / "gen").mkdir(parents=True)
    (tmp_path / "runs" / "1" / "gen" / "summary.json").write_text("{}")
    assert collect(tmp_path, "2", wait_s="0.6") == 1
    assert collect(tmp_path, "1") == 0
    collected = read_service_log((tmp_path / "runs" / "1" / "logs" / "gen.log").read_text().splitlines())
    assert collected == [ServiceLogLine("2026-12-02T07:50:01.123456789Z", "qmemo_gen", 1, "k3x9q2abcdefghijklmnopqrs",
                                        "qmemo-host-0",
                                        "2026-12-02 07:50:01,123 gen INFO qmemo.load: a line of the generator's log")]


def test_collect_fails_a_completed_run_without_its_summary(swarm: Callable[..., object], tmp_path: Path) -> None:
    swarm(task("t1", "1", "Complete 5 minutes ago"))
    assert collect(tmp_path, "1") == 1
    (tmp_path / "runs" / "1" / "gen").mkdir()            # the generator's folder, as it writes it
    (tmp_path / "runs" / "1" / "gen" / "summary.json").write_text("{}")
    assert collect(tmp_path, "1") == 0


def test_a_collected_node_log_names_each_lines_task_and_host_and_its_lines_parse_as_on_one_machine() -> None:
    # docker service logs --timestamps --no-trunc of a node that Swarm moved: its first
    # task on host 2, the second on host 1 (the slot's padding as the client writes it),
    # and the client's own line about the host that is down.
    text = """\
2026-12-02T07:51:30.000000001Z qmemoswarm_node-2.1.aaaaaaaaaaaaaaaaaaaaaaaaa@qmemo-host-2    | \
2026-12-02 07:51:30,000 node-2 INFO qmemo.node.producer: produced block 40 (ab12cd34.., 12 txs)
2026-12-02T07:52:10.5Z qmemoswarm_node-2.1.bbbbbbbbbbbbbbbbbbbbbbbbb@qmemo-host-1    | \
2026-12-02 07:52:10,500 node-2 INFO qmemo.node.sync: applied block 41 (ef56ab78.., 3 txs) | from a peer
error from daemon in stream: Error grabbing logs: rpc error: host qmemo-host-2 is down
"""
    lines = read_service_log(text.splitlines())
    assert [(line.task[0], line.host) for line in lines] == [("a", "qmemo-host-2"), ("b", "qmemo-host-1")]
    assert {(line.service, line.slot) for line in lines} == {("qmemoswarm_node-2", 1)}
    assert lines[1].line.endswith("(ef56ab78.., 3 txs) | from a peer")      # a " | " of its own kept
    events = parse_log(line.line for line in lines)                        # the node's own lines, unchanged
    assert [(e.node, e.what, e.height, e.transactions) for e in events] == [
        ("node-2", "produced", 40, 12), ("node-2", "applied", 41, 3)]
