"""Decode each transaction once per node, however many times its bytes arrive.

The same transaction reaches a node up to three times: from a client or a peer's relay,
inside a block, and again through a relay that lost the race with that block. Decoding
costs ~7 us (the core hashes the signing digest and the id), a sixth of a Falcon-512
verify, on every node. `DecodedCache` remembers the recently decoded transactions by the
last 32 bytes of their encoding (signature bytes) and hands back the same object when the
*whole* encoding is byte-for-byte equal - exactly what `Transaction.decode` would return.
Bounded: the oldest are forgotten first (a miss only costs a decode).

`decode_block` parses a block the same way; anything irregular (truncation, trailing
bytes) falls back to `Block.decode`, which raises the canonical DecodeError: this module
never decides what is malformed.
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from collections.abc import Sequence

from qmemo.core.block import Block, BlockHeader
from qmemo.core.transaction import Transaction
from qmemo.errors import DecodeError
from qmemo.node.answers import Item

TAIL_BYTES = 32
DEFAULT_CAPACITY = 50_000     # a full default mempool; ~100 MB of Falcon-512 transactions at most
_LENGTH = struct.Struct("<I")


class DecodedCache:
    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        self._by_tail: OrderedDict[bytes, Transaction] = OrderedDict()
        self.reused = 0

    def __len__(self) -> int:
        return len(self._by_tail)

    def decode(self, data: bytes) -> Transaction:
        """`Transaction.decode(data)`, or the identical transaction decoded before."""
        tail = data[-TAIL_BYTES:]
        tx = self._by_tail.get(tail)
        if tx is not None and tx.encoded == data:
            self.reused += 1
            return tx
        tx = Transaction.decode(data)
        self.remember(tx, tail)
        return tx

    def decode_items(self, items: Sequence[Item]) -> list[Item]:
        """Admission's items with every transaction encoding decoded (`decode`), or its
        DecodeError as a value: one pass, so the decode and hash stage is timed per batch."""
        decoded: list[Item] = []
        decode = self.decode
        for item in items:
            if type(item) is bytes:
                try:
                    item = decode(item)
                except DecodeError as exc:
                    item = exc.detached()   # a value now: its traceback would hold `decoded`
            decoded.append(item)
        return decoded

    def remember(self, tx: Transaction, tail: bytes | None = None) -> None:
        """Keep `tx` for later copies of its bytes (e.g. one that came as JSON)."""
        by_tail = self._by_tail
        by_tail[tx.encoded[-TAIL_BYTES:] if tail is None else tail] = tx
        if len(by_tail) > self.capacity:
            by_tail.popitem(last=False)

    def decode_block(self, data: bytes) -> Block:
        """`Block.decode(data)`, reusing the transactions decoded before."""
        if type(data) is not bytes:
            data = bytes(data)
        header, offset = BlockHeader.decode_from(data)
        size = len(data)
        unpack = _LENGTH.unpack_from
        decode = self.decode
        transactions: list[Transaction] = []
        for _ in range(header.tx_count):
            start = offset + _LENGTH.size
            end = start + unpack(data, offset)[0] if start <= size else size + 1
            if end > size:
                return Block.decode(data)              # raises: truncated
            transactions.append(decode(data[start:end]))
            offset = end
        if offset != size:
            return Block.decode(data)                  # raises: trailing bytes
        return Block.parsed(header, tuple(transactions), data)    # each transaction equal to its slice
