"""Watching the nodes: a metrics timeline every second, final blocks as they become final, the end state.

The sampler polls every node's `GET /status` and `GET /metrics` once a second, one task
per node on one event loop in a thread of its own (short timeouts: a paused or cut-off
node shows up as a failed sample, not a stalled sampler), and appends one JSON line to
`metrics/<node>.jsonl`: the two documents as the node wrote them (qmemo.api_schema), read
back by qmemo.analysis.scenario_run and qmemo.scenario.invariants with the same classes (a
chaos run's `resources_flat` judges each process life's RSS and open fds from them).
Whenever a node's `final_height` (blocks written to its store) passes what we have seen,
the new final blocks' hashes go to `chain/final-observed.jsonl`: the record
`final_blocks_kept` later compares with the chains at the end. A final block that
differs from one seen final before at its height (on any node) is also written to
`chain/violations.jsonl` the moment it is seen.

At the end, `end_state()` reads every node's chain (height -> hash), one node's
transaction ids, and asks the nodes about accepted transactions missing from the chain
(`GET /tx/<id>`: evicted, and why). Only the node's public API is used, through its
client (qmemo.net.client); the runner is not async, so each call here runs its own loop.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Any

import orjson

from qmemo.api_schema import COMMITTED, EVICTED, PENDING, HELD, UNKNOWN, BlockSummary, NodeStatus
from qmemo.errors import NodeApiError
from qmemo.load.agreement import read_blocks
from qmemo.net.client import NodeClient, open_clients
from qmemo.records import to_json

SAMPLE_EVERY_S = 1.0
SAMPLE_TIMEOUT_S = 0.8
FINAL_READ_TIMEOUT_S = 5.0     # a page of final blocks with their ids is more than a sample
STOP_CHECK_S = 0.1      # how soon a sampler waiting for its next sample sees `stop()`
STATUS_ASKS = 8         # GET /tx/<id> in flight at the end

Tip = tuple[int, str | None]      # (height, tip hash in hex; None before the first block)


async def _status(client: NodeClient) -> NodeStatus | None:
    try:
        return await client.status()
    except NodeApiError:
        return None


class Sampler:
    """The sampling thread (one event loop, a task per node); `stop()` joins it."""

    def __init__(self, urls: dict[str, str], run_dir: Path) -> None:
        self.urls = urls
        (run_dir / "metrics").mkdir(parents=True, exist_ok=True)
        (run_dir / "chain").mkdir(parents=True, exist_ok=True)
        self.run_dir = run_dir
        self.final_seen = {node: 0 for node in urls}
        self._final_hashes: dict[int, tuple[str, str]] = {}     # height -> (node, hash) first seen final
        self._stop = threading.Event()
        self._observed = (run_dir / "chain" / "final-observed.jsonl").open("ab")
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), name="sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        self._observed.close()

    async def _run(self) -> None:
        async with open_clients(list(self.urls.values()), SAMPLE_TIMEOUT_S) as clients:
            await asyncio.gather(*(self._loop(node, client) for node, client in zip(self.urls, clients)))

    async def _loop(self, node: str, client: NodeClient) -> None:
        with (self.run_dir / "metrics" / f"{node}.jsonl").open("ab") as out:
            next_at = time.monotonic()
            while not self._stop.is_set():
                status = await _status(client)
                metrics = None
                if status is not None:
                    try:
                        metrics = await client.metrics()
                    except NodeApiError:
                        pass
                line = {"time_s": time.time(), "node": node, "ok": status is not None, "status": to_json(status),
                        "metrics": to_json(metrics)}
                out.write(orjson.dumps(line) + b"\n")
                out.flush()
                if status is not None and status.final_height > self.final_seen[node]:
                    await self._observe_final(node, client, status.final_height)
                next_at += SAMPLE_EVERY_S
                while not self._stop.is_set() and (left_s := next_at - time.monotonic()) > 0:
                    await asyncio.sleep(min(left_s, STOP_CHECK_S))

    async def _observe_final(self, node: str, client: NodeClient, final_height: int) -> None:
        blocks = await read_blocks(client.with_timeout(FINAL_READ_TIMEOUT_S), self.final_seen[node] + 1, final_height)
        if not blocks:
            return
        _write_observed(self._observed, node, blocks, self._final_hashes, self.run_dir / "chain" / "violations.jsonl")
        self.final_seen[node] = blocks[-1].height


def _write_observed(out: IO[bytes], node: str, blocks: list[BlockSummary], first_final: dict[int, tuple[str, str]],
                    violations: Path) -> None:
    """Each block seen final, and - to `violations` - one whose hash differs from the first
    final block seen at its height (on any node). No await between lines: the node tasks
    never interleave a line."""
    for block in blocks:
        seen = {"time_s": time.time(), "node": node, "height": block.height, "hash": block.hash.hex()}
        out.write(orjson.dumps(seen) + b"\n")
        first = first_final.setdefault(block.height, (node, seen["hash"]))
        if first[1] != seen["hash"]:
            with violations.open("ab") as bad:
                bad.write(orjson.dumps({**seen, "what": "final block differs", "first_node": first[0],
                                        "first_hash": first[1]}) + b"\n")
    out.flush()


async def _tips(urls: dict[str, str]) -> dict[str, Tip | None]:
    async with open_clients(list(urls.values()), timeout_s=2.0) as clients:
        statuses = await asyncio.gather(*map(_status, clients))
    return {node: (status.height, status.tip_hash.hex() if status.tip_hash is not None else None) if status else None
            for node, status in zip(urls, statuses)}


def tips(urls: dict[str, str]) -> dict[str, Tip | None]:
    """Each node's tip, None for a node that did not answer."""
    return asyncio.run(_tips(urls))


