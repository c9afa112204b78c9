"""A sharded devnet's workload: each shard's transfers signed before the run, PCT% of them
to accounts of other shards.

Each account sends only on its own shard (qmemo.core.shards: the shard its address
names), to that shard's nodes, with the shard's chain id; within a shard the senders
and nonces are qmemo.load.workload's (`assign`: one account pool per node, so a sender's
transactions always reach the same node in nonce order). A transfer goes to another
shard with probability PCT/100 (drawn from the run's seed, so a plan is reproducible):
its recipient is an account of a shard drawn uniformly among the others; the others go
to the next account of the sender's own shard. Every transfer moves 1 unit and pays the
genesis minimum fee, with MEMO's 256-byte body (qmemo.load.workload).

Signing is qmemo.load.workload's (threads for small plans, one process per core from
`PROCESS_SIGNING_MIN` transactions, each item naming its recipient); a signed plan is
cached in the devnet's workload folder the same way, keyed by everything that fixes its
bytes.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from qmemo.core.hashing import Domain, blake3_512
from qmemo.core.receipts import receipt_id
from qmemo.load.sender import Batch
from qmemo.load.workload import Account, PlanShape, assign, previous_nonces, sign_chunks, signed_batches



@dataclass(frozen=True, slots=True)
class ShardWorkload:
    """One shard's part of the plan: its transactions in plan order and its batches."""

    shard: int
    chain_id: int
    ids: list[bytes]
    batches: list[Batch]
    previous: object                    # array: each transaction's sender's previous nonce (workload.previous)
    destinations: list[int]             # each transaction's recipient's shard
    receipt_ids: dict[int, bytes]       # plan index -> receipt id, for the cross-shard ones
    from_cache: bool


def plan_recipients(shard: int, senders: list[tuple[int, int]], accounts: list[list[Account]], pct: float,
                    seed: int) -> list[tuple[int, int]]:
    """For each planned (account index, nonce) of `shard`, its recipient (shard, account index).
    Pure: the same inputs always give the same plan."""
    rng = random.Random(seed * 1_000_003 + shard)
    others = [k for k in range(len(accounts)) if k != shard and accounts[k]]
    own = len(accounts[shard])
    out = []
    for account, _ in senders:
        if others and rng.random() * 100 < pct:
            destination = others[rng.randrange(len(others))]
            out.append((destination, rng.randrange(len(accounts[destination]))))
        else:
            out.append((shard, (account + 1) % own))
    return out


def build_shard(shard: int, chain_id: int, shape: PlanShape, accounts: list[list[Account]], pct: float, *,
                scheme: str, fee: int, genesis_hash: bytes, cache_dir: Path | None,
                progress: Callable[[int], None] | None = None) -> ShardWorkload:
    """Sign (or load from the cache) shard `shard`'s plan and frame its batches."""
    own = accounts[shard]
    senders, targets = assign(shape, own)
    recipients = plan_recipients(shard, senders, accounts, pct, shape.seed)
    items = [(account, nonce, accounts[k][r].address) for (account, nonce), (k, r) in zip(senders, recipients)]
    key = _cache_key(genesis_hash, scheme, chain_id, shape, pct, own)
    cache_file = cache_dir / f"{key}.bin" if cache_dir else None
    ids, batches, from_cache = signed_batches(
        cache_file, shape, targets,
        sign_chunks(items, own, scheme=scheme, chain_id=chain_id, fee=fee), progress)
    destinations = [k for k, _ in recipients]
    cross = {i: receipt_id(chain_id, ids[i]) for i, k in enumerate(destinations) if k != shard}
    return ShardWorkload(shard, chain_id, ids, batches, previous_nonces(senders), destinations, cross, from_cache)


def _cache_key(genesis_hash: bytes, scheme: str, chain_id: int, shape: PlanShape, pct: float,
               accounts: list[Account]) -> str:
    parts = [genesis_hash, scheme.encode(), chain_id.to_bytes(4, "little"),
             repr((shape.count, shape.batch_size, len(shape.targets), shape.targeting, shape.seed, pct)).encode()]
    for account in accounts:
        parts += [account.address, account.next_nonce.to_bytes(8, "little")]
    return blake3_512(Domain.SELF_TEST, b"shard workload", *parts).hex()[:32]
