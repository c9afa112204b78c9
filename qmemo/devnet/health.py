"""Wait until nodes answer ready: by polling /health with a deadline, never a fixed sleep.

Used by `qmemo health` (for devnet.sh and scripts), `qmemo soak` and `qmemo bench node`.
"""

from __future__ import annotations

import asyncio
import time

from qmemo.errors import NodeApiError
from qmemo.net.client import open_clients

POLL_TIMEOUT_S = 2.0     # one /health call: a node that takes longer is polled again


async def wait_ready(urls: list[str], deadline_s: float, poll_s: float = 0.2) -> dict[str, bool]:
    """{url: ready} once every node answers ready on /health or `deadline_s` has passed."""
    ready = {url: False for url in urls}
    end = time.monotonic() + deadline_s
    async with open_clients(urls, POLL_TIMEOUT_S) as clients:
        while True:
            for url, client in zip(urls, clients):
                if ready[url]:
                    continue
                try:
                    ready[url] = (await client.health()).ready
                except NodeApiError:
                    pass
            if all(ready.values()) or time.monotonic() >= end:
                return ready
            await asyncio.sleep(poll_s)
