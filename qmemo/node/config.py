"""A node's configuration: one dataclass, filled from a file, then from command-line flags.

`qmemo node --config node.toml` reads a TOML (or JSON) object whose keys are the field
names below; flags given on the command line override the file. Every limit a client
can run into is here, with its unit in its name, and documented in docs/api.md.

Every setting a file may hold is a field made by `setting()`: its type annotation and
its `Setting` (range, choices, a help line) are the one schema that `load_config` checks
values against (a wrong type, an unknown key or a value out of range is one ConfigError
naming the key, the value and what is expected; never a TypeError later) and that
`render_defaults` (`qmemo node --print-config`) prints. A field made without `setting()`
is never read from a file: a program passes it in.

Chain parameters (block interval, producer timeout, transactions per block) are not
here: they are consensus rules and come from the genesis, the same for every node.
"""

from __future__ import annotations

import dataclasses
import math
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from qmemo.core.defaults import POOL
from qmemo.errors import ConfigError
from qmemo.node.clock import Clock, wall_clock_ms


def _default_threads() -> int:
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)


# Field metadata. A field without SETTING metadata is not a file setting (not read from a
# config file, not printed by --print-config): the place for objects a program passes in
# (a clock, a callback), which `load_config` takes only from its overrides, unchecked.
SETTING = "qmemo_setting"


@dataclass(frozen=True, slots=True)
class Setting:
    """How a file setting is checked and documented: its value range and one line of help."""

    help: str
    low: float | None = None               # the smallest value allowed (None: no bound)
    high: float | None = None
    above: bool = False                    # `low` itself is excluded (a duration that must pass)
    choices: tuple[str, ...] = ()          # the allowed values of a string, compared case-insensitively
    expected: str | None = None            # what the refusal says is expected, where the bounds say too little
    example: Any = None                    # shown (commented out) by --print-config for a default of None
    urls: bool = False                     # each item of a list is a node's base URL, http://host:port


def setting(default: Any = dataclasses.MISSING, help: str = "", *, default_factory: Any = dataclasses.MISSING,
            **check: Any) -> Any:
    """A dataclass field that is a file setting, with its check (`Setting`'s fields)."""
    return field(default=default, default_factory=default_factory, metadata={SETTING: Setting(help, **check)})


