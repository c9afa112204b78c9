"""What a sharded run asks every shard's nodes: which shard each runs, every account's
balance, when the shards are quiet, and each transfer's fate after the run (through
qmemo.net.client, the API's one client).
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

from qmemo.core.shards import ShardedGenesis
from qmemo.errors import ConfigError, NodeApiError
from qmemo.load.latency import ACCEPTED, DUPLICATE
from qmemo.load.run import read_metrics
from qmemo.load.shard_parts import ShardPart
from qmemo.net.client import open_clients

STATUS_IDS = 1_000              # ids per POST /txs/status or /receipts/status
ACCOUNTS_PER_REQUEST = 1_000


async def shard_nodes(urls: list[str], sharded: ShardedGenesis) -> list[list[str]]:
    """The node URLs of each shard, in order, as each node's /status says."""
    by_shard: list[list[str]] = [[] for _ in range(sharded.count)]
    async with open_clients(urls, timeout_s=10) as clients:
        for client in clients:
            try:
                status = await client.status()
            except NodeApiError as exc:
                raise ConfigError(f"cannot tell which shard {client.url} runs: {exc}") from None
            view = next((v for v in sharded.views if v.chain_id == status.chain_id), None)
            if view is None:
                raise ConfigError(f"{client.url} runs chain {status.chain_id}, no shard of this genesis")
            by_shard[view.sharding.index].append(client.url)
    empty = [k for k, nodes in enumerate(by_shard) if not nodes]
    if empty:
        raise ConfigError(f"no node given for shard(s) {', '.join(map(str, empty))}: a sharded run drives every shard")
    return by_shard


async def read_balances(nodes_by_shard: list[list[str]], addresses_by_shard: list[list[bytes]]) -> dict[bytes, int]:
    """Every address's balance on its own shard (from the first of its nodes that answers)."""
    out: dict[bytes, int] = {}
    for nodes, addresses in zip(nodes_by_shard, addresses_by_shard):
        async with open_clients(nodes, timeout_s=30) as clients:
            for client in clients:
                try:
                    for start in range(0, len(addresses), ACCOUNTS_PER_REQUEST):
                        for account in await client.accounts(addresses[start:start + ACCOUNTS_PER_REQUEST]):
                            out[account.address] = account.balance
                    break
                except NodeApiError:
                    continue
            else:
                raise ConfigError(f"no node of shard {nodes_by_shard.index(nodes)} answered its balances")
    return out


async def read_all_metrics(nodes: list[list[str]]) -> dict[str, Any]:
    out = {}
    for shard_nodes_ in nodes:
        async with open_clients(shard_nodes_, timeout_s=10) as clients:
            out.update(zip(shard_nodes_, await read_metrics(clients)))
    return out


async def settle(nodes: list[list[str]], timeout_s: float) -> bool:
    """Wait until every node of every shard holds no pending or held transaction and no
    pooled receipt, then two more block intervals (their last blocks become final); False
    if that does not happen within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    urls = [url for shard_nodes_ in nodes for url in shard_nodes_]
    async with open_clients(urls, timeout_s=5) as clients:
        while True:
            quiet = True
            for metrics in await read_metrics(clients):
                if metrics is None or metrics.mempool.count or metrics.mempool.held or \
                        (metrics.receipts is not None and metrics.receipts.pooled):
                    quiet = False
            if quiet:
                interval_s = (await clients[0].status()).block_interval_ms / 1e3
                await asyncio.sleep(2 * interval_s)
                return True
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.5)


async def fates_now(shards: list[ShardPart]) -> tuple[set[tuple[int, int]], set[tuple[int, int]]]:
    """(shard, index) of the accepted transfers final now that the follower did not see final,
    and of the cross-shard ones credited by a final block now that the tracker did not see."""
    late_final: set[tuple[int, int]] = set()
    late_credited: set[tuple[int, int]] = set()
    by_index = {shard.index: shard for shard in shards}
    for shard in shards:
        t = shard.timings
        unseen = [i for i in range(len(t)) if t.status[i] in (ACCEPTED, DUPLICATE) and math.isnan(t.committed[i])]
        async with open_clients(shard.nodes, timeout_s=30) as clients:
            for first in range(0, len(unseen), STATUS_IDS):
                chunk = unseen[first:first + STATUS_IDS]
                for client in clients:
                    try:
                        statuses = await client.tx_statuses([shard.work.ids[i] for i in chunk])
                    except NodeApiError:
                        continue
                    late_final.update((shard.index, i) for i, status in zip(chunk, statuses)
                                      if status.status == "committed" and status.final)
                    break
    for destination in by_index:
        asking = [(shard, i) for shard in shards for i, rid in shard.work.receipt_ids.items()
                  if shard.work.destinations[i] == destination and math.isnan(shard.credited[i])
                  and (not math.isnan(shard.timings.committed[i]) or (shard.index, i) in late_final)]
        async with open_clients(by_index[destination].nodes, timeout_s=30) as clients:
            for first in range(0, len(asking), STATUS_IDS):
                chunk = asking[first:first + STATUS_IDS]
                for client in clients:
                    try:
                        statuses = await client.receipt_statuses([s.work.receipt_ids[i] for s, i in chunk])
                    except NodeApiError:
                        continue
                    late_credited.update((s.index, i) for (s, i), status in zip(chunk, statuses)
                                         if status.status == "credited" and status.final)
                    break
    return late_final, late_credited
