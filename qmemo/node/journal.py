"""The accepted-transaction journal: what makes "accepted" survive a SIGKILL.

An append-only file beside `chain.sqlite` (`accepted.journal`). Every transaction a
client's `POST /txs` got "accepted" for is appended, and the answer waits until the
append is fsync'd (docs/api.md, "Durability"). Group commit: appends that arrive while
one write+fsync is under way are written together by the next one, so a busy node pays
one fsync per few milliseconds, not one per request.

Relayed transactions (`POST /peer/txs`) are appended too, in the same group commits, but
the relay's answer does not wait for the fsync (`append_soon`): the sending node already
has them in its own journal, so waiting would only slow the relay pipeline down; what a
receiver gains is that a relayed transaction survives its SIGKILL a few milliseconds
after it arrived, not only its clean stop.

At start the journal is read back and its transactions admitted again through normal
admission (signature, nonce and balance checks): the ones committed meanwhile answer as
stale or duplicate and are dropped. The file is compacted - rewritten with only the
transactions still unsettled, then renamed over - once it has grown to twice its size
after the last compaction, so it stays about the size of the mempool.

Record: u32 length, u32 CRC-32 of the encoding, the transaction encoding (all
little-endian). A torn last record (a crash mid-write) fails its length or CRC check
and ends the read: it was never answered "accepted".

Runs its writes on its own thread (never the store's: a block write must not delay a
client's answer). Never imports aiohttp or knows about HTTP.
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO

from qmemo.errors import StoreError

JOURNAL_FILE = "accepted.journal"
_HEADER = struct.Struct("<II")
# Compaction rewrites the unsettled transactions: only worth it once the file holds at
# least this much (a few hundred transactions) and twice what the last compaction left.
MIN_COMPACT_BYTES = 1 << 20
MAX_RECORD_BYTES = 1 << 20     # a transaction is at most a few KB; a longer length is damage


class Journal:
    """One node's journal. `read_back` once at start, then `append` / `compact`; `close`."""

    def __init__(self, data: Path, name: str, log: logging.LoggerAdapter | None = None) -> None:
        self.path = Path(data) / JOURNAL_FILE
        self._log = log
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{name}-journal")
        self._file: BinaryIO | None = None
        self._batch: list[bytes] = []
        self._batch_done: asyncio.Future | None = None
        self._writer: asyncio.Task | None = None
        self.size_bytes = 0
        self.compacted_bytes = 0
        self.fsyncs = 0
        self.records = 0

    # --- at start -------------------------------------------------------------------------

    def read_back(self) -> list[bytes]:
        """The journaled encodings, oldest first (up to a torn tail, which is cut off)."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        records, offset = [], 0
        while offset + _HEADER.size <= len(data):
            length, crc = _HEADER.unpack_from(data, offset)
            body = data[offset + _HEADER.size:offset + _HEADER.size + length]
            if length > MAX_RECORD_BYTES or len(body) != length or zlib.crc32(body) != crc:
                break
            records.append(body)
            offset += _HEADER.size + length
        self._file = self.path.open("ab")
        if offset != len(data):        # drop the torn tail so later appends follow whole records
            self._file.truncate(offset)
        self.size_bytes = self.compacted_bytes = offset
        return records

    # --- while running ----------------------------------------------------------------------

    async def append(self, encodings: list[bytes]) -> None:
        """Return once `encodings` are on disk (fsync'd), together with whatever else
        arrived meanwhile. StoreError (500) if the disk refused."""
        if encodings:
            await asyncio.shield(self._enqueue(encodings))

    def append_soon(self, encodings: list[bytes]) -> None:
        """Queue `encodings` for the next group commit without waiting for it (relayed
        transactions). A failed write is logged by the writer; nobody else hears of it."""
        if encodings:
            self._enqueue(encodings).add_done_callback(_retrieved)

    def _enqueue(self, encodings: list[bytes]) -> asyncio.Future:
        """Add to the batch the writer takes next; the future of that batch's fsync."""
        self._batch.extend(encodings)
        if self._batch_done is None:
            self._batch_done = asyncio.get_running_loop().create_future()
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_batches())
        return self._batch_done

    async def _write_batches(self) -> None:
        loop = asyncio.get_running_loop()
        while self._batch:
            batch, done = self._batch, self._batch_done
            self._batch, self._batch_done = [], None
            try:
                await loop.run_in_executor(self._executor, self._write, batch)
            except OSError as exc:
                error = StoreError(f"cannot journal {len(batch)} accepted transaction(s) in {self.path}: {exc}",
                                   code="journal_failed")
                if self._log is not None:       # once per batch; a client waiting also gets a 500
                    self._log.error("%s", error)
                done.set_exception(error)
            else:
                done.set_result(None)

    def _write(self, batch: list[bytes]) -> None:
        data = _encode(batch)
        self._file.write(data)
        self._file.flush()
        os.fsync(self._file.fileno())
        self.size_bytes += len(data)
        self.fsyncs += 1
        self.records += len(batch)

    def wants_compaction(self) -> bool:
        return self.size_bytes >= max(MIN_COMPACT_BYTES, 2 * self.compacted_bytes)

    async def compact(self, unsettled: list[bytes]) -> None:
        """Rewrite the journal as exactly `unsettled` (taken by the caller just now: every
        transaction accepted so far and not committed). Appends queued before run first,
        appends after go to the new file, so nothing accepted falls between the two."""
        await asyncio.get_running_loop().run_in_executor(self._executor, self._rewrite, unsettled)

    def _rewrite(self, unsettled: list[bytes]) -> None:
        tmp = self.path.with_suffix(".tmp")
        with tmp.open("wb") as out:
            out.write(_encode(unsettled))
            out.flush()
            os.fsync(out.fileno())
            size = out.tell()
        tmp.replace(self.path)
        _fsync_dir(self.path.parent)       # the rename itself survives a crash
        self._file.close()
        self._file = self.path.open("ab")
        self.size_bytes = self.compacted_bytes = size

    def close(self) -> None:
        """After the last append (the node is stopping)."""
        self._executor.shutdown(wait=True)
        if self._file is not None:
            self._file.close()


def _retrieved(done: asyncio.Future) -> None:
    """Mark a failed batch's exception as seen (the writer logged it), so asyncio does not."""
    if not done.cancelled():
        done.exception()


def _encode(records: list[bytes]) -> bytes:
    return b"".join(_HEADER.pack(len(body), zlib.crc32(body)) + body for body in records)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