@dataclass(frozen=True, slots=True)
class NodeConfig:
    genesis: Path = setting(help="the devnet's genesis.json")
    key: Path = setting(help="this node's key file (one validator key)")
    data: Path = setting(help="directory for the node's chain database")
    port: int = setting(8000, "HTTP port (0: any free port)", low=0, high=65535,
                        expected="a TCP port, a whole number from 0 to 65535")
    host: str = setting("127.0.0.1", "address to bind (0.0.0.0: every interface)")
    # What this node calls itself to its peers (their logs name it by this): the bind
    # address says nothing to another machine when it is 0.0.0.0 or behind NAT.
    advertise: str | None = setting(None, "URL other nodes reach this node at (default http://<host>:<port>)",
                                    example="http://203.0.113.7:8000")
    peers: tuple[str, ...] = setting((), "peer base URLs, e.g. [\"http://127.0.0.1:8001\"]", urls=True)
    # A sharded genesis (qmemo.core.shards): which shard this node runs - a validator's key
    # names its own; an observer needs this - and the other shards' nodes, which it pulls
    # cross-shard receipts from (qmemo.node.receipt_transport).
    shard: int | None = setting(None, "the shard this node runs (default: its validator key's)", low=0,
                                example=0)
    shard_peers: tuple[str, ...] = setting((), "base URLs of the other shards' nodes (receipts are pulled from them)",
                                           urls=True)
    receipt_pull_interval_s: float = setting(0.25, "the wait before a shard's node asks another shard for "
                                             "receipts again after an ask failed or came back at once, seconds "
                                             "(a held ask waits for the source's next final block)",
                                             low=0, above=True)
    name: str | None = setting(None, "name in logs and metrics (default: node-<validator index>, or node-<port>)",
                               example="node-0")
    verify_threads: int = setting(help="signature verification threads (default: the CPU cores this process may use)",
                                  default_factory=_default_threads, low=0,
                                  expected="0 (verify on the event loop) or more")
    # Falcon's and ML-DSA's verifier (qmemo.crypto.schemes.VERIFIERS): different speed, and for
    # ML-DSA on AVX2 CPUs FIPS 204's verdicts where liboqs 0.13's differ (native/mldsa_vt.h).
    verifier: str = setting("fast", "Falcon and ML-DSA verifier: fast (qMEMO's: cached keys, variable-time) or "
                            "liboqs",
                            choices=("fast", "liboqs"))
    # The event loop (qmemo.net.server.run_node): uvloop (libuv's loop, in C) costs a node less
    # CPU per transaction than asyncio's own (docs/methodology.md, section 12, has the runs).
    event_loop: str = setting("uvloop", "event loop: uvloop (libuv, in C; the default) or asyncio (the "
                                        "standard library's)", choices=("uvloop", "asyncio"))

    # Client limits (docs/api.md, "Limits").
    max_batch_txs: int = setting(1000, "transactions per POST /txs", low=1)
    # A client request body (JSON of 1,000 ML-DSA-44 txs fits).
    max_body_bytes: int = setting(16 << 20, "a client request body, bytes", low=1)
    max_peer_body_bytes: int = setting(128 << 20, "a peer's block or transaction batch, bytes", low=1)
    retry_after_s: int = setting(1, "what a 429 tells the client to wait, seconds", low=0)
    # Slow and idle clients: what one may hold, and for how long (qmemo.net.connections has
    # the rules). idle_timeout_s sits above the 15 s aiohttp's client pool keeps an idle
    # connection, so the project's own clients never reuse one the node is closing.
    body_timeout_s: float = setting(30.0, "seconds a request body may take to arrive", low=0, above=True)
    idle_timeout_s: float = setting(30.0, "seconds a connection may sit with no request under way", low=0,
                                    above=True)
    send_timeout_s: float = setting(10.0, "seconds a connection's unread answers may sit without shrinking",
                                    low=0, above=True)
    max_connections: int = setting(2048, "client and peer connections open at once", low=1)

    # Mempool (qmemo.core.mempool's limits).
    mempool_max_txs: int = setting(POOL.max_txs, "pending transactions clients fill (peers' relays: up to twice)", low=1)
    mempool_max_bytes: int = setting(POOL.max_bytes, "bytes of pending transactions clients fill (relays: twice)", low=1)
    mempool_max_per_sender: int = setting(POOL.max_per_sender, "pending transactions per sender at most", low=1)
    # Nonces held ahead of a gap (Ethereum's "queued"; "held" here, in every setting, class and status).
    mempool_held_window: int = setting(POOL.held_window, "nonces held ahead of a sender's gap", low=0)
    # Caps on held transactions, so filling the held queue takes many funded accounts, not
    # free keys (docs/api.md, section 8, "Holding is not free").
    mempool_held_max_txs: int = setting(POOL.held_max_txs, "held transactions at most, all senders together", low=0)
    mempool_held_per_sender: int = setting(POOL.held_per_sender, "held transactions per sender at most", low=0)
    # A held transaction whose gap never fills is evicted.
    mempool_held_ttl_s: float = setting(POOL.held_ttl_s, "seconds a held transaction waits for its gap to fill",
                                          low=0, above=True)

    # Propagation and sync.
    relay_flush_s: float = setting(0.05, "seconds accepted transactions are collected before relaying", low=0)
    relay_max_batch_txs: int = setting(1000, "transactions per relayed batch at most", low=1)
    sync_interval_s: float = setting(0.5, "how often peers' tips are polled, seconds", low=0, above=True)
    sync_batch_blocks: int = setting(20, "blocks per sync request", low=1)
    peer_timeout_s: float = setting(10.0, "seconds a peer call may take", low=0, above=True)
    # Finality: a block is final once a strict majority of the validators produced blocks
    # at or above it (qmemo.core.finality); this many blocks on top are needed besides.
    finality_depth: int = setting(0, "blocks on top of a block needed for finality besides a majority "
                                     "of validators building on it", low=0, example=3)

    # How long a thread may hold the GIL while another waits for it. Python's 5 ms default
    # lets the event loop (decoding a batch: ~4 ms of Python) stall every verify thread that
    # returns from liboqs; shorter turns keep the verify threads busy (docs/api.md, "Tuning").
    gil_switch_interval_s: float = setting(0.0005, "Python's GIL switch interval, seconds", low=0, above=True)

    log_level: str = setting("INFO", "log level", choices=("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"))
    log_format: str = setting("text", "log lines: text, or json (one JSON object per line, docs/api.md)",
                              choices=("text", "json"))

    # Chain time in ms (qmemo.node.clock); set in code only (tests drive it), never from a file.
    clock: Clock = field(default=wall_clock_ms, repr=False, compare=False)

    @property
    def url(self) -> str:
        return self.advertise.rstrip("/") if self.advertise else f"http://{self.host}:{self.port}"


_REQUIRED = ("data", "genesis", "key")


def file_settings() -> dict[str, dataclasses.Field]:
    """The fields a config file may set, by name, in declaration order."""
    return {f.name: f for f in dataclasses.fields(NodeConfig) if SETTING in f.metadata}


def load_config(file: Path | None, overrides: dict[str, Any]) -> NodeConfig:
    """The config from `file` (TOML or JSON), with `overrides` (non-None values) on top.

    Every file setting, from the file or an override, is checked against its field's type
    and range; a refusal is one ConfigError naming the key, the value and what is expected.
    """
    settings = file_settings()
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    if file is not None:
        values.update(_read(file))
        origin = dict.fromkeys(values, f"{file}: ")
        unknown = sorted(set(values) - set(settings))
        if unknown:
            raise ConfigError(f"{file}: unknown node setting(s): {', '.join(unknown)} "
                              f"(`qmemo node --print-config` lists them all)")
    overrides = {key: value for key, value in overrides.items() if value is not None}
    values.update(overrides)
    for key in overrides:
        origin.pop(key, None)
    unknown = sorted(set(values) - {f.name for f in dataclasses.fields(NodeConfig)})
    if unknown:
        raise ConfigError(f"unknown node setting(s): {', '.join(unknown)}")
    missing = [name for name in _REQUIRED if name not in values]
    if missing:
        raise ConfigError(f"node setting(s) required: {', '.join(missing)}")
    for name, value in values.items():
        if name in settings:
            values[name] = _checked(name, value, settings[name], origin.get(name, ""))
    return NodeConfig(**values)


