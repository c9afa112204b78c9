"""The node test framework: real `qmemo node` processes on loopback, waited for by predicate.

Modelled on Bitcoin Core's functional test framework: a devnet is made in a tmp dir
(`qmemo genesis`), each node is a subprocess on an ephemeral port with its own log file,
every wait is a predicate polled until a deadline (never a fixed sleep), and a failed
wait names what it waited for and attaches the tail of every node's log.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from qmemo.cli import main as qmemo_main
from qmemo.core.block import Block, make_block
from qmemo.core.transaction import Transaction, derive_address
from qmemo.crypto.keys import NamedKey, load_keys, save_keys
from qmemo.crypto.schemes import get_scheme
from qmemo.net.wire import encode_tx_batch
from qmemo.node.config import load_config
from qmemo.node.service import Node
from tests.conftest import REPO_ROOT, VENV_BIN

LOG_TAIL_LINES = 40


def processes_using(path: Path) -> list[str]:
    """Command lines of live processes that mention `path` (our nodes, generator, floods)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(path) in cmdline:
            found.append(f"{entry.name}: {cmdline[:200]}")
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Devnet:
    """A genesis, its validator key files and funded account keys, in `path`."""

    path: Path
    validators: int
    chain_id: int
    accounts: list[NamedKey]
    scheme_id: int

    @property
    def genesis(self) -> Path:
        return self.path / "genesis.json"

    def validator_key(self, index: int) -> Path:
        return self.path / f"validator-{index}.keys.json"

    def address(self, account: int) -> bytes:
        return derive_address(self.scheme_id, self.accounts[account].public_key)

    def observer_key(self) -> Path:
        """A key file whose key is no validator's: a node that validates but never produces."""
        path = self.path / "observer.keys.json"
        if not path.exists():
            save_keys(path, [NamedKey.from_keypair("observer", get_scheme("Falcon-512").keypair())])
        return path

    def block(self, *, height: int, previous_hash: bytes, timestamp_ms: int, producer: int,
              transactions: Sequence[Transaction] = (), signed_by: int | None = None) -> Block:
        """A block made and signed like a producer would (by validator `signed_by`, default `producer`)."""
        key = load_keys(self.validator_key(producer if signed_by is None else signed_by))[0]
        scheme = get_scheme(key.scheme)
        return make_block(chain_id=self.chain_id, height=height, previous_hash=previous_hash,
                          timestamp_ms=timestamp_ms, producer_index=producer, transactions=transactions,
                          sign=lambda digest: scheme.sign(key.secret_key, digest))


def make_devnet(path: Path, *, validators: int = 3, accounts: int = 8, block_interval_ms: int = 500,
                producer_timeout_ms: int = 500, max_clock_drift_ms: int = 250,
                max_block_transactions: int = 4000, balance: int = 10**9) -> Devnet:
    """`qmemo genesis` in-process (key generation is the slow part: ~0.5 ms per key)."""
    with contextlib.redirect_stdout(io.StringIO()):
        status = qmemo_main(["genesis", "--out", str(path), "--validators", str(validators),
                             "--accounts", str(accounts), "--block-interval-ms", str(block_interval_ms),
                             "--producer-timeout-ms", str(producer_timeout_ms),
                             "--max-clock-drift-ms", str(max_clock_drift_ms),
                             "--max-block-transactions", str(max_block_transactions),
                             "--balance", str(balance)])
    assert status == 0, "qmemo genesis failed"
    document = orjson.loads((path / "genesis.json").read_bytes())
    keys = load_keys(path / "accounts.keys.json")
    return Devnet(path, validators, document["chain_id"], keys, get_scheme(keys[0].scheme).info.scheme_id)


