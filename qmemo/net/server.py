"""Run one node: load its genesis and key, serve HTTP, stop cleanly on SIGINT/SIGTERM.

`run_node` runs it on the configured event loop: uvloop by default (libuv's loop, written
in C), which costs a node less CPU per transaction than asyncio's, mostly in the "other"
the stage accounting cannot name (transports, futures, wake-ups); asyncio's own loop on
request (`--event-loop asyncio`). docs/methodology.md section 12 has the runs.

Order at start: listen first (so /health answers 503 while the store opens), then start
the node. Order at stop: stop accepting requests, let the ones in flight finish, stop the
node (it finishes the block write under way and closes the store), close the peer
session and the relay's connections.
"""

from __future__ import annotations

import asyncio
import faulthandler
import gc
import logging
import resource
import signal
import sys

import aiohttp
import uvloop
from aiohttp import web

from qmemo.crypto.keys import load_keys
from qmemo.crypto.verifier import load_shard_genesis
from qmemo.errors import ConfigError, KeyFileError
from qmemo.net.app import make_app
from qmemo.net.connections import NodeRunner
from qmemo.net.lean_post import LeanPosts
from qmemo.net.peer_client import HttpPeer
from qmemo.node.config import NodeConfig
from qmemo.node.heap import GC_YOUNG_THRESHOLD, pin_mmap_threshold
from qmemo.node.service import Node


def run_node(config: NodeConfig) -> None:
    """`serve(config)` on the event loop `config.event_loop` names, until it stops."""
    if config.event_loop == "uvloop":
        uvloop.run(serve(config))
    else:
        asyncio.run(serve(config))


def build_node(config: NodeConfig) -> Node:
    """The node for `config`, not started (reads the genesis and the key file)."""
    keys = load_keys(config.key)
    if len(keys) != 1:
        raise KeyFileError(f"{config.key} holds {len(keys)} keys; a node's key file holds exactly one")
    return Node(config, load_shard_genesis(config.genesis, keys[0].public_key, config.shard), keys[0])


# Descriptors a node needs besides its connections: the store, its journal, logs, the peer
# client's connections, the verify threads' wake-ups.
OWN_DESCRIPTORS = 256


def connections_allowed(wanted: int, log: logging.LoggerAdapter) -> int:
    """The connections the node may hold: `wanted`, after raising the process's soft
    descriptor limit to fit them and the node's own as far as the hard limit allows (a soft
    limit of 1,024 is common, the hard one higher); fewer, said in one WARNING line, where
    the limit does not stretch that far."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    needed = wanted + OWN_DESCRIPTORS
    if soft != resource.RLIM_INFINITY and soft < needed:
        target = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:      # a system maximum below the hard limit (macOS)
            log.warning("could not raise the descriptor limit to %d: %s", target, exc)
    allowed = wanted if soft == resource.RLIM_INFINITY else max(1, min(wanted, soft - OWN_DESCRIPTORS))
    if allowed < wanted:
        log.warning("max_connections %d lowered to %d: the descriptor limit is %d and the node keeps %d for "
                    "itself (raise `ulimit -n`)", wanted, allowed, soft, OWN_DESCRIPTORS)
    return allowed


async def serve(config: NodeConfig, *, stop: asyncio.Event | None = None) -> None:
    """Run a node until SIGINT/SIGTERM (or `stop` is set)."""
    heap_pinned = pin_mmap_threshold()     # before the node allocates its first large buffer
    node = build_node(config)
    sys.setswitchinterval(config.gil_switch_interval_s)
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    # SIGUSR1 writes every thread's stack to stderr (the log): what a stuck node is doing,
    # read without stopping it (the tests attach it to a node that stops answering).
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64))
    # The relay sends one batch at a time to each peer (shard peers are sent none): a
    # connection each. The peers' URLs are http://host:port (NodeConfig checks them).
    relay_posts = LeanPosts(connections=max(1, len(config.peers)))
    node.attach_peers([HttpPeer(url, session, node.metrics, config.url, config.peer_timeout_s, posts=relay_posts)
                       for url in config.peers],
                      [HttpPeer(url, session, node.metrics, config.url, config.peer_timeout_s, posts=relay_posts)
                       for url in config.shard_peers])
    runner = NodeRunner(make_app(node), access_log=None, handle_signals=False, shutdown_timeout=5.0,
                        keepalive_timeout=config.idle_timeout_s, send_timeout_s=config.send_timeout_s,
                        max_connections=connections_allowed(config.max_connections, node.log))
    await runner.setup()
    site = web.TCPSite(runner, config.host, config.port, reuse_address=True)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        await session.close()
        relay_posts.close()
        raise ConfigError(f"cannot listen on {config.host}:{config.port}: {exc.strerror}") from None
    node.log.info("listening on %s", config.url)
    if not heap_pinned:
        node.log.info("large buffers are left to the C library's own mmap rule: not glibc, or mallopt refused "
                      "(qmemo.node.heap)")
    try:
        await node.start()
        # What exists now (modules, the genesis, the restored chain) lives as long as the
        # process: frozen, the cycle collector never scans it again. And collect young
        # objects less often: a 500-transaction request allocates thousands of tracked
        # objects, and each collection that promotes them makes the full ones come sooner.
        gc.freeze()
        gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
        node.log.info("ready: chain %d, genesis %s.., height %d", node.genesis.chain_id,
                      node.genesis.hash.hex()[:16], node.chain.height)
        await stop.wait()
        node.log.info("stopping")
    finally:
        await runner.cleanup()
        await node.stop()
        await session.close()
        relay_posts.close()
