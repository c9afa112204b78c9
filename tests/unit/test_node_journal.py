"""The accepted-transaction journal: what was appended comes back in order, a torn tail
is cut off (and later appends follow whole records), concurrent appends share fsyncs,
and compaction keeps exactly what it is given plus what was appended after."""

from __future__ import annotations

import asyncio
import errno
import logging
import threading
from pathlib import Path

import pytest

from qmemo.errors import StoreError
from qmemo.frames import encode_frames
from qmemo.node.journal import JOURNAL_FILE, Journal


async def _written(data: Path, records: list[bytes]) -> Path:
    """A journal file holding `records`, each from its own write (one entry each), closed."""
    journal = Journal(data, "test")
    journal.read_back()
    for record in records:
        await journal.append([record])
    journal.close()
    return data / JOURNAL_FILE


def _reopened(data: Path) -> list[bytes]:
    journal = Journal(data, "test")
    try:
        return journal.read_back()
    finally:
        journal.close()


async def test_appended_records_come_back_in_order(tmp_path: Path):
    journal = Journal(tmp_path, "test")
    assert journal.read_back() == []
    await journal.append([b"one", b"two"])
    await journal.append([b"three"])
    journal.close()
    assert _reopened(tmp_path) == [b"one", b"two", b"three"]


async def test_concurrent_appends_are_group_committed(tmp_path: Path):
    journal = Journal(tmp_path, "test")
    journal.read_back()
    await asyncio.gather(*(journal.append([bytes([i]) * 10]) for i in range(50)))
    assert journal.records == 50 and journal.fsyncs < 50      # the first write carries one, the next the rest
    journal.close()
    assert sorted(_reopened(tmp_path)) == sorted(bytes([i]) * 10 for i in range(50))


async def test_a_torn_tail_is_cut_off_and_later_appends_follow_whole_records(tmp_path: Path):
    path = await _written(tmp_path, [b"whole", b"torn-record"])
    path.write_bytes(path.read_bytes()[:-3])                   # a crash mid-write
    journal = Journal(tmp_path, "test")
    assert journal.read_back() == [b"whole"]
    await journal.append([b"after"])
    journal.close()
    assert _reopened(tmp_path) == [b"whole", b"after"]


async def test_a_flipped_byte_ends_the_read_at_the_damaged_record(tmp_path: Path):
    path = await _written(tmp_path, [b"first", b"second"])
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF                                           # the checksum no longer matches
    path.write_bytes(bytes(data))
    assert _reopened(tmp_path) == [b"first"]


async def test_compaction_keeps_what_it_is_given_and_later_appends(tmp_path: Path):
    journal = Journal(tmp_path, "test")
    journal.read_back()
    await journal.append([b"committed-a", b"unsettled-b", b"committed-c"])
    size_before = journal.size_bytes
    await journal.compact(encode_frames([b"unsettled-b"]), 1)
    assert journal.size_bytes < size_before and not journal.wants_compaction()
    await journal.append([b"later-d"])
    journal.close()
    assert _reopened(tmp_path) == [b"unsettled-b", b"later-d"]
    assert not list(tmp_path.glob("*.tmp"))


async def test_one_write_is_one_entry_whole_or_gone(tmp_path: Path):
    # Appends that share a write share an entry: a tear loses that write, never half of it
    # (none of its requests was answered before its fsync).
    journal = Journal(tmp_path, "test")
    journal.read_back()
    await journal.append([b"before"])
    await journal.append([b"one", b"write"])
    journal.close()
    path = tmp_path / JOURNAL_FILE
    assert _reopened(tmp_path) == [b"before", b"one", b"write"]
    path.write_bytes(path.read_bytes()[:-1])
    assert _reopened(tmp_path) == [b"before"]


async def test_framed_appends_come_back_as_their_records(tmp_path: Path):
    from qmemo.frames import encode_frames

    journal = Journal(tmp_path, "test")
    journal.read_back()
    await journal.append_frames(encode_frames([b"a", b"bb"]), 2)
    await journal.append_frames(b"", 0)                       # nothing accepted: nothing written
    assert journal.records == 2 and journal.fsyncs == 1
    journal.close()
    assert _reopened(tmp_path) == [b"a", b"bb"]


def test_a_journal_of_single_transaction_entries_still_reads(tmp_path: Path):
    # What earlier versions wrote: one entry per transaction, no batch flag.
    import struct
    import zlib

    old = b"".join(struct.pack("<II", len(body), zlib.crc32(body)) + body for body in (b"old-1", b"old-2"))
    (tmp_path / JOURNAL_FILE).write_bytes(old)
    assert _reopened(tmp_path) == [b"old-1", b"old-2"]


