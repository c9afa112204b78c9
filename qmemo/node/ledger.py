"""The node's ledger: the accounts at the tip and the pool of accepted transactions, in C.

Why: per transaction a node paid ~50 µs of Python around a ~5 µs signature check - an
object per transaction, dict look-ups and checks in the mempool, block building and
block validation. `_qmemo_ledger` (qmemo/node/native, built by scripts/setup.sh against
the admission kernel) runs the same rules per transaction in C; the node calls it once
per request, block or timer tick. Its rules are qmemo.core's - `check_transaction_form`,
`charge`, `Mempool`, `HeldQueue`, the reference admission (qmemo.core.pool) and
`apply_block` - and tests/unit/test_ledger_*.py compare both on the same inputs.

This module loads the extension, sets a ledger up from a genesis and the node's limits,
and turns what the ledger reports (a rule's code and two numbers) into the errors
qmemo.core.refusals builds, so a client reads the same code and sentence either way.
`NodeBlock` is the node's block: a header and its body as the ledger holds it (one framed
buffer, the kernel's records over it), encoded without touching a transaction.
"""

from __future__ import annotations

import importlib.util
import os
import sysconfig
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from qmemo.core.block import SHARDED_BLOCK_VERSION, Block, BlockHeader, BlockIds
from qmemo.core.defaults import POOL
from qmemo.core.genesis import Genesis
from qmemo.core.hashing import split_digests
from qmemo.core.refusals import HELD_NONCE_CONFLICT, block_refusal, refusal
from qmemo.core.state import Account
from qmemo.core.transaction import Transaction
from qmemo.crypto.admit_kernel import KEY_MEMORY, _library, _rows
from qmemo.crypto.liboqs import SETUP_COMMAND
from qmemo.errors import DecodeError, InvalidBlock, QmemoError, SetupError
from qmemo.paths import NATIVE_DIR

EXTENSION = NATIVE_DIR / f"_qmemo_ledger{sysconfig.get_config_var('EXT_SUFFIX')}"
# Another build of the same extension (the sanitizer build tests/native/ledger_sanitized.sh
# makes), for the tests that run the differential suite under AddressSanitizer and UBSan.
EXTENSION_OVERRIDE = "QMEMO_LEDGER_EXTENSION"

# How much the ledger remembers (ids, so a late copy or a status question can be answered).
COMMITTED_MEMORY = 100_000      # recently committed: a late copy is a duplicate, not a replay
EVICTED_MEMORY = 100_000        # recently evicted: /tx/{id} can say why
VERIFIED_MEMORY = 1 << 18       # ids whose signature verified, until their block commits


@cache
def native() -> ModuleType:
    """The `_qmemo_ledger` extension (SetupError if it was not built for this interpreter)."""
    _library()      # the admission kernel first: the ledger links against it
    extension = Path(os.environ.get(EXTENSION_OVERRIDE) or EXTENSION)
    if not extension.is_file():
        raise SetupError(f"the node's ledger is missing ({extension}); run `{SETUP_COMMAND}`")
    spec = importlib.util.spec_from_file_location("_qmemo_ledger", extension)
    module = importlib.util.module_from_spec(spec)      # type: ignore[arg-type]
    spec.loader.exec_module(module)                     # type: ignore[union-attr]
    return module


# Peers' relays may fill the pending pool to this many times its caps. Every door judges its
# clients' batches against its own pool, which holds the other doors' admissions only once
# their relays arrive: doors judging at the same moment together overshoot any one pool, by
# at most what the others admitted meanwhile - within one more cap's worth. A relay refused
# here would leave its transactions in one pool only, waiting for that node's turn to
# produce, while every other producer's blocks pass them by.
RELAY_ROOM = 2


@dataclass(frozen=True, slots=True)
class PoolLimits:
    """The pool's caps (NodeConfig's mempool_* settings): what clients' batches fill; peers'
    relays may go on to `RELAY_ROOM` times them."""

    max_txs: int = POOL.max_txs                   # pending transactions
    max_bytes: int = POOL.max_bytes               # their bytes
    max_per_sender: int = POOL.max_per_sender     # pending per sender
    held_window: int = POOL.held_window           # nonces a sender may send past its next pending one
    held_max: int = POOL.held_max_txs             # held transactions, all senders together
    held_per_sender: int = POOL.held_per_sender   # held per sender
    held_ttl_s: float = POOL.held_ttl_s           # how long a held transaction waits for its gap

    @property
    def relay_max_txs(self) -> int:
        return RELAY_ROOM * self.max_txs

    @property
    def relay_max_bytes(self) -> int:
        return RELAY_ROOM * self.max_bytes


def new_ledger(genesis: Genesis, limits: PoolLimits) -> Any:
    """An empty `_qmemo_ledger.Ledger` with the chain's rules; its accounts are loaded after."""
    ledger = native().Ledger(
        chain_id=genesis.chain_id, min_fee=genesis.min_fee, max_txs=limits.max_txs, max_bytes=limits.max_bytes,
        max_per_sender=limits.max_per_sender, held_window=limits.held_window, held_max=limits.held_max,
        held_per_sender=limits.held_per_sender, committed_memory=COMMITTED_MEMORY,
        evicted_memory=EVICTED_MEMORY, verified_memory=VERIFIED_MEMORY,
        relay_max_txs=limits.relay_max_txs, relay_max_bytes=limits.relay_max_bytes)
    for scheme_id, rules in genesis.schemes.by_id.items():
        ledger.set_scheme(scheme_id, scheme_id in genesis.tx_scheme_ids, rules.public_key_bytes,
                          rules.min_signature_bytes, rules.max_signature_bytes)
    if genesis.sharding is not None:    # a shard's chain: another shard's recipients are paid there
        ledger.set_shard(genesis.sharding.index, genesis.sharding.count)
    return ledger


