"""Watching the supply: the sum of every balance stays what the genesis gave, on every node, all along.

Transfers move coins between the funded accounts and fees go to the producer's account
(qmemo.core.state), so the balances of the genesis accounts and the validators' fee
accounts always add up to the genesis total - whatever was killed, paused, cut off or
replayed from a journal. A coin made or lost by a restart or a fork switch shows here.

A thread reads, every `every_s`, each node's height (`GET /status`) and the balances of
those accounts in one `POST /accounts`: the node answers it from one state, at its tip
(the node's handler does not wait between accounts). A sample is *consistent* when that
one request held every account; past the node's 10,000 accounts a request it takes
several, and then only when the tip did not move meanwhile - which cannot see a block
applied but not yet stored (`/status` shows the stored tip, `/accounts` the applied
state: two requests split by such a block read its fees without its debits;
docs/scenarios.md, "Chaos", has the run). Only consistent samples are judged. Each sample
is a line of `chain/supply.jsonl`; a consistent one off the total is also a line of
`chain/violations.jsonl` at once, with its time. Only the node's public API is used.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import orjson

from qmemo.crypto.verifier import load_genesis
from qmemo.errors import NodeApiError
from qmemo.net.client import NodeClient, open_clients

SUPPLY_EVERY_S = 10.0
# At the end a node still makes a block every interval, empty: a read that a block crossed
# is tried again, a few times, until one is consistent.
END_TRIES = 5
ACCOUNTS_PER_REQUEST = 10_000    # the node's POST /accounts limit (docs/api.md)
READ_TIMEOUT_S = 5.0


def supply_accounts(genesis_path: Path) -> tuple[list[bytes], int]:
    """The addresses whose balances hold the whole supply and the genesis total."""
    genesis = load_genesis(genesis_path)
    addresses = dict.fromkeys([address for address, _ in genesis.balances] +
                              [validator.address for validator in genesis.validators])
    return list(addresses), sum(balance for _, balance in genesis.balances)


async def sample(client: NodeClient, addresses: list[bytes]) -> dict[str, Any]:
    """One node's supply: {"height", "supply", "consistent"}, or {"ok": False} if it did not answer.
    Consistent: one request held every account, or the tip did not move across several."""
    try:
        before = await client.status()
        total = 0
        for start in range(0, len(addresses), ACCOUNTS_PER_REQUEST):
            accounts = await client.accounts(addresses[start:start + ACCOUNTS_PER_REQUEST])
            total += sum(account.balance for account in accounts)
        after = await client.status()
    except NodeApiError:
        return {"ok": False}
    consistent = len(addresses) <= ACCOUNTS_PER_REQUEST or \
        (before.height, before.tip_hash) == (after.height, after.tip_hash)
    return {"ok": True, "height": after.height, "supply": total, "consistent": consistent}


class SupplyWatch:
    """The sampling thread; `sample_all()` once more at the end (every node, settled); `stop()` joins."""

    def __init__(self, urls: dict[str, str], genesis_path: Path, run_dir: Path, every_s: float = SUPPLY_EVERY_S):
        self.urls = urls
        self.addresses, self.expected = supply_accounts(genesis_path)
        self.every_s = every_s
        self._stop = threading.Event()
        self._lock = threading.Lock()
        (run_dir / "chain").mkdir(parents=True, exist_ok=True)
        self._samples = (run_dir / "chain" / "supply.jsonl").open("ab")
        self._violations = run_dir / "chain" / "violations.jsonl"
        self._thread = threading.Thread(target=self._loop, name="supply-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:        # started
            self._thread.join(timeout=30)
        self._samples.close()

    def sample_all(self, at_end: bool = False) -> None:
        """Every node's supply once (at the end: until a consistent read, `END_TRIES` at most)."""
        asyncio.run(self._sample_all(at_end))

    async def _sample_all(self, at_end: bool) -> None:
        async with open_clients(list(self.urls.values()), timeout_s=READ_TIMEOUT_S) as clients:
            for node, client in zip(self.urls, clients):
                for _ in range(END_TRIES if at_end else 1):
                    line = {"time_s": time.time(), "node": node, "expected": self.expected, "at_end": at_end,
                            **await sample(client, self.addresses)}
                    self._write(line)
                    if line.get("consistent"):
                        break

    def _write(self, line: dict[str, Any]) -> None:
        with self._lock:
            self._samples.write(orjson.dumps(line) + b"\n")
            self._samples.flush()
            if line.get("consistent") and line["supply"] != self.expected:
                with self._violations.open("ab") as out:
                    out.write(orjson.dumps({**line, "what": "supply changed"}) + b"\n")

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self.sample_all()