class Wallet:
    """Signs transfers from the devnet's funded accounts, tracking each sender's next nonce."""

    def __init__(self, devnet: Devnet) -> None:
        self.devnet = devnet
        self.nonces: dict[int, int] = {}
        self.scheme = get_scheme(devnet.accounts[0].scheme)

    def transfer(self, sender: int, recipient: int | bytes, amount: int = 1, fee: int = 1, *,
                 nonce: int | None = None, payload: bytes = b"", signer: int | None = None,
                 chain_id: int | None = None) -> Transaction:
        key = self.devnet.accounts[sender]
        if nonce is None:
            nonce = self.nonces.get(sender, 0)
            self.nonces[sender] = nonce + 1
        to = recipient if isinstance(recipient, bytes) else self.devnet.address(recipient)
        tx = Transaction(self.devnet.chain_id if chain_id is None else chain_id, self.devnet.scheme_id,
                         key.public_key, nonce, to, amount, fee, payload)
        secret = self.devnet.accounts[signer if signer is not None else sender].secret_key
        return tx.signed(lambda digest: self.scheme.sign(secret, digest))

    def transfers(self, count: int, senders: Sequence[int] | None = None) -> list[Transaction]:
        """`count` transfers spread round-robin over `senders` (default: every account)."""
        senders = list(senders if senders is not None else range(len(self.devnet.accounts)))
        return [self.transfer(senders[i % len(senders)], senders[(i + 1) % len(senders)]) for i in range(count)]


@dataclass
class HttpAnswer:
    status: int
    body: bytes
    headers: dict[str, str]

    def json(self) -> Any:
        return orjson.loads(self.body)


def http(method: str, url: str, body: bytes | None = None, content_type: str = "application/json",
         timeout: float = 10.0) -> HttpAnswer:
    request = urllib.request.Request(url, data=body, method=method,
                                     headers={"Content-Type": content_type} if body is not None else {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return HttpAnswer(response.status, response.read(), dict(response.headers))
    except urllib.error.HTTPError as error:
        return HttpAnswer(error.code, error.read(), dict(error.headers))


@dataclass
class NodeProcess:
    """One `qmemo node` subprocess."""

    index: int
    devnet: Devnet
    data: Path
    port: int
    peers: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    key: Path | None = None               # default: validator <index>'s key
    process: subprocess.Popen | None = None
    log_path: Path | None = None
    starts: int = 0
    stopped_on_purpose: bool = False

    @property
    def name(self) -> str:
        return f"node-{self.index}"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.starts += 1
        self.stopped_on_purpose = False
        self.log_path = self.data.parent / f"{self.name}.{self.starts}.log"
        command = [str(VENV_BIN / "qmemo"), "node", "--genesis", str(self.devnet.genesis),
                   "--key", str(self.key or self.devnet.validator_key(self.index)), "--data", str(self.data),
                   "--port", str(self.port), "--peers", ",".join(self.peers), "--name", self.name,
                   "--verify-threads", "1", *self.extra]
        log = self.log_path.open("wb")
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT,
                                        env={**os.environ, "PYTHONUNBUFFERED": "1"})
        log.close()

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait: the node's exit status."""
        assert self.process is not None
        self.stopped_on_purpose = True
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=timeout)

    def kill(self) -> None:
        assert self.process is not None
        self.stopped_on_purpose = True
        self.process.kill()
        self.process.wait(timeout=10)

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    # --- HTTP ---------------------------------------------------------------------------------

    def get(self, path: str) -> Any:
        answer = http("GET", self.url + path)
        assert answer.status == 200, f"{self.name} GET {path}: {answer.status} {answer.body[:300]!r}"
        return answer.json()

    def try_get(self, path: str) -> Any | None:
        try:
            answer = http("GET", self.url + path, timeout=2.0)
        except OSError:
            return None
        return answer.json() if answer.status == 200 else None

    def post_txs(self, transactions: Sequence[Transaction]) -> HttpAnswer:
        return http("POST", self.url + "/txs", encode_tx_batch([tx.encoded for tx in transactions]),
                    "application/octet-stream")

    def height(self) -> int | None:
        status = self.try_get("/status")
        return status["height"] if status else None

    def stack_dump(self, wait_s: float = 1.0) -> str:
        """Every thread's stack, as the node writes it to its log on SIGUSR1 (faulthandler)."""
        if not self.running():
            return "(not running)"
        assert self.process is not None and self.log_path is not None
        size = self.log_path.stat().st_size
        self.process.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and self.log_path.stat().st_size == size:
            time.sleep(0.05)
        time.sleep(0.1)     # the dump is written in a few writes
        return self.log_path.read_bytes()[size:].decode(errors="replace")

    def assert_live(self, since_height: int, new_blocks: int = 2, timeout_s: float = 10.0) -> None:
        """The node answers /health and its chain grows `new_blocks` past `since_height`
        within `timeout_s`; else fail with its stacks and its log's tail."""
        deadline = time.monotonic() + timeout_s
        health = height = None
        while time.monotonic() < deadline:
            health = health or self.try_get("/health")
            height = self.height() if health else None
            if height is not None and height >= since_height + new_blocks:
                return
            time.sleep(0.1)
        what = "no answer to /health" if not health else f"height {height}, not {since_height + new_blocks}"
        raise AssertionError(f"{self.name} is not live ({what} within {timeout_s} s)\n"
                             f"--- stacks:\n{self.stack_dump()}\n--- log:\n{self.log_tail()}")


