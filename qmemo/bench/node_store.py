"""The node store's CPU per transaction: `ChainStore.keep_branch` (a block's encoding, before
it is served) and `ChainStore.append` (when it becomes final), timed in thread CPU; then
each final block read back whole (`ChainStore.block`, decoded) and as its header and ids
(`ChainStore.block_ids`).

    .venv/bin/python -m qmemo.bench.node_store [--blocks 4] [--txs 8000] [--sync FULL]
        [--statements] [--pragma NAME=VALUE ...]

Blocks of `--txs` transactions of Falcon-512 sizes (897-byte key, 256-byte payload,
666-byte signature: ~1.9 KB each) go through both calls in turn, as a node's store
thread runs them (docs/methodology.md section 12). The figures are given over all the
blocks and over the last quarter of them: a cost that grows with the chain (the
transaction index of qmemo-store/2) shows as a last quarter above the mean; `--blocks 40`
stores 320,000 transactions, what a node holds after about a minute at 5,000 TPS. The
transactions are well formed but not signed: the store never verifies (`apply_block`
did, before), so signing would only cost the benchmark time. Prints one line (and with
`--statements` one per statement); a benchmark, never a test.

Two looks inside (qmemo.bench.sqlite_probe), for a store change's before and after
(docs/methodology.md section 12, "third session"):

- `--statements`: also a line per store call and SQL statement (its first three words) with
  its thread CPU over all blocks and over the last quarter, and how often it ran. `COMMIT`
  is where SQLite writes the dirty pages to the WAL and, now and then, checkpoints them;
- `--pragma NAME=VALUE` (repeatable): a SQLite setting of the store's connection
  (`cache_size=-262144`, `wal_autocheckpoint=8000`), printed with what it reads back.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from qmemo.bench.node_setup import make_devnet
from qmemo.bench.sqlite_probe import StatementTimes, connection_class, pragma
from qmemo.core.block import make_block
from qmemo.core.state import AppliedBlock
from qmemo.core.transaction import Transaction
from qmemo.crypto.verifier import load_genesis
from qmemo.devnet.files import GENESIS_FILE
from qmemo.errors import QmemoError
from qmemo.node.store import PAGE_BYTES, STORE_FORMAT, ChainStore

KEY_BYTES, PAYLOAD_BYTES, SIGNATURE_BYTES = 897, 256, 666      # Falcon-512's key, MEMO's body, a long signature


def last_quarter(blocks: int) -> int:
    """How many blocks the `..._last` figures cover: the end of the chain, where a cost that
    grows with it shows (at least one block, so a short run still has them)."""
    return max(1, blocks // 4)


def store_costs(blocks: int, txs: int, synchronous: str, pragmas: Sequence[str] = (),
                times: StatementTimes | None = None, took: dict[str, object] | None = None) -> dict[str, float]:
    """µs of thread CPU per transaction in `keep_branch` and in `append`, over `blocks` blocks
    and over their last quarter (`..._last`); with `pragmas` set on the store's connection
    (what each reads back into `took`) and each statement's CPU into `times`. With neither,
    the store has SQLite's own connection class, as the node does."""
    last = last_quarter(blocks)
    connection = connection_class(pragmas, times, {} if took is None else took) if pragmas or times \
        else sqlite3.Connection
    with tempfile.TemporaryDirectory(prefix="qmemo-store-bench-") as tmp:
        genesis = load_genesis(make_devnet(Path(tmp), "Falcon-512", 1).dir / GENESIS_FILE)
        cpu_keep: list[float] = []
        cpu_append: list[float] = []
        with ChainStore(Path(tmp) / "chain.sqlite", genesis, synchronous=synchronous,
                        connection=connection) as store:
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
                    times.phase, times.in_last = "keep_branch", height > blocks - last
                started = time.thread_time()
                store.keep_branch(height - 1, [(height, block.hash, encoded)])
                cpu_keep.append(time.thread_time() - started)
                if times is not None:
                    times.phase = "append"
                started = time.thread_time()
                store.append(AppliedBlock(block, {}, 0))
                cpu_append.append(time.thread_time() - started)
                if times is not None:
                    times.phase = None
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
    parser.add_argument("--statements", action="store_true", help="also each SQL statement's thread CPU")
    parser.add_argument("--pragma", type=pragma, action="append", default=[], metavar="NAME=VALUE",
                        help="a SQLite setting of the store's connection (repeatable)")
    args = parser.parse_args()
    if args.blocks < 1 or args.txs < 1:
        parser.error("--blocks and --txs must be at least 1")
    if len({item.partition("=")[0] for item in args.pragma}) < len(args.pragma):
        parser.error("--pragma: one value per setting")
    times = StatementTimes() if args.statements else None
    took: dict[str, object] = {}
    try:
        costs = store_costs(args.blocks, args.txs, args.sync, args.pragma, times, took)
    except (sqlite3.Error, QmemoError, OSError) as exc:
        parser.exit(2, f"node_store: {exc}\n")
    last = last_quarter(args.blocks)
    pragmas = "".join(f", {item} (reads {took.get(item.partition('=')[0])})" for item in args.pragma)
    print(f"{STORE_FORMAT}, {PAGE_BYTES // 1024} KB pages on new stores, synchronous={args.sync}{pragmas}, "
          f"{args.txs} transactions a block, load average {os.getloadavg()[0]:.1f}: keep_branch {costs['keep_branch_us_per_tx']:.2f} µs/tx, append "
          f"{costs['append_us_per_tx']:.2f} µs/tx, total "
          f"{costs['keep_branch_us_per_tx'] + costs['append_us_per_tx']:.2f} µs/tx over {args.blocks} blocks; "
          f"the last {last}: keep_branch {costs['keep_branch_us_per_tx_last']:.2f}, append "
          f"{costs['append_us_per_tx_last']:.2f} µs/tx; a final block read back: decoded "
          f"{costs['read_block_ms']:.1f} ms, header and ids {costs['read_ids_ms']:.2f} ms, header "
          f"{costs['read_summary_ms']:.3f} ms")
    for (call, statement), seconds in sorted((times.seconds if times else {}).items(), key=lambda item: -item[1]):
        assert times is not None
        print(f"  {call} {statement}: {seconds / args.blocks / args.txs * 1e6:.2f} µs/tx over all blocks, "
              f"{times.seconds_last[call, statement] / last / args.txs * 1e6:.2f} over the last {last} "
              f"({times.calls[call, statement]} calls)")


if __name__ == "__main__":
    main()
