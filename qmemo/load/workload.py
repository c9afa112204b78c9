"""Workload preparation: every transaction of a run, signed and framed before the run starts.

Signing is never on the sending path: the generator signs the whole plan first, in
parallel across cores, and frames each batch's request body. A small plan is signed on
threads (liboqs releases the GIL while it signs, but building, hashing and encoding each
transaction holds it: on our 2 cores threads used 1.2 of them, 3,350 tx/s); a plan of
`PROCESS_SIGNING_MIN` or more - a soak's 2 million - on one process per core, each given
the accounts once, so that signing a 10-minute soak's workload takes less than the soak. The result is cached on disk, keyed by everything
that determines its bytes (genesis, accounts, their starting nonces, the plan's shape),
so running the same plan again on a fresh chain starts at once.

Account affinity: funded accounts are split into one pool per target node, and a batch
sent to node k draws its senders from pool k. A sender's transactions therefore always
reach the same node, in nonce order, and never race each other across nodes.

Transactions move 1 unit between funded accounts, pay the genesis's minimum fee (`fee`;
a fee below it is refused as `fee_too_low`), and carry a payload
that makes the transaction body (its encoding without public key and signature) 256
bytes, MEMO's transaction size.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import random
import struct
import threading
import time
from array import array
from collections import deque
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

from qmemo.core.hashing import Domain, blake3_512
from qmemo.core.transaction import FIXED_BYTES, Transaction, derive_address
from qmemo.crypto.schemes import get_scheme
from qmemo.errors import BenchmarkError, ConfigError
from qmemo.load.sender import Batch
from qmemo.net.wire import encode_tx_batch

TX_BODY_BYTES = 256                                  # MEMO's transaction size (reference reports)
PAYLOAD_BYTES = TX_BODY_BYTES - FIXED_BYTES - 2      # 2: the signature-length field
TARGETING = ("round-robin", "random", "single")
_CACHE_MAGIC = b"qmemo-workload/1\n"
_RECORD = struct.Struct("<64sI")                     # tx id, encoding length
_MAX_CACHED_BYTES = 1 << 20                          # a transaction is a few KB
Chunk = tuple[list[bytes], list[bytes]]              # (ids, encodings) of consecutive planned transactions
# Plans this large are signed on processes: below it, starting them (a second or two of
# imports each) costs more than the GIL does.
PROCESS_SIGNING_MIN = 50_000
SIGN_CHUNK = 500
PARENT_CHECK_S = 1.0        # how often a signing worker checks that its generator still runs


@dataclass(frozen=True, slots=True)
class Account:
    public_key: bytes
    secret_key: bytes
    address: bytes
    next_nonce: int


@dataclass(frozen=True, slots=True)
class PlanShape:
    """Everything besides keys and nonces that fixes a workload's bytes."""

    count: int
    batch_size: int
    targets: tuple[str, ...]
    targeting: str
    seed: int


@dataclass(frozen=True, slots=True)
class Workload:
    ids: list[bytes]           # transaction ids, in plan order
    batches: list[Batch]       # in send order
    from_cache: bool
    # For each planned transaction, the plan index of its sender's previous nonce (-1: the
    # sender's first in the plan): the sender tells a nonce gap that may still fill from
    # one that never will (qmemo.load.sender).
    previous: array


def previous_nonces(senders: list[tuple[int, int]]) -> array:
    """`Workload.previous` from the plan's (account index, nonce) list, which has each
    sender's nonces in plan order."""
    last: dict[int, int] = {}
    previous = array("q", [-1]) * len(senders)
    for i, (account, _) in enumerate(senders):
        previous[i] = last.get(account, -1)
        last[account] = i
    return previous


