"""Watching the nodes: a metrics timeline every second, final blocks as they become final, the end state.

One thread per node polls `GET /status` and `GET /metrics` once a second (short
timeouts: a paused or cut-off node shows up as a failed sample, not a stalled sampler)
and appends one JSON line to `metrics/<node>.jsonl`. Whenever a node's `final_height`
(blocks written to its store) passes what we have seen, the new final blocks' hashes go
to `chain/final-observed.jsonl`: the record `final_blocks_kept` later compares with the
chains at the end. A final block that differs from one seen final before at its height
(on any node) is also written to `chain/violations.jsonl` the moment it is seen.

At the end, `end_state()` reads every node's chain (height -> hash), one node's
transaction ids, and asks the nodes about accepted transactions missing from the chain
(`GET /tx/<id>`: evicted, and why). Only the node's public HTTP API is used.
"""

from __future__ import annotations

import threading
from collections import Counter
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson

SAMPLE_EVERY_S = 1.0
SAMPLE_TIMEOUT_S = 0.8
PAGE_BLOCKS = 100       # the API's most blocks per /blocks?txs=ids request


def get_json(url: str, timeout: float = SAMPLE_TIMEOUT_S) -> Any | None:
    """The JSON body of a 200 answer, or None (no answer, or another status)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return orjson.loads(response.read()) if response.status == 200 else None
    except (OSError, urllib.error.URLError, ValueError):
        return None


def read_blocks(url: str, start: int, stop: int | None = None, timeout: float = 30.0) -> list[dict[str, Any]] | None:
    """Blocks [start, stop] (to the tip if stop is None) with their tx ids; None if the node fails to answer."""
    blocks: list[dict[str, Any]] = []
    height = start
    while stop is None or height <= stop:
        limit = PAGE_BLOCKS if stop is None else min(PAGE_BLOCKS, stop - height + 1)
        page = get_json(f"{url}/blocks?from={height}&limit={limit}&txs=ids", timeout=timeout)
        if page is None:
            return None
        if not page["blocks"]:
            break
        blocks.extend(page["blocks"])
        height = page["blocks"][-1]["height"] + 1
    return blocks


class Sampler:
    """The per-node sampling threads; `stop()` joins them."""

    def __init__(self, urls: dict[str, str], run_dir: Path) -> None:
        self.urls = urls
        (run_dir / "metrics").mkdir(parents=True, exist_ok=True)
        (run_dir / "chain").mkdir(parents=True, exist_ok=True)
        self.run_dir = run_dir
        self.final_seen = {node: 0 for node in urls}
        self._final_hashes: dict[int, tuple[str, str]] = {}     # height -> (node, hash) first seen final
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._observed = (run_dir / "chain" / "final-observed.jsonl").open("ab")
        self._threads = [threading.Thread(target=self._loop, args=(node,), name=f"sample-{node}", daemon=True)
                         for node in urls]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=10)
        self._observed.close()

    def _loop(self, node: str) -> None:
        url = self.urls[node]
        with (self.run_dir / "metrics" / f"{node}.jsonl").open("ab") as out:
            next_at = time.monotonic()
            while not self._stop.is_set():
                status = get_json(f"{url}/status")
                metrics = get_json(f"{url}/metrics") if status is not None else None
                line = {"time_s": time.time(), "node": node, "ok": status is not None, "status": status,
                        "metrics": metrics}
                out.write(orjson.dumps(line) + b"\n")
                out.flush()
                if status is not None and status.get("final_height", 0) > self.final_seen[node]:
                    self._observe_final(node, url, status["final_height"])
                next_at += SAMPLE_EVERY_S
                self._stop.wait(max(0.0, next_at - time.monotonic()))

    def _observe_final(self, node: str, url: str, final_height: int) -> None:
        blocks = read_blocks(url, self.final_seen[node] + 1, final_height, timeout=5.0)
        if not blocks:
            return
        with self._lock:
            for block in blocks:
                seen = {"time_s": time.time(), "node": node, "height": block["height"], "hash": block["hash"]}
                self._observed.write(orjson.dumps(seen) + b"\n")
                first = self._final_hashes.setdefault(block["height"], (node, block["hash"]))
                if first[1] != block["hash"]:
                    with (self.run_dir / "chain" / "violations.jsonl").open("ab") as out:
                        out.write(orjson.dumps({**seen, "what": "final block differs", "first_node": first[0],
                                                "first_hash": first[1]}) + b"\n")
            self._observed.flush()
        self.final_seen[node] = blocks[-1]["height"]


def tips(urls: dict[str, str]) -> dict[str, tuple[int, str] | None]:
    out: dict[str, tuple[int, str] | None] = {}
    for node, url in urls.items():
        status = get_json(f"{url}/status", timeout=2.0)
        out[node] = (status["height"], status["tip_hash"]) if status else None
    return out


def wait_drained(urls: dict[str, str], drain_s: float) -> dict[str, dict[str, Any] | None]:
    """Poll until no node has anything pending or held (all committed or evicted), or `drain_s` passes.

    Only then can "committed or evicted with a reason" be asked of every accepted
    transaction: a held one is evicted only when its TTL runs out. The last mempools seen.
    """
    deadline = time.monotonic() + drain_s
    while True:
        mempools = {}
        for node, url in urls.items():
            status = get_json(f"{url}/status", timeout=2.0)
            mempools[node] = ({"pending": status["mempool"], "queued": status["mempool_queued"]}
                              if status else None)
        if all(m is not None and m["pending"] == 0 and m["queued"] == 0 for m in mempools.values()) \
                or time.monotonic() > deadline:
            return mempools
        time.sleep(0.5)


def wait_same_tip(urls: dict[str, str], settle_s: float) -> dict[str, tuple[int, str] | None]:
    """Poll until every node reports one tip, or `settle_s` passes: the last tips seen."""
    deadline = time.monotonic() + settle_s
    while True:
        current = tips(urls)
        values = set(current.values())
        if None not in values and len(values) == 1 or time.monotonic() > deadline:
            return current
        time.sleep(0.2)


def end_state(urls: dict[str, str], accepted: Iterable[str] | None, run_dir: Path,
              final_tips: dict[str, tuple[int, str] | None], mempools: dict[str, dict[str, Any] | None]) -> None:
    """Write chain/end.json (tips, each chain's hashes, mempools, evictions, others' statuses) and chain/tx-ids.txt."""
    chains: dict[str, dict[int, str] | None] = {}
    reference: list[dict[str, Any]] | None = None
    for node, url in urls.items():
        blocks = read_blocks(url, 1)
        chains[node] = {b["height"]: b["hash"] for b in blocks} if blocks is not None else None
        if blocks is not None and (reference is None or len(blocks) > len(reference)):
            reference = blocks
    ids = [tx_id for block in reference or [] for tx_id in block["tx_ids"]]
    (run_dir / "chain" / "tx-ids.txt").write_text("\n".join(ids) + "\n")
    in_chain = set(ids)
    missing = [tx_id for tx_id in (accepted or []) if tx_id not in in_chain]
    statuses = _statuses(list(urls.values()), missing)
    document = {"tips": {node: list(tip) if tip else None for node, tip in final_tips.items()},
                "chains": {node: ({str(h): v for h, v in chain.items()} if chain is not None else None)
                           for node, chain in chains.items()},
                "mempools": mempools,
                "evictions": {tx_id: reason for tx_id, (status, reason) in statuses.items()},
                "missing_status": dict(Counter(status for status, reason in statuses.values() if not reason))}
    (run_dir / "chain" / "end.json").write_bytes(orjson.dumps(document))


def _statuses(urls: list[str], missing: list[str]) -> dict[str, tuple[str, str | None]]:
    """For each id: (status, eviction reason) - evicted as some node reports it, else the best other status."""
    rank = {"committed": 4, "pending": 3, "queued": 2, "unknown": 1, "no answer": 0}

    def ask(tx_id: str) -> tuple[str, tuple[str, str | None]]:
        best = "no answer"
        for url in urls:
            answer = get_json(f"{url}/tx/{tx_id}", timeout=5.0)
            if answer and answer.get("status") == "evicted":
                return tx_id, ("evicted", answer.get("reason") or "evicted (no reason given)")
            if answer and rank.get(answer.get("status"), 0) > rank[best]:
                best = answer["status"]
        return tx_id, (best, None)

    with ThreadPoolExecutor(max_workers=8) as pool:
        return dict(pool.map(ask, missing))