class Network:
    """N nodes of one devnet, each peering with all the others."""

    def __init__(self, devnet: Devnet, root: Path, count: int | None = None, extra: Sequence[str] = (),
                 key: Path | None = None) -> None:
        count = devnet.validators if count is None else count
        ports = [free_port() for _ in range(count)]
        self.nodes = [NodeProcess(i, devnet, root / f"node-{i}", ports[i],
                                  [f"http://127.0.0.1:{p}" for j, p in enumerate(ports) if j != i], list(extra), key)
                      for i in range(count)]

    def __enter__(self) -> Network:
        return self

    def __exit__(self, *exc: object) -> None:
        for node in self.nodes:
            if node.running():
                node.kill()

    def start(self, nodes: Sequence[NodeProcess] | None = None, timeout: float = 30.0) -> None:
        for node in nodes or self.nodes:
            node.start()
        for node in nodes or self.nodes:
            self.wait_until(lambda n=node: (n.try_get("/health") or {}).get("ready") is True,
                            f"{node.name} healthy", timeout, [node])

    def wait_until(self, predicate: Callable[[], Any], what: str, timeout: float = 30.0,
                   nodes: Sequence[NodeProcess] | None = None, poll_s: float = 0.1) -> Any:
        """Poll `predicate` until it returns something truthy, or fail naming `what` with the logs."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            for node in nodes or self.nodes:
                if node.process is not None and not node.running() and not node.stopped_on_purpose:
                    raise AssertionError(f"{node.name} exited with {node.process.returncode} while waiting for "
                                         f"{what}\n{self.logs([node])}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}\n{self.logs(nodes)}")
            time.sleep(poll_s)

    def logs(self, nodes: Sequence[NodeProcess] | None = None) -> str:
        return "\n".join(f"--- {node.name} log ({node.log_path}):\n{node.log_tail()}" for node in nodes or self.nodes)

    def tips(self, nodes: Sequence[NodeProcess] | None = None) -> list[tuple[int, str] | None]:
        out = []
        for node in nodes or self.nodes:
            status = node.try_get("/status")
            out.append((status["height"], status["tip_hash"]) if status else None)
        return out

    def committed_ids(self, node: NodeProcess) -> list[str]:
        """Every transaction id in `node`'s chain, in chain order."""
        ids: list[str] = []
        height = 1
        while True:
            blocks = node.get(f"/blocks?from={height}&limit=100&txs=ids")["blocks"]
            if not blocks:
                return ids
            for block in blocks:
                ids.extend(block["tx_ids"])
            height = blocks[-1]["height"] + 1


@contextlib.contextmanager
def lone_producer(root: Path, extra: Sequence[str] = ()) -> Iterator[NodeProcess]:
    """A devnet of one validator in `root` (a block every 500 ms, two funded accounts) and
    its node, started and healthy; killed at the end."""
    devnet = make_devnet(root / "devnet", validators=1, accounts=2)
    with Network(devnet, root, extra=extra) as network:
        network.start()
        yield network.nodes[0]


class ManualClock:
    """A node clock the test drives (`NodeConfig.clock`): ms since the epoch, moved by hand."""

    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, ms: int) -> None:
        self.now_ms += ms


@contextlib.asynccontextmanager
async def running_node(devnet: Devnet, data: Path, key: Path, *, clock: Callable[[], int] | None = None,
                       peers: Sequence[Any] = (), **settings: Any) -> AsyncIterator[Node]:
    """An in-process node (for tests about one node's API): started, then stopped.
    `clock`: the node's chain time (default: the wall clock); `peers`: `PeerLink`s (none
    by default: a test's stand-ins for the node's peers)."""
    from qmemo.net.server import build_node

    config = load_config(None, {"genesis": devnet.genesis, "key": key, "data": data, "port": 0,
                                "verify_threads": 1, **settings})
    if clock is not None:
        config = dataclasses.replace(config, clock=clock)
    node = build_node(config)
    node.attach_peers(peers)
    await node.start()
    try:
        yield node
    finally:
        await node.stop()
