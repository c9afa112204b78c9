"""The rendered folder on the manager: the devnet, stack.yaml, README.md, and runs/.

    devnet/        `qmemo genesis` with the manifest's chain (qmemo.scenario.argv, as the
                   scenario runner makes it), once: a folder whose genesis.command is this
                   manifest's is kept (its chain and the generator's signed workloads);
                   another manifest's chain is replaced, only ever in a folder made here
    stack.yaml     qmemo.deploy.stack's dict as YAML
    README.md      the labels, the deploy and collect commands, the placement table
    runs/<run>/    the generator's folder (gen/) and `qmemo deploy collect`'s (logs/, tasks)

What it must never do: delete a folder it did not make.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

from qmemo.deploy.stack import HOST_LABEL, RUN_VARIABLE, StackPlan, label_commands, placement_table, stack
from qmemo.errors import ConfigError, SetupError
from qmemo.scenario.argv import genesis_arguments
from qmemo.scenario.compose import to_yaml
from qmemo.scenario.manifest import Manifest

COMMAND_FILE = "genesis.command"     # the genesis command line a devnet folder was made with


def genesis_hash(devnet: Path) -> str:
    """The first 12 hex digits of genesis.json's SHA-256: the stack's config and secret names."""
    return hashlib.sha256((devnet / "genesis.json").read_bytes()).hexdigest()[:12]


def make_devnet(manifest: Manifest, devnet: Path) -> str:
    """The manifest's devnet in `devnet` (made unless already there); its genesis hash."""
    command = genesis_arguments(manifest, str(devnet))
    recorded = devnet / COMMAND_FILE
    if (devnet / "genesis.json").is_file() and recorded.is_file() and recorded.read_text() == " ".join(command):
        return genesis_hash(devnet)
    if devnet.exists() and any(devnet.iterdir()):
        if not recorded.is_file():
            raise ConfigError(f"{devnet} is not empty and was not made by qmemo deploy; refusing to replace it")
        shutil.rmtree(devnet)
    qmemo = Path(sys.executable).parent / "qmemo"
    done = subprocess.run([str(qmemo), *command], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SetupError(f"qmemo genesis failed: {(done.stderr or done.stdout).strip()}")
    recorded.write_text(" ".join(command))
    return genesis_hash(devnet)


def readme(manifest: Manifest, plan: StackPlan, rendered_by: str) -> str:
    network = manifest.network
    table = "\n".join(f"| {name} | {shard} | {validator} | {host} |"
                      for name, shard, validator, host in placement_table(manifest, plan))
    labels = "\n".join(f"    {line}" for line in label_commands(plan))
    return f"""# {manifest.name} on a Docker Swarm of {plan.hosts} host(s)

Rendered by `{rendered_by}` (docs/scenarios.md, "Several hosts"):
{network.shards} shard(s) x {network.per_shard} validators, one generator on the manager, placement `{plan.placement}`.

On the manager, once the image {plan.image} is on every host and the hosts have joined:

{labels}
    {RUN_VARIABLE}=1 docker stack deploy --resolve-image never -c {plan.folder}/stack.yaml qmemo
    qmemo deploy collect {plan.folder} --stack qmemo --run 1 --wait 900
    qmemo report --devnet {plan.folder}/runs/1
    docker stack rm qmemo

`--resolve-image never`: no registry has the image (each host loaded it); with
DOCKER_SERVICE_PREFER_OFFLINE_IMAGE=1 in each dockerd's environment it does not try to pull
it either as it starts a task. A second load on the same chain: `{RUN_VARIABLE}=2 docker stack
deploy ...` (only the generator's command changes, so only it runs again), into runs/2.

| service | shard | validator | host (label {HOST_LABEL}-<h>) |
| --- | --- | --- | --- |
{table}
"""


def write_stack(manifest: Manifest, plan: StackPlan, out: Path, rendered_by: str) -> Path:
    """stack.yaml and README.md in `out` (and an empty runs/); the stack file's path."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "runs").mkdir(exist_ok=True)
    stack_file = out / "stack.yaml"
    stack_file.write_text(f"# Rendered by `{rendered_by}`: edit the manifest and render again, not this file.\n"
                          + to_yaml(stack(manifest, plan)) + "\n")
    (out / "README.md").write_text(readme(manifest, plan, rendered_by))
    return stack_file
