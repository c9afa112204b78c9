"""The node store's CPU per transaction as a chain grows, with the journal, against the raw
cost of writing the same bytes in the same run.

    .venv/bin/python -m qmemo.bench.node_store [--blocks 150] [--txs 40000] [--sync FULL]
        [--request-txs 500] [--window-blocks 30] [--out FILE] [--statements] [--pragma NAME=VALUE ...]

Each block of `--txs` transactions of Falcon-512 sizes (897-byte key, 256-byte payload,
666-byte signature: ~1.8 KB each) goes through what a node's store does with it
(docs/methodology.md, "The store at append speed"), each step timed in thread CPU:

- `journal`: its transactions journaled as they were accepted, `--request-txs` to a write
  (a client's request; the node's `Journal` writer: checksum, write, fsync), the journal
  compacted when it has doubled, as the node's flusher does;
- `keep_branch`: its encoding stored before it is served;
- `append`: stored as final (`ChainStore.append_final`: header, ids, spans, index rows,
  the `--accounts` accounts it changed).

The reference, measured in the same loop on the same bytes: the block's encoding written
to a plain file (1 MiB writes, one fsync) and the journal's requests written and fsync'd
bare (no checksum). It is what any store on this disk pays at least; `store_over_reference`
says how far above it the store is.

The figures are given over the first and the last `--window-blocks` blocks (30: a minute
of 2-second blocks), and over all: a cost that grows with the chain shows as a last window
above the first. The defaults store 6 million transactions, five minutes at 20,000 TPS.
Then the look-up: `ChainStore.place` of a transaction of the newest block, of the oldest,
and of an id in none (one probe per block, qmemo.node.store_index), and a block read back
as bytes and as its ids. The transactions are well formed but not signed (the store never
verifies: `apply_block` did, before), their encodings cycle through a pool and their ids
are random (the store never hashes either), so making the chain costs the benchmark little.

Saves a JSON document (`qmemo-store-bench/1`: parameters, machine and versions, load
average before and after, every block's figures) under results/, prints a summary, and
says when the load average suggests other work disturbed it. A benchmark, never a test.

`--statements` and `--pragma` look inside SQLite (qmemo.bench.sqlite_probe): each store
call's statements in thread CPU, or a setting of the store's connection.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from qmemo.bench.node_setup import make_devnet
from qmemo.bench.sqlite_probe import StatementTimes, connection_class, pragma
from qmemo.bench.store_chain import BlockParts, ChainMaker
from qmemo.crypto.verifier import load_genesis
from qmemo.devnet.files import GENESIS_FILE
from qmemo.errors import QmemoError
from qmemo.node.journal import Journal
from qmemo.node.store import PAGE_BYTES, STORE_FORMAT, ChainStore
from qmemo.paths import RESULTS_DIR
from qmemo.sysinfo import machine_info

SCHEMA = "qmemo-store-bench/1"
STEPS = ("journal", "keep_branch", "append")            # the store's, per block
REFERENCES = ("raw_block", "raw_journal")              # the same bytes, written bare
RAW_CHUNK_BYTES = 1 << 20
DISTURBED_LOAD = 1.5    # load average per core past which another process likely took a share of a core


@dataclass(slots=True)
class BlockTimes:
    """Thread CPU (s) of each step and reference, block by block."""

    seconds: dict[str, list[float]] = field(default_factory=lambda: {name: [] for name in (*STEPS, *REFERENCES)})


def window_blocks(blocks: int, minute_blocks: int) -> int:
    """Blocks in the first and last windows: a minute's, or a quarter of a shorter run (at least 1)."""
    return max(1, min(minute_blocks, blocks // 4))


def run(blocks: int, txs: int, synchronous: str, *, request_txs: int = 500, accounts: int = 2000,
        window: int = 30, pragmas: tuple[str, ...] = (), times: StatementTimes | None = None,
        took: dict[str, object] | None = None, workdir: Path | None = None) -> tuple[BlockTimes, dict[str, float]]:
    """Store `blocks` blocks of `txs` transactions; each block's step times, and the look-ups'
    and reads' µs. With `pragmas` set on the store's connection (what each reads back into
    `took`) and each statement's CPU into `times` (the last `window` blocks also apart); with neither, the store has SQLite's own
    connection class, as the node does."""
    connection = connection_class(pragmas, times, {} if took is None else took) if pragmas or times \
        else sqlite3.Connection
    measured = BlockTimes()
    with tempfile.TemporaryDirectory(prefix="qmemo-store-bench-", dir=workdir) as tmp:
        folder = Path(tmp)
        genesis = load_genesis(make_devnet(folder, "Falcon-512", 1).dir / GENESIS_FILE)
        maker = ChainMaker(genesis, txs, accounts)
        journal = Journal(folder, "bench")
        journal.read_back()
        try:
            with ChainStore(folder / "chain.sqlite", genesis, synchronous=synchronous,
                            connection=connection) as store:
                for height in range(1, blocks + 1):
                    parts = maker.next_block()
                    if times is not None:
                        times.in_last = height > blocks - window
                    _store_block(store, journal, parts, request_txs, measured.seconds, times)
                    _reference(folder, parts, request_txs, measured.seconds)
                looks = _look_ups(store, maker)
        finally:
            journal.close()
    return measured, looks


def _already_kept() -> bytes:
    raise AssertionError("keep_branch stored the block's encoding: append_final must not ask for it")


def _store_block(store: ChainStore, journal: Journal, parts: BlockParts, request_txs: int,
                 seconds: dict[str, list[float]], times: StatementTimes | None) -> None:
    """One block through the journal and the store, as a node does, each step timed."""
    requests = list(parts.requests(request_txs))       # as admission hands them over: made before
    started = time.thread_time()
    for frames, count in requests:
        journal._write([frames], count)
    if journal.wants_compaction():
        journal._rewrite(b"", 0)        # every journaled transaction is in a block now
    seconds["journal"].append(time.thread_time() - started)
    for name, call in (("keep_branch", lambda: store.keep_branch(parts.height - 1, [
                            (parts.height, parts.block_hash, parts.encoding)])),
                       ("append", lambda: store.append_final(parts.height, parts.block_hash, parts.header, parts.ids,
                                                             parts.spans, _already_kept, parts.accounts))):
        if times is not None:
            times.phase = name
        started = time.thread_time()
        call()
        seconds[name].append(time.thread_time() - started)
        if times is not None:
            times.phase = None


def _reference(folder: Path, parts: BlockParts, request_txs: int, seconds: dict[str, list[float]]) -> None:
    """The same bytes written bare: the encoding to a file of its own, the requests to another
    (both removed after, untimed)."""
    path = folder / "raw-block"
    view = memoryview(parts.encoding)
    started = time.thread_time()
    with path.open("wb", buffering=0) as raw:
        for start in range(0, len(view), RAW_CHUNK_BYTES):
            raw.write(view[start:start + RAW_CHUNK_BYTES])
        os.fsync(raw.fileno())
    seconds["raw_block"].append(time.thread_time() - started)
    path.unlink()       # a fresh file per block, as the store's pages are new ones
    requests = list(parts.requests(request_txs))
    path = folder / "raw-journal"
    started = time.thread_time()
    with path.open("ab", buffering=0) as raw:
        for frames, _ in requests:
            raw.write(frames)
            os.fsync(raw.fileno())
    seconds["raw_journal"].append(time.thread_time() - started)
    path.unlink()       # as the journal is compacted once it has doubled: the disk holds one copy


def _look_ups(store: ChainStore, maker: ChainMaker, repeat: int = 20) -> dict[str, float]:
    """µs of thread CPU per look-up (newest block, oldest, an id in none) and per block read."""
    cases = {"place_newest_us": maker.id_in(store.height), "place_oldest_us": maker.id_in(1),
             "place_unknown_us": bytes(64)}
    out: dict[str, float] = {}
    for name, tx_id in cases.items():
        started = time.thread_time()
        for _ in range(repeat):
            store.place(tx_id)
        out[name] = (time.thread_time() - started) / repeat * 1e6
    for name, read in (("read_bytes_ms", store.block_bytes), ("read_ids_ms", store.block_ids)):
        started = time.thread_time()
        for height in range(1, store.height + 1):
            read(height)
        out[name] = (time.thread_time() - started) / store.height * 1e3
    return out


def summarize(measured: BlockTimes, txs: int, window: int) -> dict[str, Any]:
    """µs per transaction of each step, the store's total and the references, over the first
    window, the last and all blocks; the last over the first, and the store over the reference."""
    seconds = measured.seconds
    seconds["store_total"] = [sum(parts) for parts in zip(*(seconds[name] for name in STEPS))]
    seconds["raw_total"] = [sum(parts) for parts in zip(*(seconds[name] for name in REFERENCES))]
    out: dict[str, Any] = {}
    for name, values in seconds.items():
        first, last = values[:window], values[-window:]
        out[name] = {"first_us_per_tx": sum(first) / len(first) / txs * 1e6,
                     "last_us_per_tx": sum(last) / len(last) / txs * 1e6,
                     "all_us_per_tx": sum(values) / len(values) / txs * 1e6}
    total = out["store_total"]
    out["last_over_first"] = total["last_us_per_tx"] / total["first_us_per_tx"]
    out["store_over_reference"] = total["all_us_per_tx"] / out["raw_total"]["all_us_per_tx"]
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=150)
    parser.add_argument("--txs", type=int, default=40_000, help="transactions per block")
    parser.add_argument("--sync", choices=("NORMAL", "FULL"), default="FULL", help="the store's synchronous mode "
                        "(the node's: FULL)")
    parser.add_argument("--request-txs", type=int, default=500, help="transactions per journal write (a request)")
    parser.add_argument("--accounts", type=int, default=2000, help="accounts each block changes")
    parser.add_argument("--window-blocks", type=int, default=30, help="blocks in the first and last windows")
    parser.add_argument("--out", type=Path, help="JSON file (default: results/store-bench-<UTC time>.json)")
    parser.add_argument("--statements", action="store_true", help="also each SQL statement's thread CPU")
    parser.add_argument("--pragma", type=pragma, action="append", default=[], metavar="NAME=VALUE",
                        help="a SQLite setting of the store's connection (repeatable)")
    args = parser.parse_args(argv)
    if min(args.blocks, args.txs, args.request_txs, args.window_blocks) < 1 or args.accounts < 0:
        parser.error("--blocks, --txs, --request-txs and --window-blocks must be at least 1, --accounts at least 0")
    if len({item.partition("=")[0] for item in args.pragma}) < len(args.pragma):
        parser.error("--pragma: one value per setting")
    times = StatementTimes() if args.statements else None
    took: dict[str, object] = {}
    load_before = os.getloadavg()[0]
    window = window_blocks(args.blocks, args.window_blocks)
    try:
        measured, looks = run(args.blocks, args.txs, args.sync, request_txs=args.request_txs, accounts=args.accounts,
                              window=window, pragmas=tuple(args.pragma), times=times, took=took)
    except (sqlite3.Error, QmemoError, OSError) as exc:
        parser.exit(2, f"node_store: {exc}\n")
    summary = summarize(measured, args.txs, window)
    document = {"schema": SCHEMA, "parameters": {**{key: value for key, value in vars(args).items() if key != "out"},
                                                 "out": None, "store_format": STORE_FORMAT, "page_bytes": PAGE_BYTES,
                                                 "window": window, "pragmas_read_back": took},
                "machine": machine_info(), "load_average_1m": {"before": load_before, "after": os.getloadavg()[0]},
                "summary": summary, "look_ups": looks, "per_block_s": measured.seconds}
    out = args.out or RESULTS_DIR / f"store-bench-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")
    print_summary(document, times, out)


