"""The signature-verifier interface the core sees, and the cache in front of it.

The core never calls a signature library. It is handed a `SignatureVerifier` (the node
backs it with the scheme registry: `qmemo.crypto.verifier.RegistryVerifier`) and wraps
it in a `VerifyCache`, which the node shares between admission and block validation:
a transaction whose signature verified when it was admitted is not verified again
when its block is validated - at ~50 us per Falcon-512 verify, that halves the work
per transaction on every node that saw it first in its mempool.

Why a hit is sound: the cache is keyed by the transaction id, and the id is a digest
of the transaction's full encoding (scheme, public key, every signed field and the
signature), so equal ids mean the very inputs that verified before. Only successes
are remembered, so nothing an attacker sends can make a bad signature pass, and a
flood of bad ones cannot evict good ones.

Bounded: at most `capacity` ids, the oldest dropped first. Thread-safe: the node
verifies from a pool of threads; bookkeeping is under a lock, the verification itself
is not (liboqs calls release the GIL and run in parallel).

Pure: no clock, no I/O; `map_fn` (builtin `map`, or an executor's `map`) is how a
caller spreads cache misses over threads.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Protocol

from qmemo.core.transaction import Transaction
from qmemo.errors import Misuse

DEFAULT_CAPACITY = 1 << 18     # 262,144 ids: five full mempools; ~40 MB at most (~150 B per id)


class SignatureVerifier(Protocol):
    """Verifies one signature; returns False (never raises) for anything invalid."""

    def verify(self, scheme_id: int, public_key: bytes, message: bytes, signature: bytes) -> bool: ...


class BatchVerifier(SignatureVerifier, Protocol):
    """A verifier that can also check many signatures of one scheme in one call."""

    def verify_many(self, scheme_id: int, items: Sequence[tuple[bytes, bytes, bytes]]) -> list[bool]: ...


class VerifyCache:
    """A `SignatureVerifier` that remembers which transactions verified, and counts."""

    def __init__(self, inner: SignatureVerifier, capacity: int = DEFAULT_CAPACITY,
                 map_fn: Callable[..., Iterator[bool]] = map) -> None:
        if capacity < 0:
            # No setting reaches this: a negative capacity is our bug, not a user's value (500).
            raise Misuse(f"the verify cache capacity must be >= 0, got {capacity}", code="bad_capacity")
        self._inner = inner
        self._capacity = capacity
        self._map = map_fn
        self._verified: OrderedDict[bytes, None] = OrderedDict()   # the first key is the oldest
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def verify(self, scheme_id: int, public_key: bytes, message: bytes, signature: bytes) -> bool:
        """Uncached pass-through, for signatures that are checked once (block headers)."""
        return self._inner.verify(scheme_id, public_key, message, signature)

    def verify_transaction(self, tx: Transaction) -> bool:
        """Is `tx`'s signature valid under its public key? Cached by transaction id."""
        if tx.id in self._verified:
            with self._lock:
                self.hits += 1
            return True
        with self._lock:
            self.misses += 1
        return self._check(tx)

    def verify_transactions(self, transactions: Sequence[Transaction]) -> list[bool]:
        """`verify_transaction` for each, with the misses spread by `map_fn`.

        An inner verifier with `verify_many(scheme_id, items)` (a `BatchVerifier`) gets
        the misses of each scheme in one call, so it can verify them in one native call.
        """
        results = [True] * len(transactions)
        missed = [position for position, tx in enumerate(transactions) if tx.id not in self._verified]
        with self._lock:
            self.hits += len(transactions) - len(missed)
            self.misses += len(missed)
        verify_many = getattr(self._inner, "verify_many", None)
        if verify_many is None:
            for position, ok in zip(missed, self._map(self._check, [transactions[p] for p in missed]), strict=True):
                results[position] = ok
            return results
        by_scheme: dict[int, list[int]] = {}
        for position in missed:
            by_scheme.setdefault(transactions[position].scheme_id, []).append(position)
        for scheme_id, positions in by_scheme.items():
            batch = [transactions[p] for p in positions]
            oks = verify_many(scheme_id, [(tx.public_key, tx.signing_digest, tx.signature) for tx in batch])
            if len(oks) != len(batch):   # fail closed: a missing answer is never "valid"
                oks = [False] * len(batch)
            self._remember([tx.id for tx, ok in zip(batch, oks) if ok is True])
            for position, ok in zip(positions, oks):
                results[position] = ok is True
        return results

    def unknown(self, transactions: Sequence[Transaction]) -> list[int]:
        """The positions of the transactions whose ids are not cached (no lock: a lookup)."""
        verified = self._verified
        return [position for position, tx in enumerate(transactions) if tx.id not in verified]

    def count(self, hits: int, misses: int) -> None:
        """Count lookups answered elsewhere (the node's admission kernel checks `in` itself)."""
        with self._lock:
            self.hits += hits
            self.misses += misses

    def remember(self, tx_ids: list[bytes]) -> None:
        """Ids whose signatures a caller verified itself (the admission kernel, through the
        same registry verifiers): their block's validation is then a hit, as if they had
        been verified here. Only for ids that verified: a failure is never remembered."""
        self._remember(tx_ids)

    def forget(self, tx_ids: Iterable[bytes]) -> None:
        """Drop ids that will not be checked again (e.g. once their block is committed)."""
        with self._lock:
            for tx_id in tx_ids:
                self._verified.pop(tx_id, None)

    def __len__(self) -> int:
        return len(self._verified)

    def __contains__(self, tx_id: bytes) -> bool:
        return tx_id in self._verified

    def _check(self, tx: Transaction) -> bool:
        ok = self._inner.verify(tx.scheme_id, tx.public_key, tx.signing_digest, tx.signature)
        if ok:
            self._remember([tx.id])
        return ok

    def _remember(self, tx_ids: list[bytes]) -> None:
        """Add verified ids, dropping the oldest past capacity (OrderedDict: O(1) each)."""
        if not self._capacity or not tx_ids:
            return
        with self._lock:
            verified = self._verified
            for tx_id in tx_ids:
                verified[tx_id] = None
            while len(verified) > self._capacity:
                verified.popitem(last=False)
