"""Persistence: final blocks to SQLite, and what a clean stop keeps beside the store.

- The flusher writes blocks that became final (qmemo.node.chain) to the store, one SQL
  transaction per block, on a dedicated writer thread (a 4,000-transaction block is
  ~7 MB of inserts): the event loop never waits for SQLite.
- At a clean stop, what is only in memory goes to two files beside `chain.sqlite`, in
  the frame format (qmemo.frames): the blocks still undoable (`recent-blocks.bin`) and
  the accepted transactions not yet in a block (`pending-txs.bin`). At the next start
  the blocks are applied again with full validation and the transactions admitted again
  (verified again): a devnet stopped all at once loses neither. A killed node does.
  Each file is renamed to `*.restoring` while it is replayed and removed only after,
  so a crash mid-restore never replays half a file twice.

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
from qmemo.node.intake import BlockIntake
from qmemo.node.metrics import NodeMetrics
from qmemo.node.store import ChainStore

RECENT_BLOCKS_FILE = "recent-blocks.bin"    # beside chain.sqlite: undoable blocks kept at a clean stop
PENDING_TXS_FILE = "pending-txs.bin"        # beside chain.sqlite: accepted, uncommitted transactions
# What a kept file may hold at most: more than any chain keeps undoable (finality_depth
# blocks, a few by default) and more than any mempool holds (50,000 by default); a file
# past these is damaged, not big.
MAX_KEPT_BLOCKS = 10_000
MAX_KEPT_TXS = 10_000_000


class Persistence:
    """The flusher and the clean-stop files of one node's chain."""

    def __init__(self, data: Path, store: ChainStore, intake: BlockIntake, admission: Admission,
                 writer: ThreadPoolExecutor, metrics: NodeMetrics, log: logging.LoggerAdapter) -> None:
        self.data = data
        self.store = store
        self.intake = intake
        self.chain = intake.chain
        self.admission = admission
        self._writer = writer
        self.metrics = metrics
        self.log = log

    # --- while running ------------------------------------------------------------------------

    async def flush_loop(self) -> None:
        """Until cancelled: after each applied block, write the blocks that became final."""
        loop = asyncio.get_running_loop()
        applied_event = self.intake.applied
        while True:
            await applied_event.wait()
            applied_event.clear()
            for applied in self.chain.take_final():
                started = time.perf_counter()
                try:
                    await loop.run_in_executor(self._writer, self.store.append, applied)
                except Exception:   # the store refused: say so loudly; the block stays in memory
                    self.log.exception("writing block %d to the store failed", applied.block.height)
                    break
                self.metrics.validation["storage"].observe(time.perf_counter() - started)
                self.chain.written(applied.block.height)

    # --- at a clean stop ----------------------------------------------------------------------

    def write_final(self) -> None:
        """On the writer thread, once the flusher is stopped: blocks already handed over as final."""
        for entry in list(self.chain.recent):
            if self.store.height < entry.block.height <= self.chain.final_height:
                self.store.append(entry.applied)

    def keep(self) -> None:
        """What is only in memory goes to the files beside the store (each only if any)."""
        try:
            blocks = [entry.block.encode() for entry in self.chain.recent if entry.block.height > self.store.height]
            _write_atomically(self.data / RECENT_BLOCKS_FILE, blocks)
        finally:
            pending = [tx.encoded for tx in self.admission.unsettled()]
            if _write_atomically(self.data / PENDING_TXS_FILE, pending):
                self.log.info("kept %d accepted, uncommitted transaction(s) in %s", len(pending),
                              self.data / PENDING_TXS_FILE)

    # --- at start -----------------------------------------------------------------------------

    async def restore(self) -> None:
        """Replay what the last clean stop kept: the blocks first, then the transactions."""
        await self._restore_blocks()
        await self._restore_transactions()

    async def _restore_blocks(self) -> None:
        """Apply, with full validation, the blocks kept at the last clean stop."""
        path = self.data / RECENT_BLOCKS_FILE
        restoring = _take(path)
        if restoring is None:
            return
        restored = 0
        try:
            for record in decode_frames(restoring.read_bytes(), MAX_KEPT_BLOCKS, "block"):
                block = self.intake.decode(record)
                if block.header.previous_hash != self.chain.tip_hash:
                    break
                await self.intake.apply_kept(block)
                restored += 1
        except (DecodeError, InvalidBlock) as exc:
            self.log.error("the blocks kept at the last stop (%s) are unusable after %d: %s", path, restored, exc)
        self.log.info("restored %d block(s) kept at the last stop; tip %d", restored, self.chain.height)
        restoring.unlink()

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
        outcomes = await self.admission.admit(records, relay=True)
        by_status = Counter(outcome.status for outcome in outcomes)
        self.log.info("re-admitted the %d transaction(s) kept at the last stop: %s", len(records),
                      ", ".join(f"{count} {status}" for status, count in sorted(by_status.items())))
        restoring.unlink()


def count_committed(store: ChainStore) -> int:
    """Transactions in the stored blocks (on a reader thread, at start)."""
    total = 0
    for height in range(1, store.height + 1):
        header = store.header(height)
        total += header.tx_count if header else 0
    return total


def _write_atomically(path: Path, records: list[bytes]) -> bool:
    """`records` as frames in `path` (through a temporary file, renamed); False if none."""
    if not records:
        return False
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(encode_frames(records))
    tmp.replace(path)
    return True


def _take(path: Path) -> Path | None:
    """Rename a kept file to `*.restoring` (removed only once replayed); None if there is none."""
    if not path.exists():
        return None
    restoring = path.with_suffix(".restoring")
    path.replace(restoring)
    return restoring