async def test_batches_checked_by_crc_32_as_earlier_versions_wrote_them_still_read(tmp_path: Path):
    import struct
    import zlib

    from qmemo.frames import encode_frames

    body = encode_frames([b"crc-1", b"crc-2"])
    (tmp_path / JOURNAL_FILE).write_bytes(struct.pack("<II", len(body) | 0x8000_0000, zlib.crc32(body)) + body)
    journal = Journal(tmp_path, "test")
    assert journal.read_back() == [b"crc-1", b"crc-2"]
    await journal.append([b"xxh3-3"])
    journal.close()
    assert _reopened(tmp_path) == [b"crc-1", b"crc-2", b"xxh3-3"]


async def test_a_write_is_one_entry_checked_by_xxh3_of_its_buffers(tmp_path: Path):
    import struct

    import xxhash

    from qmemo.frames import encode_frames

    journal = Journal(tmp_path, "test")
    journal.read_back()
    await asyncio.gather(journal.append([b"a", b"bb"]), journal.append([b"ccc"]))
    journal.close()
    data = (tmp_path / JOURNAL_FILE).read_bytes()
    entries = []
    while data:
        length, checksum = struct.unpack_from("<II", data)
        assert length & 0xC000_0000 == 0xC000_0000     # a batch, checked by XXH3
        body = data[8:8 + (length & 0x3FFF_FFFF)]
        assert checksum == xxhash.xxh3_64_intdigest(body) & 0xFFFF_FFFF
        entries.append(body)
        data = data[8 + len(body):]
    assert b"".join(entries) == encode_frames([b"a", b"bb", b"ccc"])


async def test_a_large_compaction_is_written_as_several_entries(tmp_path: Path, monkeypatch):
    import qmemo.node.journal as journal_module

    monkeypatch.setattr(journal_module, "COMPACT_ENTRY_RECORDS", 2)
    journal = Journal(tmp_path, "test")
    journal.read_back()
    records = [bytes([i]) * 3 for i in range(5)]
    await journal.compact(encode_frames(records), len(records))
    journal.close()
    data = (tmp_path / JOURNAL_FILE).read_bytes()
    assert _reopened(tmp_path) == records
    path = tmp_path / JOURNAL_FILE
    path.write_bytes(data[:-1])                  # a tear in the last entry keeps the earlier ones
    assert _reopened(tmp_path) == records[:4]


async def test_a_full_disk_fails_every_write_but_is_logged_once_per_interval(tmp_path: Path, caplog):
    journal = Journal(tmp_path, "test", logging.LoggerAdapter(logging.getLogger("qmemo.test.journal"), {}))
    journal.read_back()
    journal._file.close()
    journal._file = open("/dev/full", "wb", buffering=0)       # every write: ENOSPC
    with caplog.at_level(logging.ERROR, logger="qmemo.test.journal"):
        for index in range(20):
            with pytest.raises(StoreError) as failed:
                await journal.append([bytes([index])])
            assert failed.value.code == "journal_failed" and failed.value.http_status == 503
    lines = [record for record in caplog.records if record.name == "qmemo.test.journal"]
    assert len(lines) == 1 and "No space left" in lines[0].getMessage()
    assert journal.records == 0
    journal.close()


def test_the_journals_writes_are_the_store_stages_cpu(tmp_path):
    # Its framing, checksum, write and fsync ran on its own thread outside every stage, in "other".
    from qmemo.node.stages import STORE, StageCPU

    async def run() -> StageCPU:
        stages = StageCPU()
        journal = Journal(tmp_path, "test", stages=stages)
        journal.read_back()
        for _ in range(20):
            await journal.append([bytes(100_000)] * 10)
        await journal.compact(encode_frames([bytes(100_000)] * 10), 10)
        journal.close()
        return stages

    stages = asyncio.run(run())
    assert stages.thread_ns[STORE] > 0 and stages.thread_txs[STORE] == 0
    assert sum(stages.thread_ns) == stages.thread_ns[STORE]


async def test_a_short_writev_is_followed_by_the_rest_of_the_entry(tmp_path: Path, monkeypatch):
    # The kernel may take part of a write (a signal, a nearly full disk): the rest follows.
    import os

    import qmemo.node.journal as journal_module

    real_writev = os.writev
    monkeypatch.setattr(journal_module.os, "writev", lambda fd, views: real_writev(fd, [bytes(views[0])[:3]]))
    journal = Journal(tmp_path, "test")
    journal.read_back()
    await journal.append([b"first", b"second"])
    await journal.append([b"third"])
    journal.close()
    monkeypatch.undo()
    assert _reopened(tmp_path) == [b"first", b"second", b"third"]


