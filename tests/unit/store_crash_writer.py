"""A block writer for the store's crash test: extends the chain in DIR until killed.

`python -m tests.unit.store_crash_writer DIR` reads DIR/genesis.json and DIR/keys.json
(one validator, then the accounts), resumes the store at DIR/chain.sqlite, and stores
blocks of transfers as fast as it can as the node does - its encoding first (`keep_branch`,
the block undoable), then the block as final (`append`) - printing each height once it is
committed.
"""

from __future__ import annotations

import sys
from pathlib import Path

from qmemo.core.block import make_block
from qmemo.core.genesis import next_turn_ms
from qmemo.core.state import apply_block
from qmemo.core.transaction import Transaction, derive_address
from qmemo.core.verify_cache import VerifyCache
from qmemo.crypto.keys import load_keys
from qmemo.crypto.schemes import scheme_id_of
from qmemo.crypto.verifier import RegistryVerifier, load_genesis, signer
from qmemo.node.store import ChainStore

TRANSACTIONS_PER_BLOCK = 200


def main(directory: Path) -> None:
    genesis = load_genesis(directory / "genesis.json")
    validator, *accounts = load_keys(directory / "keys.json")
    scheme_id = scheme_id_of(validator.scheme)
    addresses = [derive_address(scheme_id, key.public_key) for key in accounts]
    signers = [signer(key.scheme, key.secret_key) for key in accounts]
    verifier = VerifyCache(RegistryVerifier())
    with ChainStore(directory / "chain.sqlite", genesis) as store:
        state = store.load_state()
        while True:
            height = state.height + 1
            next_nonce: dict[int, int] = {}
            transactions = []
            for i in range(TRANSACTIONS_PER_BLOCK):
                sender, recipient = (height + i) % len(accounts), (height + 2 * i + 1) % len(accounts)
                nonce = next_nonce.get(sender, state.account(addresses[sender]).nonce)
                next_nonce[sender] = nonce + 1
                transactions.append(Transaction(genesis.chain_id, scheme_id, accounts[sender].public_key, nonce,
                                                addresses[recipient], 1 + i % 7, 1).signed(signers[sender]))
            timestamp_ms = next_turn_ms(genesis, 0, height, state.tip_timestamp_ms, 0)
            block = make_block(chain_id=genesis.chain_id, height=height, previous_hash=state.tip_hash,
                               timestamp_ms=timestamp_ms, producer_index=0, transactions=transactions,
                               sign=signer(validator.scheme, validator.secret_key))
            applied = apply_block(state, block, verifier, timestamp_ms)
            store.keep_branch(height - 1, [(height, block.hash, block.encode())])
            store.append(applied)
            print(height, flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