def _checked(name: str, value: Any, field_: dataclasses.Field, where: str) -> Any:
    """`value` converted to the field's type, or a ConfigError saying what was expected."""
    rule: Setting = field_.metadata[SETTING]
    kind = str(field_.type)
    optional = kind.endswith(" | None")
    kind = kind.removesuffix(" | None")

    def refuse(expected: str) -> ConfigError:
        return ConfigError(f"{where}{name} must be {expected}, got {_shown(value)}")

    if value is None and optional:
        return None
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise refuse(_expected(rule, "a whole number"))
    elif kind == "float":
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise refuse(_expected(rule, "a number"))
        value = float(value)
    elif kind == "str":
        spelled = {choice.upper(): choice for choice in rule.choices}   # case-insensitive, as documented
        if not isinstance(value, str) or (spelled and value.upper() not in spelled):
            raise refuse(_expected(rule, "a string"))
        value = spelled.get(value.upper(), value)
    elif kind == "Path":
        if not isinstance(value, str | os.PathLike) or not str(value):
            raise refuse("a file or folder path (a string)")
        value = Path(value)
    elif kind == "tuple[str, ...]":
        if isinstance(value, str):
            value = value.split(",")
        if not isinstance(value, list | tuple) or not all(isinstance(item, str) for item in value):
            raise refuse("a list of strings (or one comma-separated string)")
        value = tuple(item.strip().rstrip("/") for item in value if item.strip())
        if rule.urls and not all(_base_url(item) for item in value):
            raise refuse("base URLs of the form http://host:port")
    else:  # a new field type: teach this function, or leave the field without SETTING metadata
        raise TypeError(f"NodeConfig.{name}: no file check for type {kind}")
    if isinstance(value, int | float) and not _in_range(value, rule):
        raise refuse(_expected(rule, "a whole number" if kind == "int" else "a number"))
    return value


def _base_url(url: str) -> bool:
    """http://host:port, nothing after it (the peers are called by path from there)."""
    split = urlsplit(url)
    return split.scheme == "http" and split.hostname is not None and split.path in ("", "/") and not split.query


def _in_range(value: float, rule: Setting) -> bool:
    if rule.low is not None and (value < rule.low or (rule.above and value == rule.low)):
        return False
    return rule.high is None or value <= rule.high


def _expected(rule: Setting, kind: str) -> str:
    """What a refusal says the setting takes: the field's own words, or its type and bounds."""
    if rule.expected:
        return rule.expected
    if rule.choices:
        return "one of " + ", ".join(rule.choices)
    if rule.low is not None and rule.high is not None:
        return f"{kind} from {rule.low:g} to {rule.high:g}"
    if rule.low is not None:
        return f"{kind} above {rule.low:g}" if rule.above else f"{kind} >= {rule.low:g}"
    return kind


def _shown(value: Any) -> str:
    """A value as the user wrote it, with its type when that is the problem (`"8001"`, a string)."""
    if isinstance(value, str):
        return f"{orjson.dumps(value).decode()} (a string)"
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, list | tuple | dict):
        return f"{orjson.dumps(value, default=str).decode()} (a {'table' if isinstance(value, dict) else 'list'})"
    return str(value)


def render_defaults() -> str:
    """A TOML config file holding every file setting at its default, to start from.

    Settings without a default (the three paths) get devnet.sh's layout for node 0;
    settings whose default depends on the machine or is "none" are shown commented out,
    so that the file, loaded back, gives exactly the defaults.
    """
    placeholders = {"genesis": "devnet/genesis.json", "key": "devnet/validator-0.keys.json",
                    "data": "devnet/data/node-0"}
    lines = ["# qMEMO node settings (`qmemo node --config FILE`); flags given to `qmemo node` win.",
             "# Every key with its default; docs/api.md says what each limit does.", ""]
    for name, field_ in file_settings().items():
        rule: Setting = field_.metadata[SETTING]
        lines.append(f"# {rule.help}")
        if name in placeholders:
            lines.append(f"{name} = {_toml(placeholders[name])}")
        elif field_.default is dataclasses.MISSING:
            lines.append(f"# {name} = {_toml(field_.default_factory())}   (on this machine)")
        elif field_.default is None:
            lines.append(f"# {name} = {_toml(rule.example)}   (for example; unset by default)")
        else:
            lines.append(f"{name} = {_toml(field_.default)}")
    return "\n".join(lines) + "\n"


def _toml(value: Any) -> str:
    """One TOML value: JSON's string and array syntax is TOML's too, for what we print."""
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, tuple):
        value = list(value)
    return orjson.dumps(value).decode() if isinstance(value, str | list) else repr(value)


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