async def test_a_write_that_fails_half_way_leaves_no_torn_entry_before_the_next(tmp_path: Path, monkeypatch):
    # A disk that fills mid-entry: the client gets its 503, and what is appended once there
    # is room again still reads back (a torn entry in between would end the read before it).
    import errno
    import os

    import qmemo.node.journal as journal_module

    real_writev = os.writev
    calls = []

    def writev_then_full(fd, views):
        calls.append(1)
        if len(calls) == 1:
            return real_writev(fd, [bytes(views[0])[:5]])
        raise OSError(errno.ENOSPC, "No space left on device")

    journal = Journal(tmp_path, "test")
    journal.read_back()
    await journal.append([b"before"])
    monkeypatch.setattr(journal_module.os, "writev", writev_then_full)
    with pytest.raises(StoreError):
        await journal.append([b"lost-to-a-full-disk"])
    monkeypatch.undo()
    await journal.append([b"after"])
    journal.close()
    assert _reopened(tmp_path) == [b"before", b"after"]


async def test_a_failed_fsync_does_not_make_a_later_failure_cut_into_an_answered_entry(tmp_path: Path, monkeypatch):
    # An fsync that fails leaves its entry's bytes in the file. A later write that fails
    # cuts the file back to where that write began - not to the size the journal counted,
    # which would cut into the entry answered "accepted" in between.
    import os

    import qmemo.node.journal as journal_module

    journal = Journal(tmp_path, "test")
    journal.read_back()
    await journal.append([b"first"])

    def fsync_fails(fd):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(journal_module.os, "fsync", fsync_fails)
    with pytest.raises(StoreError):
        await journal.append([b"fsync-failed"])
    monkeypatch.undo()
    await journal.append([b"answered-accepted"])

    def writev_fails(fd, views):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(journal_module.os, "writev", writev_fails)
    with pytest.raises(StoreError):
        await journal.append([b"refused"])
    monkeypatch.undo()
    await journal.append([b"last"])
    journal.close()
    reopened = _reopened(tmp_path)
    assert reopened[0] == b"first" and reopened[-2:] == [b"answered-accepted", b"last"]
    assert journal.size_bytes == (tmp_path / JOURNAL_FILE).stat().st_size


async def test_appends_after_a_compaction_whose_directory_fsync_failed_reach_the_new_file(tmp_path: Path,
                                                                                         monkeypatch):
    # The rename is done when the folder's fsync fails: the journal is the new file, and
    # appends must go there, not to the old one the rename unlinked.
    import qmemo.node.journal as journal_module

    journal = Journal(tmp_path, "test")
    journal.read_back()
    await journal.append([b"settled", b"unsettled"])

    def fsync_dir_fails(path):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(journal_module, "_fsync_dir", fsync_dir_fails)
    with pytest.raises(OSError):
        await journal.compact(encode_frames([b"unsettled"]), 1)
    monkeypatch.undo()
    await journal.append([b"after"])
    journal.close()
    assert _reopened(tmp_path) == [b"unsettled", b"after"]


async def test_settled_waits_for_queued_and_in_flight_appends(tmp_path: Path, monkeypatch):
    # A relayed transaction is queued without waiting (append_soon); a client that sends it
    # again hears "duplicate" only once it is on disk: `settled` waits for the write in
    # flight and for what is queued behind it.
    journal = Journal(tmp_path, "test")
    journal.read_back()
    release = threading.Event()
    write = journal._write

    def held_write(batch, count):
        release.wait(5)
        write(batch, count)

    monkeypatch.setattr(journal, "_write", held_write)
    journal.append_soon(encode_frames([b"first"]), 1)
    await asyncio.sleep(0.05)                       # the writer has taken it: in flight
    journal.append_soon(encode_frames([b"second"]), 1)      # queued behind it
    settled = asyncio.create_task(journal.settled())
    await asyncio.sleep(0.05)
    assert not settled.done() and journal.records == 0
    release.set()
    await asyncio.wait_for(settled, 5)
    assert journal.records == 2
    await journal.settled()                         # nothing pending: returns at once
    journal.close()
    assert _reopened(tmp_path) == [b"first", b"second"]


def test_compaction_waits_until_the_journal_is_several_times_what_the_last_one_left(tmp_path: Path):
    # Each compaction rewrites what the last one left: waiting for COMPACT_GROWTH times that
    # keeps the rewriting to a third of what is appended (at 2 it was all of it again).
    import qmemo.node.journal as journal_module

    journal = Journal(tmp_path, "test")
    journal.read_back()
    left = 10 * journal_module.MIN_COMPACT_BYTES
    journal.compacted_bytes = left
    journal.size_bytes = journal_module.COMPACT_GROWTH * left - 1
    assert journal_module.COMPACT_GROWTH >= 4 and not journal.wants_compaction()
    journal.size_bytes += 1
    assert journal.wants_compaction()
    journal.compacted_bytes, journal.size_bytes = 0, journal_module.MIN_COMPACT_BYTES - 1
    assert not journal.wants_compaction()                # below the floor, whatever the growth
    journal.close()
