"""Wait until nodes answer ready: by polling /health with a deadline, never a fixed sleep.

Used by `qmemo health` (for devnet.sh and scripts) and by `qmemo bench node`.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp


async def wait_ready(urls: list[str], deadline_s: float, poll_s: float = 0.2) -> dict[str, bool]:
    """{url: ready} once every node answers 200 on /health or `deadline_s` has passed."""
    ready = {url: False for url in urls}
    end = time.monotonic() + deadline_s
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
        while True:
            for url in [u for u, ok in ready.items() if not ok]:
                try:
                    async with session.get(f"{url}/health") as response:
                        ready[url] = response.status == 200
                except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
                    pass
            if all(ready.values()) or time.monotonic() >= end:
                return ready
            await asyncio.sleep(poll_s)