def assign(shape: PlanShape, accounts: list[Account]) -> tuple[list[tuple[int, int]], list[str]]:
    """For each planned transaction (account index, nonce); for each batch its target.

    Pure: the same shape and accounts always give the same plan.
    """
    if shape.targeting not in TARGETING:
        raise ConfigError(f"targeting must be one of {', '.join(TARGETING)}")
    if shape.batch_size < 1 or not shape.targets:
        raise ConfigError("a workload needs a batch size of at least 1 and at least one target")
    pools_count = 1 if shape.targeting == "single" else len(shape.targets)
    if len(accounts) < pools_count:
        raise ConfigError(f"{len(accounts)} funded accounts cannot be split over {pools_count} nodes")
    pools = [list(range(p, len(accounts), pools_count)) for p in range(pools_count)]
    used = [0] * pools_count
    rng = random.Random(shape.seed)
    senders: list[tuple[int, int]] = []
    batch_targets: list[str] = []
    for batch_index, first in enumerate(range(0, shape.count, shape.batch_size)):
        if shape.targeting == "round-robin":
            pool = batch_index % pools_count
        elif shape.targeting == "random":
            pool = rng.randrange(pools_count)
        else:
            pool = 0
        batch_targets.append(shape.targets[pool])
        members = pools[pool]
        for _ in range(first, min(first + shape.batch_size, shape.count)):
            account = members[used[pool] % len(members)]
            senders.append((account, accounts[account].next_nonce + used[pool] // len(members)))
            used[pool] += 1
    return senders, batch_targets


def cache_key(genesis_hash: bytes, scheme: str, chain_id: int, shape: PlanShape, accounts: list[Account]) -> str:
    # The nodes' URLs do not change a byte of the workload (only how many there are does:
    # one account pool per target); keyed on them, a devnet on free ports (`qmemo soak`)
    # never found its cache and signed millions of transactions again.
    bytes_shape = (shape.count, shape.batch_size, len(shape.targets), shape.targeting, shape.seed)
    parts = [genesis_hash, scheme.encode(), chain_id.to_bytes(4, "little"), repr(bytes_shape).encode()]
    for account in accounts:
        parts += [account.address, account.next_nonce.to_bytes(8, "little")]
    return blake3_512(Domain.SELF_TEST, b"workload", *parts).hex()[:32]


def build(shape: PlanShape, accounts: list[Account], *, scheme: str, chain_id: int, genesis_hash: bytes,
          fee: int, cache_dir: Path | None, progress: Callable[[int], None] | None = None) -> Workload:
    """Sign (or load from cache) every transaction of the plan and frame its batches."""
    senders, batch_targets = assign(shape, accounts)
    key = cache_key(genesis_hash, scheme, chain_id, shape, accounts)   # the genesis hash commits to the fee
    ids, batches, from_cache = signed_batches(
        cache_dir / f"{key}.bin" if cache_dir else None, shape, batch_targets,
        sign_chunks(senders, accounts, scheme=scheme, chain_id=chain_id, fee=fee), progress)
    return Workload(ids, batches, from_cache, previous_nonces(senders))


def signed_batches(cache_file: Path | None, shape: PlanShape, targets: list[str],
                   signed: Generator[Chunk, None, None], progress: Callable[[int], None] | None
                   ) -> tuple[list[bytes], list[Batch], bool]:
    """The plan's transaction ids and framed batches, and whether they came from the cache:
    read from `cache_file` when it holds the plan, else signed (`signed`: `sign_chunks`,
    which signs nothing until it is read, chunk by chunk in plan order) and cached. A transaction's bytes are framed into their batch as soon as the
    batch is complete and then dropped, so the plan is held once (the framed batches), not
    twice or three times over: a 5-minute plan at 9,000 TPS is 4.9 GB of Falcon-512
    transactions, and holding each twice put the generator past this machine's 24 GB."""
    if cache_file is not None and cache_file.is_file():
        try:
            ids, batches = _frame(_cache_chunks(cache_file, shape.count), shape, targets, None, None)
        except _StaleCache:
            pass        # cut short or another format: sign again
        else:
            if progress:
                progress(shape.count)
            return ids, batches, True
    # Closed on the way out, whatever happens: its pool of signers stops at once.
    with _cache_writer(cache_file) as write, contextlib.closing(signed):
        ids, batches = _frame(signed, shape, targets, write, progress)
    return ids, batches, False


def _frame(chunks: Iterator[Chunk], shape: PlanShape, targets: list[str], write: Callable[[Chunk], None] | None,
           progress: Callable[[int], None] | None) -> tuple[list[bytes], list[Batch]]:
    """Ids and batches from the plan's chunks; `write` (the cache) sees each chunk first."""
    ids: list[bytes] = []
    batches: list[Batch] = []
    waiting: list[bytes] = []             # encodings not framed yet
    for chunk in chunks:
        if write is not None:
            write(chunk)
        ids.extend(chunk[0])
        waiting.extend(chunk[1])
        if len(ids) > shape.count:
            raise _StaleCache
        while waiting:
            first = len(batches) * shape.batch_size
            size = min(shape.batch_size, shape.count - first)
            if len(waiting) < size:
                break
            batches.append(Batch(first, first + size, targets[len(batches)], encode_tx_batch(waiting[:size])))
            del waiting[:size]
        if progress:
            progress(len(chunk[0]))
    if len(ids) != shape.count or waiting:
        raise _StaleCache
    return ids, batches


def sign_chunks(senders: list[tuple[int, int]] | list[tuple[int, int, bytes]], accounts: list[Account], *,
                scheme: str, chain_id: int, fee: int) -> Generator[Chunk, None, None]:
    """Every planned transaction signed, as (ids, encodings) chunks in plan order."""
    workers = os.cpu_count() or 1
    context: dict[str, object] | None = None        # None: each worker process has its own
    if len(senders) >= PROCESS_SIGNING_MIN and workers > 1:
        pool: Executor = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_signing_setup,
                                             initargs=(accounts, scheme, chain_id, fee, os.getpid()))
        chunk = SIGN_CHUNK * 10      # fewer, larger answers through the pipes
    else:
        context = _signing_context(accounts, scheme, chain_id, fee)
        pool, chunk = ThreadPoolExecutor(max_workers=workers), SIGN_CHUNK
    try:
        futures = deque(pool.submit(_sign_range, senders[s:s + chunk], context)
                        for s in range(0, len(senders), chunk))
        while futures:
            # Off the queue once read: a future kept would hold its chunk's transactions
            # until the whole plan is signed.
            yield futures.popleft().result()
    except BrokenProcessPool as exc:
        # A worker killed (the OOM killer, a signal to the process group): one line, not
        # a traceback from inside concurrent.futures.
        raise BenchmarkError(f"a signing worker process died before the plan was signed ({exc}); with "
                             f"{len(senders):,} transactions planned, check free memory (dmesg) or plan "
                             f"fewer", code="signing_failed") from None
    finally:
        # On Ctrl-C, drop the chunks not started rather than signing the whole plan first.
        pool.shutdown(wait=True, cancel_futures=True)


_worker_context: dict[str, object] = {}     # a signing worker process's `_signing_context`, set once


def _signing_context(accounts: list[Account], scheme: str, chain_id: int, fee: int) -> dict[str, object]:
    return {"accounts": accounts, "signer": get_scheme(scheme), "chain_id": chain_id, "fee": fee}


def _signing_setup(accounts: list[Account], scheme: str, chain_id: int, fee: int, parent_pid: int) -> None:
    """A worker process's initializer: the accounts and scheme arrive once, not per chunk."""
    _worker_context.update(_signing_context(accounts, scheme, chain_id, fee))
    threading.Thread(target=_exit_with_parent, args=(parent_pid,), daemon=True, name="parent-watch").start()


def _exit_with_parent(parent_pid: int) -> None:
    """End this worker once the generator that started it (`parent_pid`, handed in: it
    may be gone before this runs) is gone. A generator killed while it signs (SIGTERM
    from `qmemo soak`'s cleanup, SIGKILL) would leave its workers blocked on the pool's
    queue lock for good, each holding its share of the workload's memory."""
    while os.getppid() == parent_pid:
        time.sleep(PARENT_CHECK_S)
    os._exit(1)


def _sign_range(senders: list[tuple[int, int]] | list[tuple[int, int, bytes]],
                context: dict[str, object] | None) -> tuple[list[bytes], list[bytes]]:
    """(ids, encodings) of these (account index, nonce) transfers (`context`: accounts, signer,
    chain id, fee; None in a worker process: its own). An item may name its recipient third
    (a sharded plan's: qmemo.load.shard_workload); else it is the next account."""
    context = _worker_context if context is None else context
    accounts: list[Account] = context["accounts"]      # type: ignore[assignment]
    signer = context["signer"]
    chain_id, fee = context["chain_id"], context["fee"]
    scheme_id = signer.info.scheme_id                   # type: ignore[attr-defined]
    payload = bytes(PAYLOAD_BYTES)
    ids, encodings = [], []
    for item in senders:
        account_index, nonce = item[0], item[1]
        account = accounts[account_index]
        recipient = item[2] if len(item) > 2 else accounts[(account_index + 1) % len(accounts)].address
        tx = Transaction(chain_id, scheme_id, account.public_key, nonce, recipient, 1, fee, payload)  # type: ignore[arg-type]
        tx = tx.signed(lambda digest, sk=account.secret_key: signer.sign(sk, digest))  # type: ignore[attr-defined]
        ids.append(tx.id)
        encodings.append(tx.encoded)
    return ids, encodings


class _StaleCache(Exception):
    """A cache file that does not hold the plan (cut short, another format)."""


@contextlib.contextmanager
def _cache_writer(path: Path | None) -> Iterator[Callable[[Chunk], None] | None]:
    """A writer of the plan's chunks into `path`, in place once the block ends (None: no cache).
    A plan not finished - an error, Ctrl-C - leaves no cache file behind."""
    if path is None:
        yield None
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")    # two generators signing the same plan write apart
    try:
        with tmp.open("wb") as out:
            out.write(_CACHE_MAGIC)

            def write(chunk: Chunk) -> None:
                for tx_id, encoding in zip(*chunk):
                    out.write(_RECORD.pack(tx_id, len(encoding)))
                    out.write(encoding)
            yield write
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)


