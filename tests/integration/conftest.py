"""Fixtures of the integration tests that need a container engine: one engine and the image, per module.

`engine`: the machine's dockerd when one answers, else one started here
(tests/integration/engine.py), stopped at the module's end with the host's iptables,
sysctls and links put back (a difference fails the module). `image`: scripts/image.sh's
record of building qmemo:local, or of finding its content tag built already, so every
module that asks for it shares one build. `namespaces`: root and `ip netns`. Where no
engine or namespace can be had, the tests fail with the reason (under CI) or are skipped
with it (a developer's machine without root).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator

import pytest

from qmemo.errors import SetupError
from qmemo.scenario.hosts import require_root_and_netns
from tests.conftest import REPO_ROOT
from tests.integration.engine import Engine, EngineUnavailable, start_engine


def unavailable(reason: str) -> None:
    """What a test does where its engine or namespaces cannot be had: fail under CI, else skip."""
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def engine(tmp_path_factory) -> Iterator[Engine]:
    log = tmp_path_factory.mktemp("engine") / "dockerd.log"
    try:
        started = start_engine(log)
    except EngineUnavailable as exc:
        unavailable(f"no container engine: {exc}")
    yield started
    problems = started.stop()
    assert problems == [], f"the host is not as it was before dockerd started: {problems}"


@pytest.fixture(scope="module")
def image(engine: Engine) -> dict:
    """scripts/image.sh's record of the build (or of finding it built)."""
    done = subprocess.run(["bash", str(REPO_ROOT / "scripts" / "image.sh")], capture_output=True, text=True,
                          timeout=1200, env={**os.environ, **engine.env})
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads((REPO_ROOT / ".deps" / "image" / "last-build.json").read_text())
    if engine.process is not None:
        # Our own engine's data root keeps one image per checkout it saw: older ones go, so it
        # does not grow with every change (a machine's own engine is left as it is).
        older = [tag for tag in engine.docker("images", "--format", "{{.Repository}}:{{.Tag}}", "qmemo").stdout.split()
                 if tag.startswith("qmemo:ctx-") and tag != record["content_tag"]]
        if older:
            engine.docker("rmi", *older)
        engine.docker("image", "prune", "-f")
    return {**record, "output": done.stdout}


@pytest.fixture(scope="module")
def namespaces() -> None:
    """Root and network namespaces (qmemo.scenario.hosts), or the test fails/skips with why not."""
    try:
        require_root_and_netns()
    except SetupError as exc:
        unavailable(str(exc))