def rule_name(code: int) -> str:
    """The qmemo.core.refusals rule of a ledger code."""
    return HELD_NONCE_CONFLICT if code == native().HELD_NONCE_CONFLICT else native().CODE_NAMES[code]


def reason_name(code: int) -> str:
    """An eviction's reason: its rule's error code, "reorg_"-prefixed after a branch switch."""
    module = native()
    if code & module.REORG:
        return "reorg_" + module.CODE_NAMES[code & ~module.REORG]
    return module.CODE_NAMES[code]


def outcome_error(batch: Any, position: int, code: int, a: int, b: int, genesis: Genesis) -> QmemoError:
    """The error of a transaction the ledger refused: a decode failure is
    `Transaction.decode`'s own (re-decoded: its messages live there), any other rule
    qmemo.core.refusals's sentence."""
    if code < native().DECODE_CODES_END:
        try:
            Transaction.decode(batch.encoding(position))
        except DecodeError as exc:
            if exc.code != native().CODE_NAMES[code]:
                raise AssertionError(f"the ledger says {native().CODE_NAMES[code]}, Transaction.decode {exc.code}")
            return exc.detached()
        raise AssertionError(f"the ledger could not decode transaction {position}; Transaction.decode could")
    return refusal(rule_name(code), a, b, genesis)


def block_error(refused: BaseException, body: Any, genesis: Genesis) -> InvalidBlock:
    """The InvalidBlock of `_qmemo_ledger.BlockRefused(code, position, a, b)`."""
    code, position, a, b = refused.args
    tx_id = body.id(position) if position >= 0 else None
    return block_refusal(rule_name(code), position, a, b, tx_id, genesis)


def account_of(ledger: Any, address: bytes) -> Account:
    """The account at the tip (zero, nonce 0, if it never was touched)."""
    found = ledger.account(address)
    return Account(*found) if found is not None else Account()


@dataclass(frozen=True, slots=True, repr=False)
class NodeBlock:
    """A block as the node holds it: its header, and its body as the ledger's `BlockBody`;
    a shard's block (version 2) also its receipts section, as encoded."""

    header: BlockHeader
    body: Any       # _qmemo_ledger.BlockBody
    receipts: bytes = b""
    _encoding: list[bytes] = field(default_factory=list, compare=False)

    @property
    def hash(self) -> bytes:
        return self.header.hash

    @property
    def height(self) -> int:
        return self.header.height

    @property
    def tx_count(self) -> int:
        return self.body.count

    def encode(self) -> bytes:
        """The block encoding (signed header, then the framed transactions), made once."""
        if not self._encoding:
            self._encoding.append(self.header.encoded + self.body.body + self.receipts)
        return self._encoding[0]

    def ids(self) -> bytes:
        """The transactions' ids laid end to end."""
        return self.body.ids()

    def block_ids(self, *, with_ids: bool = True) -> BlockIds:
        sharded = self.header.version == SHARDED_BLOCK_VERSION
        return BlockIds(self.header, split_digests(self.body.ids()) if with_ids else None,
                        self.receipts if with_ids and sharded else None)

    def ids_encoding(self) -> bytes:
        """What a producer pushes (`BlockIds.encode`): the signed header and the ids (and a
        shard's block its receipts section, whole)."""
        return self.header.encoded + self.body.ids() + self.receipts

    def transactions(self) -> list[Transaction]:
        """Its transactions as objects (for JSON answers and tests; never on the hot path)."""
        built = _rows().transactions(Transaction, self.body.body, self.body.records(), self.body.count, {},
                                     KEY_MEMORY, ())
        return built

    def to_block(self) -> Block:
        """The core's `Block` (the reference's form), its encoding kept."""
        return Block.parsed(self.header, tuple(self.transactions()), self.encode(), self.receipts)

    def __repr__(self) -> str:
        return f"NodeBlock({self.header!r})"


def body_of(ledger_module: ModuleType, table: int, genesis: Genesis, data: bytes) -> NodeBlock:
    """A block encoding as a NodeBlock, decoded and hashed by the kernel; DecodeError with
    `Block.decode`'s own message if it is malformed anywhere."""
    header, offset = BlockHeader.decode_from(data)
    end = len(data) - header.receipts_bytes
    if end < offset:
        Block.decode(data)          # raises the canonical DecodeError
    body = ledger_module.decode_body(table, genesis.chain_id, bytes(data[offset:end]) if offset or end < len(data)
                                     else data, header.tx_count)
    if body is None:
        Block.decode(data)          # raises the canonical DecodeError
        raise AssertionError("the kernel refused a block body that Block.decode accepts")
    return NodeBlock(header, body, bytes(data[end:]))