def _cache_chunks(path: Path, count: int, per_chunk: int = SIGN_CHUNK * 10) -> Iterator[Chunk]:
    """The cached plan's (ids, encodings) in chunks; _StaleCache unless it holds exactly `count`."""
    with path.open("rb") as cached:
        if cached.read(len(_CACHE_MAGIC)) != _CACHE_MAGIC:
            raise _StaleCache
        left = count
        while left:
            ids, encodings = [], []
            for _ in range(min(per_chunk, left)):
                head = cached.read(_RECORD.size)
                if len(head) != _RECORD.size:
                    raise _StaleCache
                tx_id, length = _RECORD.unpack(head)
                if length > _MAX_CACHED_BYTES:        # a damaged length: never a buffer of gigabytes
                    raise _StaleCache
                encoding = cached.read(length)
                if len(encoding) != length:
                    raise _StaleCache
                ids.append(tx_id)
                encodings.append(encoding)
            left -= len(ids)
            yield ids, encodings
        if cached.read(1):
            raise _StaleCache


def funded_accounts(keys, scheme_id: int, nonces: dict[bytes, int]) -> list[Account]:
    """Accounts from a key file's entries, with their next nonces as the chain reports them."""
    accounts = []
    for key in keys:
        address = derive_address(scheme_id, key.public_key)
        accounts.append(Account(key.public_key, key.secret_key, address, nonces.get(address, 0)))
    return accounts