async def _mempools(urls: dict[str, str]) -> dict[str, dict[str, int] | None]:
    async with open_clients(list(urls.values()), timeout_s=2.0) as clients:
        statuses = await asyncio.gather(*map(_status, clients))
    return {node: {"pending": status.mempool, "held": status.mempool_held} if status else None
            for node, status in zip(urls, statuses)}


def wait_drained(urls: dict[str, str], drain_s: float) -> dict[str, dict[str, int] | None]:
    """Poll until no node has anything pending or held (all committed or evicted), or `drain_s` passes.

    Only then can "committed or evicted with a reason" be asked of every accepted
    transaction: a held one is evicted only when its TTL runs out. The last mempools seen.
    """
    deadline = time.monotonic() + drain_s
    while True:
        mempools = asyncio.run(_mempools(urls))
        if all(m is not None and m["pending"] == 0 and m["held"] == 0 for m in mempools.values()) \
                or time.monotonic() > deadline:
            return mempools
        time.sleep(0.5)


def wait_same_tip(urls: dict[str, str], settle_s: float,
                  groups: Sequence[Iterable[str]] | None = None) -> dict[str, Tip | None]:
    """Poll until every node reports one tip - the same within each of `groups` (a sharded
    devnet's shards; default: all nodes together) - or `settle_s` passes: the last tips seen."""
    deadline = time.monotonic() + settle_s
    groups = [list(group) for group in groups] if groups else [list(urls)]
    while True:
        current = tips(urls)
        settled = all(None not in (values := {current[node] for node in group}) and len(values) == 1
                      for group in groups)
        if settled or time.monotonic() > deadline:
            return current
        time.sleep(0.2)


def end_state(urls: dict[str, str], accepted: Iterable[str] | None, run_dir: Path,
              final_tips: dict[str, Tip | None], mempools: dict[str, dict[str, Any] | None],
              groups: Sequence[Iterable[str]] | None = None) -> None:
    """Write chain/end.json (tips, each chain's hashes, mempools, evictions, others' statuses) and chain/tx-ids.txt
    (the longest chain's ids of each of `groups`: a sharded devnet's shards; default all nodes as one)."""
    asyncio.run(_end_state(urls, accepted, run_dir, final_tips, mempools, groups))


async def _end_state(urls: dict[str, str], accepted: Iterable[str] | None, run_dir: Path,
                     final_tips: dict[str, Tip | None], mempools: dict[str, dict[str, Any] | None],
                     groups: Sequence[Iterable[str]] | None = None) -> None:
    chains: dict[str, dict[int, str] | None] = {}
    group_of = {node: k for k, group in enumerate(groups or [urls]) for node in group}
    references: dict[int, list[BlockSummary]] = {}
    async with open_clients(list(urls.values()), timeout_s=30.0) as clients:
        for node, client in zip(urls, clients):
            blocks = await read_blocks(client, 1)
            chains[node] = {b.height: b.hash.hex() for b in blocks} if blocks is not None else None
            reference = references.get(group_of[node])
            if blocks is not None and (reference is None or len(blocks) > len(reference)):
                references[group_of[node]] = blocks
        ids = [tx_id.hex() for reference in references.values() for block in reference
               for tx_id in block.tx_ids or ()]
        (run_dir / "chain" / "tx-ids.txt").write_text("\n".join(ids) + "\n")
        in_chain = set(ids)
        missing = [tx_id for tx_id in (accepted or []) if tx_id not in in_chain]
        statuses = await _statuses(clients, missing)
    document = {"tips": {node: list(tip) if tip else None for node, tip in final_tips.items()},
                "chains": {node: ({str(h): v for h, v in chain.items()} if chain is not None else None)
                           for node, chain in chains.items()},
                "mempools": mempools,
                "evictions": {tx_id: reason for tx_id, (status, reason) in statuses.items()},
                "missing_status": dict(Counter(status for status, reason in statuses.values() if not reason))}
    (run_dir / "chain" / "end.json").write_bytes(orjson.dumps(document))


NO_ANSWER = "no answer"
# The best a node can say of a transaction that is not evicted (from the best to none).
_RANK = {COMMITTED: 4, PENDING: 3, HELD: 2, UNKNOWN: 1, NO_ANSWER: 0}


async def _statuses(clients: list[NodeClient], missing: list[str]) -> dict[str, tuple[str, str | None]]:
    """For each id: (status, eviction reason) - evicted as some node reports it, else the best other status."""
    gate = asyncio.Semaphore(STATUS_ASKS)

    async def ask(tx_id: str) -> tuple[str, tuple[str, str | None]]:
        best = NO_ANSWER
        async with gate:
            for client in clients:
                try:
                    answer = await client.tx_status(bytes.fromhex(tx_id))
                except NodeApiError:
                    continue
                if answer.status == EVICTED:
                    return tx_id, (EVICTED, answer.reason or "evicted (no reason given)")
                if _RANK.get(answer.status, 0) > _RANK[best]:
                    best = answer.status
        return tx_id, (best, None)

    return dict(await asyncio.gather(*map(ask, missing)))
