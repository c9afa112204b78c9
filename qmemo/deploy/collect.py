"""`qmemo deploy collect`: a Swarm run's logs and task history into its run folder on the manager.

The generator already writes the run's figures into the manager's runs/<run>/gen (its
own merge of every shard: summary.json with the invariants, node-stages.json, each
node's metrics, all read over the overlay from whichever host runs the node). What
stays on the hosts is each container's log: the manager's Swarm API serves them all
(`docker service logs`), wherever the task ran, so nothing here copies files between
hosts. Beside gen/ it writes

    logs/<service>.log   every task's log of that service, each line as `docker service
                         logs --timestamps` gives it: Docker's time stamp, the task and the
                         host it ran on (node-2.1.<task id>@host-2), then the line the
                         container wrote, unchanged; `read_service_log` splits them again
                         (a node's own log lines then parse as on one machine)
    tasks.jsonl          `docker service ps` of every service: where each task ran, its
                         state and error (a task moved after a host went down shows here)
    nodes.jsonl          `docker node ls`: the hosts, their state and availability

Runs the docker client (DOCKER_HOST as set); what it must never do: change the stack.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from qmemo.deploy.stack import RUNS
from qmemo.errors import SetupError

POLL_S = 0.5
ENDED = ("Complete", "Failed", "Rejected", "Shutdown", "Orphaned")


def _run(args: tuple[str, ...], timeout: float, merged: bool) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(["docker", *args], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT if merged else subprocess.PIPE, text=True, timeout=timeout,
                              check=False, env=os.environ.copy())
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SetupError(f"`docker {' '.join(args)}` failed: {exc}") from None


def _docker(*args: str, timeout: float = 120) -> str:
    done = _run(args, timeout, merged=False)
    if done.returncode != 0:
        raise SetupError(f"`docker {' '.join(args)}` failed: {done.stderr.strip()}")
    return done.stdout


# docker service logs --timestamps --no-trunc (docker/cli's logWriter): "<time stamp>
# <service>.<slot>.<task id>@<host><padding>    | <the container's line>". The context
# has no spaces; the padding and the " | " are the client's.
_LOG_LINE = re.compile(r"^(\S+) (\S+)\.(\d+)\.([0-9a-z]+)@(\S+?)\s+\| ?(.*)$")


@dataclass(frozen=True, slots=True)
class ServiceLogLine:
    timestamp: str      # Docker's, RFC 3339 with nanoseconds
    service: str        # as Swarm names it (<stack>_node-2)
    slot: int
    task: str           # the task's full id: which run of the service wrote the line
    host: str           # the Swarm node (its hostname) the task ran on
    line: str           # what the container wrote, unchanged


def read_service_log(lines: Iterable[str]) -> list[ServiceLogLine]:
    """The lines of a collected logs/<service>.log, each with its task and host; lines of
    the client's own (a host that was down, said at the end) are left out."""
    out = []
    for text in lines:
        match = _LOG_LINE.match(text)
        if match:
            stamp, service, slot, task, host, line = match.groups()
            out.append(ServiceLogLine(stamp, service, int(slot), task, host, line))
    return out


def service_log(service: str) -> str:
    """Every task's log of `service`, stderr included, each line naming its task and host
    (not --raw: a moved task's lines would be indistinguishable from the first's). A
    task on a host that is down has none to give: the client then says so after the
    others' lines and exits 1, and that line is kept (the log is still what the hosts
    that answered had)."""
    done = _run(("service", "logs", "--timestamps", "--no-trunc", service), 300, merged=True)
    if done.returncode != 0:
        return done.stdout + f"# docker service logs {service} exited {done.returncode}\n"
    return done.stdout


def generator_state(stack: str, run: str) -> str:
    """The state of this run's generator task, as `docker service ps` says it ("Running 3
    seconds ago"); "" while there is none. This run's: the newest task whose arguments write
    /runs/<run>/gen - right after `docker stack deploy` of a second run, the newest task
    is still the first run's, completed."""
    lines = _docker("service", "ps", "--no-trunc", "--format", "{{.ID}} {{.CurrentState}}",
                    f"{stack}_gen").splitlines()
    tasks = [line.split(" ", 1) for line in lines if line]
    if not tasks:
        return ""
    arguments = _docker("inspect", "--type", "task", "--format", "{{json .Spec.ContainerSpec.Args}}",
                        *(task_id for task_id, _ in tasks)).splitlines()
    for (_, state), args in zip(tasks, arguments):
        if f"{RUNS}/{run}/gen" in (json.loads(args) or []):
            return state.strip()
    return ""


def wait_generator(stack: str, run: str, timeout_s: float) -> str:
    """Poll until this run's generator task has ended, or `timeout_s`; its last state."""
    deadline = time.monotonic() + timeout_s
    state = generator_state(stack, run)
    while not state.startswith(ENDED) and time.monotonic() < deadline:
        time.sleep(POLL_S)
        state = generator_state(stack, run)
    return state


def collect(folder: Path, stack: str, run: str, wait_s: float = 0.0) -> tuple[Path, str]:
    """Logs, tasks and nodes into folder/runs/<run>; (the run folder, this run's generator's state)."""
    state = wait_generator(stack, run, wait_s) if wait_s > 0 else generator_state(stack, run)
    run_dir = folder / "runs" / run
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    services = _docker("stack", "services", stack, "--format", "{{.Name}}").split()
    for service in services:
        short = service.removeprefix(f"{stack}_")
        (run_dir / "logs" / f"{short}.log").write_text(service_log(service))
    if services:
        (run_dir / "tasks.jsonl").write_text(_docker("service", "ps", "--no-trunc", "--format", "{{json .}}",
                                                     *services))
    (run_dir / "nodes.jsonl").write_text(_docker("node", "ls", "--format", "{{json .}}"))
    return run_dir, state
