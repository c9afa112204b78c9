"""The rendered folder on the manager: the devnet, stack.yaml, README.md, and runs/.

    devnet/        `qmemo genesis` with the manifest's chain (qmemo.scenario.argv, as the
                   scenario runner makes it), once: a folder whose genesis.command is this
                   manifest's is kept (its chain and the generator's signed workloads);
                   another manifest's chain is replaced, only ever in a folder made here;
                   genesis.json.gz beside genesis.json when the genesis is over a Swarm
                   config's limit (qmemo.deploy.stack.genesis_carrier)
    stack.yaml     qmemo.deploy.stack's dict as YAML
    README.md      the labels, the deploy and collect commands, the placement table
                   (stack.yaml and README.md start with render's header line; a file of
                   either name without it is someone's, and render refuses to overwrite it)
    runs/<run>/    the generator's folder (gen/) and `qmemo deploy collect`'s (logs/, tasks)

What it must never do: delete a folder, or overwrite a file, it did not make.
"""

from __future__ import annotations

import gzip
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

from qmemo.deploy.stack import (CONFIG_LIMIT_BYTES, GENESIS_GZ, HOST_LABEL, RESULTS_LABEL, RUN_VARIABLE, THRESHOLDS,
                                StackPlan, data_volume, genesis_carrier, label_commands, placement_table, stack)
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


def carry_genesis(manifest: Manifest, devnet: Path, limit_bytes: int = CONFIG_LIMIT_BYTES) -> bool:
    """Whether the genesis travels gzipped: then devnet/genesis.json.gz is written (byte for
    byte the same for the same genesis: no time stamp, so a render again names the same
    config). Raises ConfigError when it would not fit a Swarm config even so."""
    data = (devnet / "genesis.json").read_bytes()
    packed = gzip.compress(data, compresslevel=9, mtime=0)
    carried = genesis_carrier(len(data), len(packed), manifest.chain.accounts + manifest.chain.attacker_accounts,
                              limit_bytes)
    if carried:
        (devnet / GENESIS_GZ).write_bytes(packed)
    else:
        (devnet / GENESIS_GZ).unlink(missing_ok=True)
    return carried


# The first line of each file render writes, and how render knows its own files again:
# a stack.yaml or README.md in --out that does not start so is someone's, never overwritten.
STACK_FILE, README_FILE = "stack.yaml", "README.md"
HEADERS = {STACK_FILE: "# Rendered by `{}`: edit the manifest and render again, not this file.",
           README_FILE: "<!-- Rendered by `{}`: edit the manifest and render again, not this file. -->"}
_HEADER_PREFIXES = {name: header.split("{}")[0] + "qmemo deploy render" for name, header in HEADERS.items()}


def refuse_foreign_files(out: Path) -> None:
    """ConfigError when `out` holds a stack.yaml or README.md that render did not write
    (its first line is not render's header): render would overwrite it."""
    for name, prefix in _HEADER_PREFIXES.items():
        path = out / name
        if not path.exists():
            continue
        try:
            with path.open(encoding="utf-8", errors="replace") as file:
                first = file.readline()
        except OSError as exc:
            raise ConfigError(f"{path} exists and cannot be read ({exc}); refusing to overwrite it") from None
        if not first.startswith(prefix):
            raise ConfigError(f"{path} exists and was not written by qmemo deploy render (its first line is not "
                              f"{prefix!r}...); refusing to overwrite it: move it, or give another --out")


def readme(manifest: Manifest, plan: StackPlan, rendered_by: str) -> str:
    network = manifest.network
    table = "\n".join(f"| {name} | {shard} | {validator} | {host} |"
                      for name, shard, validator, host in placement_table(manifest, plan))
    labels = "\n".join(f"    {line}" for line in label_commands(plan))
    carrier = (f"The genesis travels gzipped ({GENESIS_GZ}: genesis.json is over a Swarm config's limit); each node\n"
               "unzips it before it starts.\n\n" if plan.genesis_gzip else "")
    dropped = [f"invariants.{key}" for key in THRESHOLDS if getattr(manifest.invariants, key) is not None]
    unchecked = (f"Not checked (rendered with --drop-thresholds): {', '.join(dropped)}.\n\n" if dropped else "")
    load = (f"one generator process per shard ({network.shards}), all in the one `gen` task on the manager labelled "
            f"{RESULTS_LABEL}=true" if network.shards > 1 else f"one generator in the `gen` task on the manager "
            f"labelled {RESULTS_LABEL}=true")
    volumes = " ".join(f"qmemo_{data_volume(i, plan)}" for i in range(min(2, network.nodes)))
    return f"""{HEADERS[README_FILE].format(rendered_by)}
# {manifest.name} on a Docker Swarm of {plan.hosts} host(s)

Rendered by `{rendered_by}` (docs/scenarios.md, "Several hosts"):
{network.shards} shard(s) x {network.per_shard} validators, placement `{plan.placement}`; the load is
{load} (`qmemo gen` without --generators). Generators are not spread over hosts: the
run folder ({plan.folder}/runs) and the merge of every shard's results are that manager's.

{carrier}{unchecked}On the manager that holds {plan.folder}, once the image {plan.image} is on every host
and the hosts have joined:

{labels}
    {RUN_VARIABLE}=1 docker stack deploy --resolve-image never -c {plan.folder}/{STACK_FILE} qmemo
    .venv/bin/qmemo deploy collect {plan.folder} --stack qmemo --run 1 --wait 900
    .venv/bin/qmemo report --devnet {plan.folder}/runs/1
    docker stack rm qmemo

`--resolve-image never`: no registry has the image (each host loaded it); with
DOCKER_SERVICE_PREFER_OFFLINE_IMAGE=1 in each dockerd's environment it does not try to pull
it either as it starts a task. A second load on the same chain: `{RUN_VARIABLE}=2 docker stack
deploy ...` (only the generator's command changes, so only it runs again), into runs/2.
Each node's chain is in the volume qmemo_{data_volume("<i>", plan)} (named
with this genesis's hash: a chain rendered anew gets new volumes); the old ones stay on
their hosts until removed (`docker volume rm {volumes} ...` on each host).

| service | shard | validator | host (label {HOST_LABEL}-<h>) |
| --- | --- | --- | --- |
{table}
"""


def write_stack(manifest: Manifest, plan: StackPlan, out: Path, rendered_by: str) -> Path:
    """stack.yaml and README.md in `out` (and an empty runs/); the stack file's path.
    Refuses (ConfigError) to overwrite a stack.yaml or README.md render did not write."""
    refuse_foreign_files(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "runs").mkdir(exist_ok=True)
    stack_file = out / STACK_FILE
    stack_file.write_text(HEADERS[STACK_FILE].format(rendered_by) + "\n" + to_yaml(stack(manifest, plan)) + "\n")
    (out / README_FILE).write_text(readme(manifest, plan, rendered_by))
    return stack_file
