"""The qmemo command lines a scenario runs - genesis, node, gen - from its manifest.

One place for them, so that the runner on this machine (namespaces), `qmemo scenario
compose` (containers) and the 3-machine walk-through in docs/scenarios.md start the very
same programs with the very same settings; only paths and addresses differ, and they
come in as arguments. Pure: no process is started here.
"""

from __future__ import annotations

from collections.abc import Sequence

from qmemo.scenario.manifest import Load, Manifest, Network

NODE_PORT = 8000


def genesis_arguments(manifest: Manifest, out: str) -> list[str]:
    """`qmemo genesis`: the manifest's validators, and the generator's and attacker's accounts together."""
    chain, network = manifest.chain, manifest.network
    return ["genesis", "--out", out, "--validators", str(network.per_shard),
            "--accounts", str(chain.accounts + chain.attacker_accounts), "--scheme", chain.scheme,
            "--block-interval-ms", str(chain.block_interval_ms),
            "--max-block-transactions", str(chain.max_block_transactions),
            *(["--shards", str(network.shards)] if network.shards > 1 else [])]


def key_file(i: int, shard: tuple[int, int] | None = None) -> str:
    """Validator i's key file in the devnet folder (`shard`: a sharded devnet's (shard, index in it))."""
    return f"validator-{i}.keys.json" if shard is None else f"shard-{shard[0]}-validator-{shard[1]}.keys.json"


def node_shard(network: Network, i: int) -> tuple[int, int] | None:
    """Node i's (shard, validator index in it) on a sharded network; None on one chain."""
    return (network.shard_of(i), i % network.per_shard) if network.shards > 1 else None


def node_peers(network: Network, i: int) -> tuple[list[int], list[int]]:
    """Node i's peers: the other nodes of its shard (blocks, relay), and every other shard's
    nodes (it pulls their receipts). On one chain the second list is empty."""
    shard = network.shard_of(i)
    same = [j for j in range(network.nodes) if j != i and network.shard_of(j) == shard]
    return same, [j for j in range(network.nodes) if network.shard_of(j) != shard]


def node_arguments(i: int, devnet: str, data: str, host: str, peers: Sequence[str], *,
                   advertise: str | None = None, verify_threads: int | None = None,
                   shard: tuple[int, int] | None = None, shard_peers: Sequence[str] = ()) -> list[str]:
    """`qmemo node` for validator i, listening on `host`:NODE_PORT and peering with `peers` (URLs).
    `shard` (shard, validator index in it): a sharded devnet's node, pulling receipts from
    `shard_peers` (the other shards' nodes)."""
    command = ["node", "--genesis", f"{devnet}/genesis.json", "--key", f"{devnet}/{key_file(i, shard)}",
               "--data", data, "--host", host, "--port", str(NODE_PORT), "--peers", ",".join(peers),
               "--name", f"node-{i}"]
    if shard_peers:
        command += ["--shard-peers", ",".join(shard_peers)]
    if advertise:
        command += ["--advertise", advertise]
    if verify_threads is not None:
        command += ["--verify-threads", str(verify_threads)]
    return command


def gen_arguments(load: Load, devnet: str, accounts: str, nodes: Sequence[str], out: str) -> list[str]:
    """`qmemo gen` with the manifest's load against `nodes` (URLs), signing with `accounts`' keys."""
    command = ["gen", "--devnet", devnet, "--genesis", f"{devnet}/genesis.json", "--accounts", accounts,
               "--nodes", ",".join(nodes), "--duration", f"{load.duration_s:g}", "--batch", str(load.batch),
               "--target", load.targeting, "--out", out, "--quiet"]
    if load.resend_for_s:
        command += ["--resend-for", f"{load.resend_for_s:g}"]
    if load.cross_shard_pct is not None:
        command += ["--cross-shard", f"{load.cross_shard_pct:g}"]
    if load.schedule:
        command += ["--schedule", load.schedule] + (["--ramp"] if load.ramp else [])
    else:
        command += ["--tps", f"{load.tps:g}"] + (["--poisson"] if load.poisson else [])
    return command
