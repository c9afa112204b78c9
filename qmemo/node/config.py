"""A node's configuration: one dataclass, filled from a file, then from command-line flags.

`qmemo node --config node.toml` reads a TOML (or JSON) object whose keys are the field
names below; flags given on the command line override the file. Every limit a client
can run into is here, with its unit in its name, and documented in docs/api.md.

Chain parameters (block interval, producer timeout, transactions per block) are not
here: they are consensus rules and come from the genesis, the same for every node.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from qmemo.errors import ConfigError
from qmemo.node.clock import Clock, wall_clock_ms


def _default_threads() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


@dataclass(frozen=True, slots=True)
class NodeConfig:
    genesis: Path
    key: Path
    data: Path
    port: int = 8000
    host: str = "127.0.0.1"
    peers: tuple[str, ...] = ()
    name: str | None = None               # default: node-<validator index> (or node-<port>)
    verify_threads: int = field(default_factory=_default_threads)

    # Client limits (docs/api.md, "Limits").
    max_batch_txs: int = 1000             # transactions per POST /txs
    max_body_bytes: int = 16 << 20        # a client request body (JSON of 1,000 ML-DSA-44 txs fits)
    max_peer_body_bytes: int = 128 << 20  # a peer's block or transaction batch
    retry_after_s: int = 1                # what a 429 tells the client to wait

    # Mempool (qmemo.core.mempool's limits).
    mempool_max_txs: int = 50_000
    mempool_max_bytes: int = 128 << 20
    mempool_max_per_sender: int = 256
    mempool_future_nonces: int = 64       # nonces held ahead of a gap (Ethereum's "queued")
    mempool_future_ttl_s: float = 30.0    # a held transaction whose gap never fills is evicted

    # Propagation and sync.
    relay_flush_s: float = 0.05           # collect accepted transactions this long before relaying
    relay_max_batch_txs: int = 1000
    sync_interval_s: float = 0.5          # how often peers' tips are polled
    sync_batch_blocks: int = 20           # blocks per sync request
    peer_timeout_s: float = 10.0
    # Blocks kept in memory (undoable by a fork switch) before they are written to the
    # store; None: 3 on a node with peers, 0 on one without (nobody can fork its chain).
    finality_depth: int | None = None

    # How long a thread may hold the GIL while another waits for it. Python's 5 ms default
    # lets the event loop (decoding a batch: ~4 ms of Python) stall every verify thread that
    # returns from liboqs; shorter turns keep the verify threads busy (docs/api.md, "Tuning").
    gil_switch_interval_s: float = 0.0005

    log_level: str = "INFO"

    # Chain time in ms (qmemo.node.clock); set in code only (tests drive it), never from a file.
    clock: Clock = field(default=wall_clock_ms, repr=False, compare=False, metadata={"from_files": False})

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


_PATH_FIELDS = {"genesis", "key", "data"}


def load_config(file: Path | None, overrides: dict[str, Any]) -> NodeConfig:
    """The config from `file` (TOML or JSON), with `overrides` (non-None values) on top."""
    values: dict[str, Any] = {}
    if file is not None:
        values.update(_read(file))
    values.update({key: value for key, value in overrides.items() if value is not None})
    known = {f.name for f in dataclasses.fields(NodeConfig) if f.metadata.get("from_files", True)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"unknown node setting(s): {', '.join(unknown)}")
    missing = sorted(name for name in _PATH_FIELDS if name not in values)
    if missing:
        raise ConfigError(f"node setting(s) required: {', '.join(missing)}")
    for name in _PATH_FIELDS:
        values[name] = Path(values[name])
    if isinstance(values.get("peers"), str):
        values["peers"] = values["peers"].split(",")
    values["peers"] = tuple(p.strip().rstrip("/") for p in values.get("peers", ()) if p.strip())
    try:
        config = NodeConfig(**values)
    except TypeError as exc:
        raise ConfigError(f"bad node configuration: {exc}") from None
    if config.verify_threads < 0:
        raise ConfigError("verify_threads must be 0 (verify on the event loop) or more")
    if not 0 <= config.port <= 65535:
        raise ConfigError(f"port {config.port} is not a TCP port")
    return config


def _read(file: Path) -> dict[str, Any]:
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read config file {file}: {exc.strerror}") from None
    try:
        document = orjson.loads(data) if file.suffix == ".json" else tomllib.loads(data.decode())
    except (orjson.JSONDecodeError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {file} does not parse: {exc}") from None
    if not isinstance(document, dict):
        raise ConfigError(f"config file {file} must hold one object of settings")
    return {key.replace("-", "_"): value for key, value in document.items()}
