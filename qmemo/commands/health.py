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

    from qmemo.devnet.health import wait_ready
    from qmemo.errors import ConfigError

    bad = [u for u in args.urls if not u.startswith(("http://", "https://"))]
    if bad:
        raise ConfigError(f"node URLs must start with http:// (got {', '.join(bad)})")
    ready = asyncio.run(wait_ready([u.rstrip("/") for u in args.urls], args.wait))
    for url, ok in ready.items():
        print(f"{url}: {'ready' if ok else 'NOT ready'}")
    return 0 if all(ready.values()) else 1

