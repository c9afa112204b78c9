"""`qmemo bench node`, setting up: a throw-away devnet and its pre-signed transactions.

One validator whose block interval is an hour, so no block is produced during the
measurement; every transaction signed before any node starts (a thread pool, never
timed). Nothing here measures anything.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qmemo.core.transaction import Transaction, derive_address
from qmemo.crypto.schemes import get_scheme
from qmemo.devnet.files import DevnetSpec, create_devnet

PAYLOAD_BYTES = 188     # a 256-byte transaction body (qmemo.load.workload: 256 - 66 fixed - 2)
TXS_PER_ACCOUNT = 100   # below the mempool's per-sender limit
BLOCK_INTERVAL_MS = 3_600_000   # an hour: no block during the measurement, only admission is timed


@dataclass(frozen=True, slots=True)
class BenchDevnet:
    dir: Path
    chain_id: int
    keys: list[Any]          # the funded accounts' key pairs
    scheme: Any              # the registry's scheme object (sign, verify)


def make_devnet(workdir: Path, scheme: str, transactions: int) -> BenchDevnet:
    """One validator and enough funded accounts for `transactions` (TXS_PER_ACCOUNT each)."""
    accounts = -(-transactions // TXS_PER_ACCOUNT)
    # Blocks as large as the run: the door's pool bound (one block's worth pending) never
    # binds while no block comes; the bench times admission, not the door.
    devnet = create_devnet(DevnetSpec(out=workdir / "devnet", validators=1, accounts=accounts, scheme=scheme,
                                      block_interval_ms=BLOCK_INTERVAL_MS, max_block_transactions=transactions))
    return BenchDevnet(devnet.dir, devnet.genesis.chain_id, list(devnet.accounts), get_scheme(scheme))


def sign_transactions(devnet: BenchDevnet, count: int) -> list[Transaction]:
    """`count` transfers, each account sending in nonce order; signed on every core."""
    scheme, keys = devnet.scheme, devnet.keys
    scheme_id = scheme.info.scheme_id
    payload = bytes(PAYLOAD_BYTES)

    def sign(index: int) -> Transaction:
        sender = keys[index % len(keys)]
        recipient = derive_address(scheme_id, keys[(index + 1) % len(keys)].public_key)
        tx = Transaction(devnet.chain_id, scheme_id, sender.public_key, index // len(keys), recipient, 1, 1,
                         payload)
        return tx.signed(lambda digest: scheme.sign(sender.secret_key, digest))

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return list(pool.map(sign, range(count), chunksize=256))
