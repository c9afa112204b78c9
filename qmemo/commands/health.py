"""`qmemo health`: are these nodes ready? Optionally wait for them, with a deadline.

For launchers (devnet.sh) and scripts: polls each node's /health until it answers 200
or the deadline passes, then prints one line per node and exits 0 only if all are ready.
"""

from __future__ import annotations

import argparse


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("urls", nargs="+", help="node base URLs, e.g. http://127.0.0.1:8000")
    parser.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                        help="keep polling until every node is ready or this many seconds pass")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import asyncio

    from qmemo.errors import ConfigError

    bad = [u for u in args.urls if not u.startswith(("http://", "https://"))]
    if bad:
        raise ConfigError(f"node URLs must start with http:// (got {', '.join(bad)})")
    ready = asyncio.run(wait_ready([u.rstrip("/") for u in args.urls], args.wait))
    for url, ok in ready.items():
        print(f"{url}: {'ready' if ok else 'NOT ready'}")
    return 0 if all(ready.values()) else 1


async def wait_ready(urls: list[str], deadline_s: float, poll_s: float = 0.2) -> dict[str, bool]:
    import asyncio
    import time

    import aiohttp

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
