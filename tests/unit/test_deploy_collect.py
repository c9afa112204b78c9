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
from qmemo.deploy.collect import generator_state

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
elif args[:2] == ["service", "logs"]:
    print("a line of the generator's log")
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
    assert (tmp_path / "runs" / "1" / "logs" / "gen.log").read_text() == "a line of the generator's log\n"


def test_collect_fails_a_completed_run_without_its_summary(swarm: Callable[..., object], tmp_path: Path) -> None:
    swarm(task("t1", "1", "Complete 5 minutes ago"))
    assert collect(tmp_path, "1") == 1
    (tmp_path / "runs" / "1" / "gen").mkdir()            # the generator's folder, as it writes it
    (tmp_path / "runs" / "1" / "gen" / "summary.json").write_text("{}")
    assert collect(tmp_path, "1") == 0