def print_summary(document: dict[str, Any], times: StatementTimes | None, out: Path) -> None:
    parameters, summary, looks = document["parameters"], document["summary"], document["look_ups"]
    load = document["load_average_1m"]
    window = parameters["window"]
    print(f"{parameters['store_format']}, synchronous={parameters['sync']}, {parameters['blocks']} blocks of "
          f"{parameters['txs']:,} transactions, journal writes of {parameters['request_txs']}"
          + "".join(f", {item} (reads {parameters['pragmas_read_back'].get(item.partition('=')[0])})"
                    for item in parameters["pragma"]) + "; µs of thread CPU per transaction:")
    print(f"  {'':14} first {window:>3}  last {window:>3}   all")
    for name in (*STEPS, "store_total", *REFERENCES, "raw_total"):
        row = summary[name]
        print(f"  {name:14} {row['first_us_per_tx']:9.2f} {row['last_us_per_tx']:9.2f} {row['all_us_per_tx']:7.2f}")
    print(f"  last window over first: {summary['last_over_first']:.3f}; store over the raw writes: "
          f"{summary['store_over_reference']:.2f}x")
    print(f"  look-up (place): newest block {looks['place_newest_us']:.0f} µs, oldest {looks['place_oldest_us']:.0f} µs, "
          f"in no block {looks['place_unknown_us']:.0f} µs; a block read back: bytes {looks['read_bytes_ms']:.1f} ms, "
          f"ids {looks['read_ids_ms']:.2f} ms")
    per_core = max(load["before"], load["after"]) / (os.cpu_count() or 1)
    print(f"  load average {load['before']:.1f} before, {load['after']:.1f} after"
          + (" - other work shared the cores: compare runs side by side only" if per_core > DISTURBED_LOAD else ""))
    blocks, txs = parameters["blocks"], parameters["txs"]
    for (call, statement), seconds in sorted((times.seconds if times else {}).items(), key=lambda item: -item[1]):
        assert times is not None
        print(f"  {call} {statement}: {seconds / blocks / txs * 1e6:.2f} µs/tx over all blocks, "
              f"{times.seconds_last[call, statement] / window / txs * 1e6:.2f} over the last {window} "
              f"({times.calls[call, statement]} calls)")
    print(f"saved {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
