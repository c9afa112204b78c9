"""A chain made cheaply for `python -m qmemo.bench.node_store`: each block as the parts a node
hands its store (signed header, packed ids, spans, encoding, changed accounts).

Real headers, chained by hash, and real transaction encodings of Falcon-512 sizes, so a
stored block reads back and decodes; but the encodings cycle through a pool of
`POOL_TRANSACTIONS` and the ids are random bytes: the store never hashes a transaction nor
checks an id against it (`apply_block` did, before), so 6 million signed and hashed
transactions would cost the benchmark time and measure nothing more. Never used by a node.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass

from qmemo.core.block import BlockHeader
from qmemo.core.genesis import Genesis
from qmemo.core.hashing import DIGEST_BYTES
from qmemo.core.transaction import Transaction
from qmemo.node import store_index
from qmemo.node.store import ACCOUNT

KEY_BYTES, PAYLOAD_BYTES, SIGNATURE_BYTES = 897, 256, 666      # Falcon-512's key, MEMO's body, a long signature
POOL_TRANSACTIONS = 1000
BLOCK_INTERVAL_MS = 2000
_U32 = struct.Struct("<I")


@dataclass(frozen=True, slots=True)
class BlockParts:
    """One block as `ChainStore.append_final` takes it, and where its transactions' frames lie."""

    height: int
    block_hash: bytes
    header: bytes
    ids: bytes
    spans: bytes
    encoding: bytes
    accounts: bytes             # `ACCOUNT` per account the block changed
    frame_bytes: int        # each transaction's `[u32 length][encoding]` (all the same size here)

    def requests(self, request_txs: int) -> Iterator[tuple[bytes, int]]:
        """The block's transactions as the requests that brought them: (frames, count), as
        admission hands them to the journal."""
        start, end = len(self.header), len(self.encoding)
        step = request_txs * self.frame_bytes
        view = memoryview(self.encoding)
        for offset in range(start, end, step):
            stop = min(offset + step, end)
            yield bytes(view[offset:stop]), (stop - offset) // self.frame_bytes


class ChainMaker:
    """Blocks of `txs` transactions, each on the last, from `genesis`; each changes `accounts` accounts."""

    def __init__(self, genesis: Genesis, txs: int, accounts: int) -> None:
        self.genesis = genesis
        self.txs = txs
        pool = [Transaction(genesis.chain_id, 1, os.urandom(KEY_BYTES), nonce, os.urandom(32), 1, 1,
                            os.urandom(PAYLOAD_BYTES), os.urandom(SIGNATURE_BYTES)).encoded
                for nonce in range(POOL_TRANSACTIONS)]
        self.tx_bytes = len(pool[0])
        frames = b"".join(_U32.pack(len(encoded)) + encoded for encoded in pool)
        whole, part = divmod(txs, POOL_TRANSACTIONS)
        self.body = frames * whole + frames[:part * (_U32.size + self.tx_bytes)]
        self.addresses = [os.urandom(32) for _ in range(accounts)]
        self.height = 0
        self.tip_hash = genesis.hash
        self._first_ids: dict[int, bytes] = {}

    def next_block(self) -> BlockParts:
        self.height += 1
        header = BlockHeader(1, self.genesis.chain_id, self.height, self.tip_hash,
                             self.genesis.genesis_time_ms + self.height * BLOCK_INTERVAL_MS, 0, self.txs,
                             os.urandom(DIGEST_BYTES), signature=bytes(SIGNATURE_BYTES))
        self.tip_hash = header.hash
        ids = os.urandom(DIGEST_BYTES * self.txs)
        self._first_ids[self.height] = ids[:DIGEST_BYTES]
        spans = store_index.spans_of(len(header.encoded), [self.tx_bytes] * self.txs)
        accounts = b"".join(ACCOUNT.pack(address, 10**12 - self.height, self.height) for address in self.addresses)
        return BlockParts(self.height, header.hash, header.encoded, ids, spans, header.encoded + self.body,
                          accounts, _U32.size + self.tx_bytes)

    def id_in(self, height: int) -> bytes:
        """The id of the first transaction of block `height`."""
        return self._first_ids[height]
