"""Persistence: final blocks into SQLite's tables, and the undoable blocks back at start.

- Every applied block is in the store before it is served (qmemo.node.intake,
  `make_durable`: one row per block in `block_encodings`). The flusher then indexes the
  blocks that became final (qmemo.node.chain), one SQL transaction per block (its
  header, ids and one index row per transaction), on the store's writer thread: the
  event loop never waits for SQLite.
- At start, the stored undoable blocks are applied again with full validation: a node
  stopped or killed at any moment comes back with every block it had served.
- Accepted transactions are in the journal (qmemo.node.journal) before they are
  answered. The flusher compacts it as blocks commit its transactions; at a clean stop
  it is rewritten with every unsettled transaction (relayed ones too). At start its
  transactions are admitted again (verified again).
- `recent-blocks.bin` and `pending-txs.bin`, which earlier versions wrote at a clean
  stop (frame format, qmemo.frames), are still read once at start (compatibility) and
  never written. Each is renamed to `*.restoring` while it is replayed and removed only
  after, so a crash mid-restore never replays half a file twice.

Never imports aiohttp or knows about HTTP.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from qmemo.errors import DecodeError, InvalidBlock
from qmemo.frames import decode_frames, encode_frames
from qmemo.node.admission import Admission
from qmemo.node.chain import RecentBlock
from qmemo.node.intake import BlockIntake
from qmemo.node.journal import Journal
from qmemo.node.metrics import NodeMetrics
from qmemo.node.stages import STORE
from qmemo.node.store import ChainStore

RECENT_BLOCKS_FILE = "recent-blocks.bin"    # beside chain.sqlite: undoable blocks (read, never written now)
PENDING_TXS_FILE = "pending-txs.bin"        # beside chain.sqlite: accepted, uncommitted (read, never written now)
# What a kept file may hold at most: more than any chain keeps undoable (the blocks
# since a majority of validators last built on the chain, a few normally) and more than any mempool holds (50,000 by default); a file
# past these is damaged, not big.
MAX_KEPT_BLOCKS = 10_000
MAX_KEPT_TXS = 10_000_000


class Persistence:
    """The flusher, the journal's compaction and the restore at start of one node's chain."""

    def __init__(self, data: Path, store: ChainStore, intake: BlockIntake, admission: Admission,
                 journal: Journal, writer: ThreadPoolExecutor, metrics: NodeMetrics,
                 log: logging.LoggerAdapter) -> None:
        self.data = data
        self.journal = journal
        self.store = store
        self.intake = intake
        self.chain = intake.chain
        self.admission = admission
        self._writer = writer
        self.metrics = metrics
        self.log = log

    # --- while running ------------------------------------------------------------------------

    async def flush_loop(self) -> None:
        """Until cancelled: after each applied block, write the blocks that became final,
        and compact the journal once it has grown enough."""
        loop = asyncio.get_running_loop()
        while True:
            await self.intake.next_applied()
            for entry in self.chain.take_final():
                started = time.perf_counter()
                try:
                    # counted once, when make_durable stored it: `txs` stays 0 here
                    await loop.run_in_executor(self._writer, self.metrics.stages.timed(STORE, self._append), entry)
                except Exception:   # the store refused: say so loudly; the block stays in memory
                    self.log.exception("writing block %d to the store failed", entry.block.height)
                    break
                self.metrics.validation["storage"].observe(time.perf_counter() - started)
                self.chain.written(entry.block.height)
            if self.journal.wants_compaction():
                try:
                    await self.journal.compact(*self._unsettled())
                except OSError:         # the journal still holds everything: only bigger
                    self.log.exception("compacting the journal %s failed", self.journal.path)

    # --- at a clean stop ----------------------------------------------------------------------

    def write_final(self) -> None:
        """On the writer thread, once the flusher is stopped: blocks already handed over as final."""
        for entry in list(self.chain.recent):
            if self.store.height < entry.block.height <= self.chain.final_height:
                self._append(entry)

    def _append(self, entry: RecentBlock) -> None:
        """A final block into the store's tables (on the writer thread): its header, ids,
        where each transaction lies in its stored encoding, the accounts it changed."""
        block = entry.block
        header = block.header
        self.store.append_final(header.height, header.hash, header.encoded, block.ids(),
                                block.body.spans(len(header.encoded)), block.encode, entry.changed, entry.credited)

    async def keep(self) -> None:
        """The journal becomes every unsettled transaction, relayed ones too, and those of
        any applied block the store has not taken (`_unsettled`)."""
        frames, count = self._unsettled()
        await self.journal.compact(frames, count)
        if count:
            self.log.info("kept %d accepted, uncommitted transaction(s) in %s", count, self.journal.path)

    # --- at start -----------------------------------------------------------------------------

    async def restore(self, journaled: list[bytes]) -> None:
        """Bring back the undoable blocks (the store's, then an old kept file's), store
        them, then admit again the `journaled` transactions (and an old kept file's)."""
        loop = asyncio.get_running_loop()
        stored = await loop.run_in_executor(self._writer, self.store.recent_blocks)
        await self._restore_blocks(stored, "the store")
        self.chain.durable_height = self.chain.height      # they are in the store already
        restoring = _take(self.data / RECENT_BLOCKS_FILE)
        if restoring is not None:
            try:
                records = decode_frames(restoring.read_bytes(), MAX_KEPT_BLOCKS, "block")
            except DecodeError as exc:
                self.log.error("the blocks kept at the last stop (%s) are unreadable: %s", restoring, exc)
                records = []
            await self._restore_blocks(records, str(self.data / RECENT_BLOCKS_FILE))
        async with self.intake.locked():
            await self.intake.make_durable()
        if restoring is not None:
            restoring.unlink()
        await self._readmit(journaled, str(self.journal.path))
        await self._restore_transactions()
        await self.journal.compact(*self._unsettled())

    def _unsettled(self) -> tuple[bytes, int]:
        """What the journal must hold: the transactions of the applied blocks not yet in the
        store (oldest first: their nonces come before the pool's), then the pool's unsettled
        ones, framed. A block leaves the pool when it is applied but reaches the store only
        when its write returns (`BlockIntake.make_durable`, on another thread, or never if the
        store refuses): a compaction in between that kept only the pool would lose its
        transactions to a SIGKILL. A block body is framed as the journal is."""
        frames, count = self.admission.unsettled()
        blocks = self.chain.not_durable()
        if not blocks:
            return frames, count
        return (b"".join([*(block.body.body for block in blocks), frames]),
                count + sum(block.tx_count for block in blocks))

    async def _restore_blocks(self, records: list[bytes], source: str) -> None:
        """Apply, with full validation, the undoable blocks from `source`, as far as they
        extend the tip."""
        restored = 0
        try:
            for record in records:
                block = self.intake.decode(record)
                if block.header.previous_hash != self.chain.tip_hash:
                    break
                await self.intake.apply_kept(block)
                restored += 1
        except (DecodeError, InvalidBlock) as exc:
            self.log.error("the undoable blocks in %s are unusable after %d: %s", source, restored, exc)
        if records:
            self.log.info("restored %d undoable block(s) from %s; tip %d", restored, source, self.chain.height)

    async def _restore_transactions(self) -> None:
        """Admit again (verifying again) the transactions kept at the last clean stop. Those
        committed meanwhile answer as duplicates or stale nonces; each outcome is counted."""
        restoring = _take(self.data / PENDING_TXS_FILE)
        if restoring is None:
            return
        try:
            records = decode_frames(restoring.read_bytes(), MAX_KEPT_TXS, "transaction")
        except DecodeError as exc:
            self.log.error("the transactions kept at the last stop (%s) are unreadable: %s", restoring, exc)
            return
        await self._readmit(records, str(restoring))
        restoring.unlink()

    async def _readmit(self, records: list[bytes], source: str) -> None:
        """Admit `records` again through normal admission; each outcome is counted."""
        if not records:
            return
        batch = self.admission.decode(encode_frames(records), len(records), relayed=True)    # promised already
        outcomes = (await self.admission.admit(batch, relay=True)).outcomes()
        by_status = Counter(outcome.status if outcome.error is None else outcome.error.code
                            for outcome in outcomes)
        self.log.info("re-admitted the %d transaction(s) in %s: %s", len(records), source,
                      ", ".join(f"{count} {status}" for status, count in sorted(by_status.items())))


def count_committed(store: ChainStore) -> int:
    """Transactions in the stored blocks (on a reader thread, at start)."""
    total = 0
    for height in range(1, store.height + 1):
        header = store.header(height)
        total += header.tx_count if header else 0
    return total


def _take(path: Path) -> Path | None:
    """Rename a kept file to `*.restoring` (removed only once replayed); None if there is none."""
    if not path.exists():
        return None
    restoring = path.with_suffix(".restoring")
    path.replace(restoring)
    return restoring
