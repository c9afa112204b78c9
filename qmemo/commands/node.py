"""`qmemo node`: run one qMEMO node (HTTP API, verification pool, producer, sync, store).

Flags override the settings of `--config FILE` (TOML or JSON, keys named like the
fields of qmemo.node.config.NodeConfig). SIGINT/SIGTERM stop the node cleanly: the
block write under way finishes, the store is closed, the exit status is 0.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--genesis", type=Path, help="the devnet's genesis.json")
    parser.add_argument("--key", type=Path, help="this node's key file (one validator key)")
    parser.add_argument("--data", type=Path, help="directory for the node's chain database")
    parser.add_argument("--port", type=int, help="HTTP port (default 8000)")
    parser.add_argument("--host", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--advertise", help="URL the other nodes reach this one at, e.g. http://203.0.113.7:8000 "
                                            "(default http://<host>:<port>; set it when binding 0.0.0.0 or behind NAT)")
    parser.add_argument("--peers", help="comma-separated peer base URLs, e.g. http://127.0.0.1:8001")
    parser.add_argument("--shard", type=int, help="in a sharded genesis, the shard to run (default: the key's)")
    parser.add_argument("--shard-peers", help="comma-separated base URLs of the other shards' nodes (receipts)")
    parser.add_argument("--name", help="node name in logs and metrics (default node-<validator index>)")
    parser.add_argument("--verify-threads", type=int, help="signature verification threads (default: CPU cores)")
    parser.add_argument("--verifier", choices=("fast", "liboqs"),
                        help="Falcon and ML-DSA verifier: fast (default; qMEMO's: cached keys, variable-time) "
                             "or liboqs")
    parser.add_argument("--event-loop", choices=("uvloop", "asyncio"),
                        help="uvloop (default; libuv's loop, in C) or asyncio (the standard library's)")
    parser.add_argument("--log-level", help="DEBUG, INFO (default), WARNING")
    parser.add_argument("--log-format", choices=("text", "json"),
                        help="text (default), or json: one JSON object per line, the node's name on each")
    parser.add_argument("--config", type=Path, help="settings file (TOML or JSON); flags override it")
    parser.add_argument("--print-config", action="store_true",
                        help="print every setting at its default, as a TOML file to start from, and exit")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from qmemo.net.server import run_node
    from qmemo.node.config import load_config, render_defaults
    from qmemo.errors import QmemoError
    from qmemo.node.log import log_refusal, use_log_format

    if args.print_config:
        print(render_defaults(), end="")
        return 0
    config = load_config(args.config, {
        "genesis": args.genesis, "key": args.key, "data": args.data, "port": args.port, "host": args.host,
        "advertise": args.advertise, "peers": args.peers, "shard": args.shard,
        "shard_peers": args.shard_peers, "name": args.name, "verify_threads": args.verify_threads,
        "verifier": args.verifier, "event_loop": args.event_loop,
        "log_level": args.log_level, "log_format": args.log_format,
    })
    use_log_format(config.log_format)
    try:
        run_node(config)
    except QmemoError as error:
        if config.log_format != "json":
            raise  # the CLI's one red line
        log_refusal(error, error.code)  # a JSON log stays all JSON
        return 1
    return 0
