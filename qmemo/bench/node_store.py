"""The node store's CPU per transaction: `ChainStore.keep_branch` (a block's encoding, before
it is served) and `ChainStore.append` (when it becomes final), timed in thread CPU; then
each final block read back whole (`ChainStore.block`, decoded) and as its header and ids
(`ChainStore.block_ids`).

    .venv/bin/python -m qmemo.bench.node_store [--blocks 4] [--txs 8000] [--sync FULL]

Blocks of `--txs` transactions of Falcon-512 sizes (897-byte key, 256-byte payload,
666-byte signature: ~1.9 KB each) go through both calls in turn, as a node's store
thread runs them (docs/methodology.md section 12). The figures are given over all the
blocks and over the last quarter of them: a cost that grows with the chain (the
transaction index of qmemo-store/2) shows as a last quarter above the mean; `--blocks 40`
stores 320,000 transactions, what a node holds after about a minute at 5,000 TPS. The
transactions are well formed but not signed: the store never verifies (`apply_block`
did, before), so signing would only cost the benchmark time. Prints one line; a benchmark, never a test.

Two ways to look inside, for a store change's before and after (docs/methodology.md section
12, "third session"):

- `--statements`: the thread CPU of each SQL statement the two calls run (by its first
  three words; `COMMIT` is where SQLite writes the dirty pages to the WAL and, now and then,
  checkpoints them), over all blocks and the last quarter;
- `--pragma NAME=VALUE` (repeatable): a SQLite pragma set on the store's connection when it
  opens (`cache_size=-262144`, `wal_autocheckpoint=8000`), to try a setting without
  changing the store.
"""

from __future__ import annotations

import argparse
import os
import re
import sqlite3
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

from qmemo.bench.node_setup import make_devnet
from qmemo.core.block import make_block
from qmemo.core.state import AppliedBlock
from qmemo.core.transaction import Transaction
from qmemo.devnet.files import GENESIS_FILE
from qmemo.node.store import PAGE_BYTES, STORE_FORMAT, ChainStore, load_genesis

KEY_BYTES, PAYLOAD_BYTES, SIGNATURE_BYTES = 897, 256, 666      # Falcon-512's key, MEMO's body, a long signature
STORE_PRAGMAS = ("page_size", "journal_mode", "synchronous")    # what ChainStore sets itself
_PRAGMA = re.compile(r"([a-z_]+)=(-?[0-9]+|[A-Za-z]+)")


def pragma(text: str) -> str:
    """`--pragma`'s type: NAME=VALUE (a lower-case name; an integer or a word), not one the
    store sets itself - it would be set again after it."""
    match = _PRAGMA.fullmatch(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE (a lower-case name, an integer or a word)")
    if match[1] in STORE_PRAGMAS:
        raise argparse.ArgumentTypeError(f"the store sets {match[1]} itself (--sync for synchronous)")
    return text


class StatementTimes:
    """Thread CPU (s) per SQL statement, by its first three words: over all blocks, and over
    the last quarter. Only while `on` (the blocks' writes, not the reads after them)."""

    def __init__(self) -> None:
        self.all: dict[str, float] = defaultdict(float)
        self.last: dict[str, float] = defaultdict(float)
        self.on = self.in_last = False

    def add(self, sql: str, seconds: float) -> None:
        name = " ".join(sql.split()[:3])
        self.all[name] += seconds
        if self.in_last:
            self.last[name] += seconds


def connection_class(pragmas: Sequence[str], times: StatementTimes | None) -> type[sqlite3.Connection]:
    """The store's connection class: `pragmas` set when it opens, each statement timed into
    `times` (None: not timed)."""

    class Connection(sqlite3.Connection):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)      # type: ignore[arg-type]
            for item in pragmas:
                super().execute(f"PRAGMA {item}")

        def execute(self, sql: str, parameters: object = (), /) -> sqlite3.Cursor:    # type: ignore[override]
            return self._timed(super().execute, sql, parameters)

        def executemany(self, sql: str, parameters: object, /) -> sqlite3.Cursor:   # type: ignore[override]
            return self._timed(super().executemany, sql, parameters)

        @staticmethod
        def _timed(run: Callable[..., sqlite3.Cursor], sql: str, parameters: object) -> sqlite3.Cursor:
            if times is None or not times.on:
                return run(sql, parameters)
            started = time.thread_time()
            try:
                return run(sql, parameters)
            finally:
                times.add(sql, time.thread_time() - started)

    return Connection


