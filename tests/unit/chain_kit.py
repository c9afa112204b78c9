"""A small devnet for the chain-core tests: keys made once per session, a genesis, and
helpers that sign transactions and blocks the way a node would.

Keys are real (liboqs Falcon-512 for validators and the main accounts, Ed25519 for an
account of another scheme); generated once per test process and cached, so the suite
pays for a handful of Falcon key generations in all.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cache

from qmemo.core.block import Block, make_block
from qmemo.core.genesis import Genesis, next_turn_ms, parse_genesis
from qmemo.core.state import AppliedBlock, ChainState, apply_block
from qmemo.core.transaction import Transaction, derive_address
from qmemo.core.verify_cache import VerifyCache
from qmemo.crypto.schemes import KeyPair, get_scheme, scheme_id_of
from qmemo.crypto.verifier import RegistryVerifier, scheme_table, signer

CHAIN_ID = 7
GENESIS_TIME_MS = 1_700_000_000_000
BLOCK_INTERVAL_MS = 2_000
INITIAL_BALANCE = 1_000_000


@cache
def falcon_keys(count: int = 6) -> tuple[KeyPair, ...]:
    """Falcon-512 keypairs: [0:3] validators, [3] alice, [4] bob, [5] mallory (unfunded)."""
    scheme = get_scheme("Falcon-512")
    return tuple(scheme.keypair() for _ in range(count))


@cache
def ed25519_key() -> KeyPair:
    return get_scheme("Ed25519").keypair()


@cache
def schemes():
    return scheme_table()


def address_of(key: KeyPair) -> bytes:
    return derive_address(scheme_id_of(key.scheme), key.public_key)


def genesis_document(**overrides: object) -> dict:
    keys = falcon_keys()
    document = {
        "format": "qmemo-genesis/1", "chain_id": CHAIN_ID, "genesis_time_ms": GENESIS_TIME_MS,
        "block_interval_ms": BLOCK_INTERVAL_MS, "producer_timeout_ms": 2_000, "max_clock_drift_ms": 500,
        "max_block_transactions": 50, "min_fee": 1, "tx_schemes": ["Falcon-512", "Ed25519"],
        "validators": [{"name": f"validator-{i}", "scheme": "Falcon-512", "public_key": keys[i].public_key.hex()}
                       for i in range(3)],
        "accounts": [{"address": address_of(key).hex(), "balance": INITIAL_BALANCE}
                     for key in (keys[3], keys[4], ed25519_key())],
    }
    document.update(overrides)
    return document


@cache
def default_genesis() -> Genesis:
    return parse_genesis(genesis_document(), schemes())


@dataclass
class Devnet:
    """A chain state and the keys to extend it: what one node holds."""

    genesis: Genesis = field(default_factory=default_genesis)
    state: ChainState = field(init=False)
    cache: VerifyCache = field(default_factory=lambda: VerifyCache(RegistryVerifier()))
    nonces: dict[bytes, int] = field(default_factory=dict)   # next nonce per sender, pending included

    def __post_init__(self) -> None:
        self.state = ChainState.from_genesis(self.genesis)

    # The cast: validators 0..2, alice, bob, carol (Ed25519), mallory (no funds).
    @property
    def validators(self) -> tuple[KeyPair, ...]:
        return falcon_keys()[:3]

    @property
    def alice(self) -> KeyPair:
        return falcon_keys()[3]

    @property
    def bob(self) -> KeyPair:
        return falcon_keys()[4]

    @property
    def mallory(self) -> KeyPair:
        return falcon_keys()[5]

    @property
    def carol(self) -> KeyPair:
        return ed25519_key()

    def transfer(self, sender: KeyPair, recipient: bytes | KeyPair, amount: int = 10, fee: int = 1, *,
                 nonce: int | None = None, payload: bytes = b"", signed_by: KeyPair | None = None,
                 chain_id: int = CHAIN_ID) -> Transaction:
        """A signed transfer from `sender`, with the next unused nonce unless given."""
        if isinstance(recipient, KeyPair):
            recipient = address_of(recipient)
        address = address_of(sender)
        if nonce is None:
            nonce = self.nonces.get(address, self.state.account(address).nonce)
            self.nonces[address] = nonce + 1
        tx = Transaction(chain_id, scheme_id_of(sender.scheme), sender.public_key, nonce, recipient, amount,
                         fee, payload)
        key = signed_by or sender
        return tx.signed(signer(key.scheme, key.secret_key))

    def next_block(self, transactions: tuple[Transaction, ...] | list[Transaction] = (), *,
                   producer: int | None = None, signed_by: KeyPair | None = None,
                   **header_changes: object) -> Block:
        """The next block, stamped at the start of `producer`'s turn (default: the primary's)
        and signed by it; `header_changes` are applied before signing (mutation tests)."""
        height = self.state.height + 1
        if producer is None:
            producer = (height - 1) % len(self.genesis.validators)
        timestamp_ms = next_turn_ms(self.genesis, producer, height, self.state.tip_timestamp_ms, 0)
        key = signed_by or self.validators[producer]
        sign = signer(key.scheme, key.secret_key)
        block = make_block(chain_id=self.genesis.chain_id, height=height, previous_hash=self.state.tip_hash,
                           timestamp_ms=timestamp_ms, producer_index=producer, transactions=transactions, sign=sign)
        if header_changes:
            block = Block(replace(block.header, **header_changes).signed(sign), block.transactions)
        return block

    def apply(self, block: Block, now_ms: int | None = None) -> AppliedBlock:
        """`apply_block` with the clock at the block's own timestamp unless given."""
        return apply_block(self.state, block, self.cache, block.header.timestamp_ms if now_ms is None else now_ms)


# --- the node's side: a Chain over the native ledger, blocks as the node holds them -----------

@cache
def kernel():
    """The admission kernel for this chain's schemes (the node's verify path)."""
    from qmemo.crypto.admit_kernel import AdmitKernel
    return AdmitKernel(CHAIN_ID, ["Falcon-512", "Ed25519"], verifier="fast")


def node_block(block: Block):
    """A core Block as the node holds it (qmemo.node.ledger.NodeBlock), decoded by the kernel."""
    from qmemo.node.ledger import body_of, native
    return body_of(native(), kernel().table, default_genesis(), block.encode())


def node_chain(store, **settings):
    """A node's Chain on `store`, over a new native ledger."""
    from qmemo.node.chain import Chain
    from qmemo.node.ledger import PoolLimits, new_ledger
    return Chain(store, new_ledger(store.genesis, PoolLimits()), **settings)
