"""A two-shard devnet for the receipt tests: a sharded genesis, each shard's state, and
helpers that build blocks, cross-shard transfers and their receipts as nodes would.

Keys are real Falcon-512 keys, made once per test process: each validator's and each
account's key is drawn until its address falls in the shard it is meant for (the rule
is qmemo.core.shards.shard_of), two draws each on average with two shards.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cache

from qmemo.core.block import EMPTY_RECEIPTS_SECTION, Block, BlockHeader, make_block
from qmemo.core.genesis import Genesis, next_turn_ms
from qmemo.core.receipts import ReceiptBundle, encode_section, finality_headers, make_bundles
from qmemo.core.shards import ShardedGenesis, parse_sharded_genesis, shard_of, sharded_document
from qmemo.core.state import AppliedBlock, ChainState, apply_block
from qmemo.core.transaction import Transaction
from qmemo.core.verify_cache import VerifyCache
from qmemo.crypto.schemes import KeyPair, get_scheme, scheme_id_of
from qmemo.crypto.verifier import RegistryVerifier, scheme_table, signer
from tests.unit.chain_kit import address_of

SHARDS = 2
CHAIN_IDS = (101, 102)
GENESIS_TIME_MS = 1_700_000_000_000
BALANCE = 1_000_000


@cache
def shard_key(shard: int, n: int) -> KeyPair:
    """The n-th Falcon-512 key whose address lies in `shard` (cached: the same key each time)."""
    scheme = get_scheme("Falcon-512")
    while True:
        key = scheme.keypair()
        if shard_of(address_of(key), SHARDS) == shard:
            return key


def validators(shard: int) -> tuple[KeyPair, ...]:
    return tuple(shard_key(shard, i) for i in range(3))


def account(shard: int, n: int = 0) -> KeyPair:
    """A funded account of `shard` (n = 0, 1: two per shard)."""
    return shard_key(shard, 10 + n)


def sharded_genesis_document(**overrides: object) -> dict:
    common = {"genesis_time_ms": GENESIS_TIME_MS, "block_interval_ms": 2_000, "producer_timeout_ms": 2_000,
              "max_clock_drift_ms": 500, "max_block_transactions": 50, "min_fee": 1}
    shards = [{"chain_id": CHAIN_IDS[k],
               "validators": [{"name": f"validator-{k}-{i}", "scheme": "Falcon-512", "public_key": key.public_key.hex()}
                              for i, key in enumerate(validators(k))],
               "accounts": [{"address": address_of(account(k, n)).hex(), "balance": BALANCE} for n in range(2)]}
              for k in range(SHARDS)]
    document = sharded_document(common, ["Falcon-512"], shards)
    document.update(overrides)
    return document


@cache
def sharded_genesis() -> ShardedGenesis:
    return parse_sharded_genesis(sharded_genesis_document(), scheme_table())


@dataclass
class ShardChain:
    """One shard's chain as one node holds it (the reference's state), and its keys."""

    index: int
    cache: VerifyCache = field(default_factory=lambda: VerifyCache(RegistryVerifier()))
    state: ChainState = field(init=False)
    headers: list[BlockHeader] = field(default_factory=list)
    blocks: list[Block] = field(default_factory=list)
    nonces: dict[bytes, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.state = ChainState.from_genesis(self.genesis)

    @property
    def genesis(self) -> Genesis:
        return sharded_genesis().view(self.index)

    def transfer(self, sender: KeyPair, recipient: bytes | KeyPair, amount: int = 10, fee: int = 1, *,
                 chain_id: int | None = None, signed_by: KeyPair | None = None) -> Transaction:
        if isinstance(recipient, KeyPair):
            recipient = address_of(recipient)
        address = address_of(sender)
        nonce = self.nonces.get(address, self.state.account(address).nonce)
        self.nonces[address] = nonce + 1
        tx = Transaction(self.genesis.chain_id if chain_id is None else chain_id, scheme_id_of(sender.scheme),
                         sender.public_key, nonce, recipient, amount, fee, b"")
        key = signed_by or sender
        return tx.signed(signer(key.scheme, key.secret_key))

    def next_block(self, transactions: Sequence[Transaction] = (), bundles: Sequence[ReceiptBundle] = (), *,
                   producer: int | None = None, signed_by: KeyPair | None = None, section: bytes | None = None,
                   **header_changes: object) -> Block:
        """The next block (version 2), stamped in `producer`'s turn (default: the primary's)."""
        height = self.state.height + 1
        if producer is None:
            producer = (height - 1) % 3
        timestamp_ms = next_turn_ms(self.genesis, producer, height, self.state.tip_timestamp_ms, 0)
        key = signed_by or validators(self.index)[producer]
        sign = signer(key.scheme, key.secret_key)
        if section is None:
            section = encode_section(bundles) if bundles else EMPTY_RECEIPTS_SECTION
        count = sum(len(bundle.entries) for bundle in bundles)
        block = make_block(chain_id=self.genesis.chain_id, height=height, previous_hash=self.state.tip_hash,
                           timestamp_ms=timestamp_ms, producer_index=producer, transactions=transactions, sign=sign,
                           receipts=(count, section))
        if header_changes:
            block = Block(replace(block.header, **header_changes).signed(sign), block.transactions,
                          block.receipts_section)
        return block

    def apply(self, block: Block) -> AppliedBlock:
        applied = apply_block(self.state, block, self.cache, block.header.timestamp_ms)
        self.headers.append(block.header)
        self.blocks.append(block)
        return applied

    def extend(self, transactions: Sequence[Transaction] = (), bundles: Sequence[ReceiptBundle] = (),
               producer: int | None = None) -> Block:
        block = self.next_block(transactions, bundles, producer=producer)
        self.apply(block)
        return block

    def bundles_of(self, height: int) -> dict[int, ReceiptBundle]:
        """The receipt bundles of our block at `height`, once final on our chain (KeyError if not)."""
        header = self.headers[height - 1]
        finality = finality_headers(header, self.headers[height:], 2)
        if finality is None:
            raise KeyError(f"block {height} is not final yet")
        block = self.blocks[height - 1]
        sharding = self.genesis.sharding
        outgoing = [(position, tx) for position, tx in enumerate(block.transactions)
                    if sharding.shard_of(tx.recipient) != sharding.index]
        return make_bundles(sharding, header, finality, [tx.id for tx in block.transactions], outgoing)


def total_supply(chains: Sequence[ShardChain]) -> int:
    return sum(account.balance for chain in chains for account in chain.state.accounts.values())