def store_costs(blocks: int, txs: int, synchronous: str, pragmas: Sequence[str] = (),
                times: StatementTimes | None = None) -> dict[str, float]:
    """µs of thread CPU per transaction in `keep_branch` and in `append`, over `blocks` blocks
    and over their last quarter (`..._last`); each statement's CPU into `times` if given."""
    last = max(1, blocks // 4)
    with tempfile.TemporaryDirectory(prefix="qmemo-store-bench-") as tmp:
        genesis = load_genesis(make_devnet(Path(tmp), "Falcon-512", 1).dir / GENESIS_FILE)
        cpu_keep: list[float] = []
        cpu_append: list[float] = []
        with ChainStore(Path(tmp) / "chain.sqlite", genesis, synchronous=synchronous,
                        connection=connection_class(pragmas, times)) as store:
            previous = genesis.hash
            for height in range(1, blocks + 1):
                transactions = [Transaction(genesis.chain_id, 1, os.urandom(KEY_BYTES), nonce, os.urandom(32), 1, 1,
                                            os.urandom(PAYLOAD_BYTES), os.urandom(SIGNATURE_BYTES))
                                for nonce in range(txs)]
                block = make_block(chain_id=genesis.chain_id, height=height, previous_hash=previous,
                                   timestamp_ms=genesis.genesis_time_ms + height, producer_index=0,
                                   transactions=transactions, sign=lambda digest: bytes(SIGNATURE_BYTES))
                previous = block.hash
                encoded = block.encode()
                if times is not None:
                    times.on, times.in_last = True, height > blocks - last
                started = time.thread_time()
                store.keep_branch(height - 1, [(height, block.hash, encoded)])
                cpu_keep.append(time.thread_time() - started)
                started = time.thread_time()
                store.append(AppliedBlock(block, {}, 0))
                cpu_append.append(time.thread_time() - started)
                if times is not None:
                    times.on = False
            reads = {name: _read_ms(store, blocks, read) for name, read in (
                ("read_block_ms", lambda height: store.block(height)),
                ("read_ids_ms", lambda height: store.block_ids(height)),
                ("read_summary_ms", lambda height: store.block_ids(height, with_ids=False)))}
    return {**reads, "keep_branch_us_per_tx": sum(cpu_keep) / blocks / txs * 1e6,
            "append_us_per_tx": sum(cpu_append) / blocks / txs * 1e6,
            "keep_branch_us_per_tx_last": sum(cpu_keep[-last:]) / last / txs * 1e6,
            "append_us_per_tx_last": sum(cpu_append[-last:]) / last / txs * 1e6}


def _read_ms(store: ChainStore, blocks: int, read: Callable[[int], object]) -> float:
    """ms of thread CPU per final block read back by `read(height)`: the whole block decoded
    (`GET /blocks` with full transactions) against its header and ids (`txs=ids`, `txs=none`)."""
    started = time.thread_time()
    for height in range(1, blocks + 1):
        read(height)
    return (time.thread_time() - started) / blocks * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=4)
    parser.add_argument("--txs", type=int, default=8000, help="transactions per block")
    parser.add_argument("--sync", choices=("NORMAL", "FULL"), default="FULL", help="the store's synchronous mode "
                        "(the node's: FULL)")
    parser.add_argument("--pragma", type=pragma, action="append", default=[], metavar="NAME=VALUE",
                        help="a SQLite pragma set on the store's connection when it opens (repeatable)")
    parser.add_argument("--statements", action="store_true", help="also the thread CPU of each SQL statement")
    args = parser.parse_args()
    if args.blocks < 1 or args.txs < 1:
        parser.error("--blocks and --txs must be at least 1")
    times = StatementTimes() if args.statements else None
    costs = store_costs(args.blocks, args.txs, args.sync, args.pragma, times)
    last = max(1, args.blocks // 4)
    pragmas = f", pragma {' '.join(args.pragma)}" if args.pragma else ""
    print(f"{STORE_FORMAT}, {PAGE_BYTES // 1024} KB pages on new stores, synchronous={args.sync}{pragmas}, load average "
          f"{os.getloadavg()[0]:.1f}: keep_branch {costs['keep_branch_us_per_tx']:.2f} µs/tx, append "
          f"{costs['append_us_per_tx']:.2f} µs/tx, total "
          f"{costs['keep_branch_us_per_tx'] + costs['append_us_per_tx']:.2f} µs/tx over {args.blocks} blocks; "
          f"the last {last}: keep_branch {costs['keep_branch_us_per_tx_last']:.2f}, append "
          f"{costs['append_us_per_tx_last']:.2f} µs/tx; a final block read back: decoded "
          f"{costs['read_block_ms']:.1f} ms, header and ids {costs['read_ids_ms']:.2f} ms, header "
          f"{costs['read_summary_ms']:.3f} ms")
    if times is not None:
        for name, seconds in sorted(times.all.items(), key=lambda item: -item[1]):
            print(f"  {name}: {seconds / args.blocks / args.txs * 1e6:.2f} µs/tx over all blocks, "
                  f"{times.last.get(name, 0.0) / last / args.txs * 1e6:.2f} over the last {last}")


if __name__ == "__main__":
    main()
