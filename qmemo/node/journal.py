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
transactions still unsettled, then renamed over - once it has grown to `COMPACT_GROWTH`
times its size after the last compaction, so it stays within a few times the size of the
mempool.

Entry: u32 length, u32 checksum of what follows, then either one transaction encoding,
or - with the length's top bit set - a framed batch (`[u32 length][encoding]` each,
qmemo.frames) of many (all little-endian). Every write is one batch entry: the
accepted transactions of the requests it carries, framed once by admission (the
request body itself when all its transactions were accepted), handed to the kernel as
they are (one `writev`, no copy in Python) with one checksum over them. The checksum of
a batch whose length has bit 30 set is XXH3-64's low 32 bits; of any other entry, zlib's
CRC-32, which earlier versions wrote and which is still read. Why XXH3: it checksums the
~1.9 KB of a Falcon-512 transaction in a small fraction of CRC-32's thread CPU (`python -m
qmemo.bench.node_store` times the journal's writes; the measurement is in
docs/methodology.md, "The store at append speed"). A torn last entry (a crash mid-write)
fails its length or checksum check and ends the read: it was never answered "accepted".

Runs its writes on its own thread (never the store's: a block write must not delay a
client's answer). Never imports aiohttp or knows about HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import struct
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import BinaryIO, ParamSpec, TypeVar

import xxhash

from qmemo.errors import DecodeError, StoreError
from qmemo.frames import decode_frames, encode_frames
from qmemo.node.log import Throttle, held_back
from qmemo.node.stages import STORE, StageCPU

P = ParamSpec("P")
R = TypeVar("R")

JOURNAL_FILE = "accepted.journal"
_HEADER = struct.Struct("<II")
_BATCH_FLAG = 0x8000_0000      # an entry's length's top bit: the entry is a framed batch
_XXH3_FLAG = 0x4000_0000       # bit 30: its checksum is XXH3-64's low 32 bits (else zlib's CRC-32)
MAX_BATCH_BYTES = _XXH3_FLAG - 1   # an entry is one write's requests (a body is at most 16 MiB)
IOV_MAX = 1024                 # buffers per writev (Linux's limit)
COMPACT_ENTRY_RECORDS = 10_000  # a compaction's entries: ~19 MB of Falcon-512 transactions each
# Compaction rewrites the unsettled transactions: only worth it once the file holds at
# least this much (a few hundred transactions) and COMPACT_GROWTH times what the last
# compaction left. Each compaction rewrites what the last one left, so a journal appended
# at a steady rate rewrites 1/(COMPACT_GROWTH - 1) of what it appends: at 2, every byte
# twice; at 4, a third (the profile and runs behind 4: docs/methodology.md section 13,
# "The journal's compactions").
MIN_COMPACT_BYTES = 1 << 20
COMPACT_GROWTH = 4
MAX_RECORD_BYTES = 1 << 20     # a transaction is at most a few KB; a longer length is damage
FAILURE_LOG_INTERVAL_S = 10.0


class Journal:
    """One node's journal. `read_back` once at start, then `append` / `compact`; `close`."""

    def __init__(self, data: Path, name: str, log: logging.LoggerAdapter | None = None,
                 stages: StageCPU | None = None) -> None:
        self.path = Path(data) / JOURNAL_FILE
        self._log = log
        # The writes' CPU (checksum, write, fsync; compaction) is the `store` stage's,
        # on this writer's thread; without it, it would count in "other".
        self._stages = stages
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{name}-journal")
        self._file: BinaryIO | None = None
        self._batch: list[bytes] = []       # framed buffers waiting for the next write
        self._batch_records = 0
        self._batch_done: asyncio.Future | None = None
        self._writing: asyncio.Future | None = None     # the batch being written now
        self._writer: asyncio.Task | None = None
        self._failure_log = Throttle(FAILURE_LOG_INTERVAL_S)
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
        records: list[bytes] = []
        offset = 0
        while offset + _HEADER.size <= len(data):
            length, checksum = _HEADER.unpack_from(data, offset)
            batch, xxh3 = length & _BATCH_FLAG, length & _XXH3_FLAG
            length &= ~(_BATCH_FLAG | _XXH3_FLAG)
            body = data[offset + _HEADER.size:offset + _HEADER.size + length]
            if length > (MAX_BATCH_BYTES if batch else MAX_RECORD_BYTES) or len(body) != length or \
                    (xxh3 and not batch) or (_xxh3((body,)) if xxh3 else zlib.crc32(body)) != checksum:
                break
            if batch:
                try:
                    records.extend(decode_frames(body, len(body), "journaled transaction"))
                except DecodeError:     # a checksum-correct entry that does not frame: damage, read no further
                    break
            else:
                records.append(body)
            offset += _HEADER.size + length
        self._file = self.path.open("ab", buffering=0)
        if offset != len(data):        # drop the torn tail so later appends follow whole records
            self._file.truncate(offset)
        self.size_bytes = self.compacted_bytes = offset
        return records

    # --- while running ----------------------------------------------------------------------

    async def append(self, encodings: list[bytes]) -> None:
        """Return once `encodings` are on disk (fsync'd), together with whatever else
        arrived meanwhile. StoreError (500) if the disk refused."""
        await self.append_frames(encode_frames(encodings), len(encodings))

    async def append_frames(self, frames: bytes, count: int) -> None:
        """`append` for `count` encodings already framed (`[u32 length][encoding]` each)."""
        if count:
            await asyncio.shield(self._enqueue(frames, count))

    def append_soon(self, frames: bytes, count: int) -> None:
        """Queue `count` framed encodings for the next group commit without waiting for it
        (relayed transactions). A failed write is logged by the writer; nobody else hears of it."""
        if count:
            self._enqueue(frames, count).add_done_callback(_retrieved)

    async def settled(self) -> None:
        """Return once everything appended so far - queued, relayed ones included, or being
        written - is on disk. StoreError (500) if the disk refused it."""
        waiting = self._batch_done if self._batch else self._writing
        if waiting is not None and not waiting.done():
            await asyncio.shield(waiting)

    def _enqueue(self, frames: bytes, count: int) -> asyncio.Future:
        """Add to the batch the writer takes next; the future of that batch's fsync."""
        self._batch.append(frames)
        self._batch_records += count
        if self._batch_done is None:
            self._batch_done = asyncio.get_running_loop().create_future()
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_batches())
        return self._batch_done

    async def _write_batches(self) -> None:
        loop = asyncio.get_running_loop()
        while self._batch:
            batch, count, done = self._batch, self._batch_records, self._batch_done
            self._batch, self._batch_records, self._batch_done = [], 0, None
            self._writing = done
            try:
                await loop.run_in_executor(self._executor, self._timed(self._write), batch, count)
            except OSError as exc:
                error = StoreError(f"cannot journal {count} accepted transaction(s) in {self.path}: {exc}",
                                   code="journal_failed")
                # A full disk fails every batch (hundreds a second): one line per
                # FAILURE_LOG_INTERVAL_S with the count; each waiting client gets its 503.
                more = self._failure_log.allow()
                if self._log is not None and more is not None:
                    self._log.error("%s%s", error, held_back(more))
                done.set_exception(error)
            else:
                done.set_result(None)

    def _write(self, batch: list[bytes], count: int) -> None:
        # Where this entry begins, from the file itself: after a failure whose cut failed
        # too, a count kept here would be short, and a later cut would take from entries
        # answered "accepted" since.
        start = os.fstat(self._file.fileno()).st_size
        try:
            written = _write_entry(self._file, batch)
            os.fsync(self._file.fileno())
        except OSError:
            # Part of the entry may be in the file (a disk that filled mid-write), or all of it
            # unsynced: cut it off - its clients hear it failed - or the entries answered after
            # it would follow a torn one, which ends the read.
            with contextlib.suppress(OSError):     # the write's own error is the one to report
                self._file.truncate(start)
            raise
        self.size_bytes = start + written
        self.fsyncs += 1
        self.records += count

    def wants_compaction(self) -> bool:
        return self.size_bytes >= max(MIN_COMPACT_BYTES, COMPACT_GROWTH * self.compacted_bytes)

    async def compact(self, frames: bytes, count: int) -> None:
        """Rewrite the journal as exactly the `count` framed transactions of `frames` (taken
        by the caller just now: every transaction accepted so far and not committed). Appends
        queued before run first, appends after go to the new file, so nothing accepted falls
        between the two."""
        await asyncio.get_running_loop().run_in_executor(self._executor, self._timed(self._rewrite), frames, count)

    def _timed(self, function: Callable[P, R]) -> Callable[P, R]:
        """`function` with its CPU added to the `store` stage (transactions are counted there
        once, when their block is stored: none here)."""
        return function if self._stages is None else self._stages.timed(STORE, function)

    def _rewrite(self, frames: bytes, count: int) -> None:
        tmp = self.path.with_suffix(".tmp")
        size = 0
        with tmp.open("wb", buffering=0) as out:
            for chunk in _chunks(frames, COMPACT_ENTRY_RECORDS):     # entries far below MAX_BATCH_BYTES
                size += _write_entry(out, [chunk])
            os.fsync(out.fileno())
        tmp.replace(self.path)
        # The new file from here on, even if the folder's fsync fails: appends to the old,
        # unlinked one would be lost at the next start.
        self._file.close()
        self._file = self.path.open("ab", buffering=0)
        self.size_bytes = self.compacted_bytes = size
        _fsync_dir(self.path.parent)       # the rename itself survives a crash

    def close(self) -> None:
        """After the last append (the node is stopping)."""
        self._executor.shutdown(wait=True)
        if self._file is not None:
            self._file.close()


def _chunks(frames: bytes, per_chunk: int) -> list[bytes]:
    """`frames` cut after every `per_chunk` frames (only the u32 lengths are read)."""
    chunks: list[bytes] = []
    start = offset = count = 0
    while offset < len(frames):
        offset += 4 + int.from_bytes(frames[offset:offset + 4], "little")
        count += 1
        if count == per_chunk:
            chunks.append(frames[start:offset])
            start, count = offset, 0
    if start < len(frames):
        chunks.append(frames[start:])
    return chunks


def _write_entry(file: BinaryIO, framed: Sequence[bytes]) -> int:
    """One batch entry holding the framed buffers (concatenated frames are one framing),
    written whole - header and buffers in `writev` calls, never joined in Python (a copy
    of the whole batch) - unless the disk refuses (OSError). Returns the bytes written."""
    length = sum(len(part) for part in framed)
    if length > MAX_BATCH_BYTES:
        raise OSError(f"a journal entry of {length} bytes is past {MAX_BATCH_BYTES}")
    views = [memoryview(_HEADER.pack(length | _BATCH_FLAG | _XXH3_FLAG, _xxh3(framed)))]
    views += [memoryview(part) for part in framed if len(part)]
    fd = file.fileno()
    while views:
        written = os.writev(fd, views[:IOV_MAX])
        while views and written >= len(views[0]):
            written -= len(views.pop(0))
        if written:
            views[0] = views[0][written:]
    return _HEADER.size + length


def _xxh3(parts: Sequence[bytes]) -> int:
    """The low 32 bits of XXH3-64 over the parts, in order."""
    digest = xxhash.xxh3_64()
    for part in parts:
        digest.update(part)
    return digest.intdigest() & 0xFFFF_FFFF


def _retrieved(done: asyncio.Future) -> None:
    """Mark a failed batch's exception as seen (the writer logged it), so asyncio does not."""
    if not done.cancelled():
        done.exception()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
