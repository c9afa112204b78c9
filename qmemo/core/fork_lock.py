"""Producer locks: a validator that left a branch it built on does not build on another
one until that one is final above the fork. A pure rule; the node's chain keeps the locks.

Why (docs/protocol.md "Finality"): a block is final once blocks from a strict majority
of validators sit at or above it. Two conflicting blocks can then both be final only if
some validator has blocks on both branches above their fork - a validator that built on
one branch, switched (the fork rule let it: the other branch was longer, or earlier) and
built on the other. Under overload that happens without the rule: a late primary's block
and a fallback's both exist at one height, validators build on one, switch to the other
and build there too, and two nodes finalize different blocks; neither can undo its own,
so one node is left on a dead branch for good (docs/protocol.md, section 8, has the
overloaded runs before and after the rule).

The rule: when a fork switch undoes a block this validator produced, it is *locked* at
the fork height F (the highest block both branches share). While locked it produces
nothing, unless the branch it is on now has a final block above F - then a majority of
validators has built on this side already, and the side it left can never gather a
majority that does not include one of them building on both sides, which locked
validators do not do. Its own block coming back onto the chain (a switch back) ends the
lock too. If every validator follows it, no two conflicting blocks are ever both final
(an argument over the first validator to build on both sides: docs/protocol.md).

Liveness: if several validators each produced their own block at one height and all
switched to the same one, none of them may build on it, and it never gets a majority.
So a lock also ends after `expiry_ms` (the node sets several full rounds of producer
turns): safety then rests on every block reaching every validator within that time,
which is the assumption the producer schedule makes anyway. This is still not BFT: a
validator that ignores the rule (a faulty or malicious one) breaks the guarantee; votes
and locking on signed messages (Tendermint, Casper FFG) are what would close that.

Nothing here reads a clock or a store: heights, hashes and times come in as arguments.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

# Full rounds of producer turns (every validator's fallback window once) a lock binds at
# most: long enough to outlast a node unheard for a minute past saturation (docs/protocol.md,
# section 8, has the run); ten rounds with 3 validators and 2 s turns is 62 s.
LOCK_ROUNDS = 10


@dataclass(frozen=True, slots=True)
class ProducerLock:
    """Our block at `height` (`block_hash`) was undone by a switch at `fork_height`, at `since_ms`."""

    height: int
    block_hash: bytes
    fork_height: int
    since_ms: int


def lock_expiry_ms(validator_count: int, producer_timeout_ms: int, block_interval_ms: int,
                   rounds: int = LOCK_ROUNDS) -> int:
    """How long a lock binds at most: one block interval and `rounds` full rounds of turns."""
    return block_interval_ms + rounds * validator_count * producer_timeout_ms


def lock_for(height: int, block_hash: bytes, fork_height: int, now_ms: int) -> ProducerLock:
    """The lock a switch at `fork_height` that undid our block (`height`, `block_hash`) sets."""
    if fork_height >= height:
        raise ValueError(f"a switch at height {fork_height} does not undo a block at height {height}")
    return ProducerLock(height, block_hash, fork_height, now_ms)


def still_binding(lock: ProducerLock, *, final_height: int, hash_at: Callable[[int], bytes | None],
                  now_ms: int, expiry_ms: int) -> bool:
    """Does `lock` still forbid producing on the current chain?

    No once the chain has a final block above the fork (`final_height` > fork height: a
    majority built on this side), once our block is on the chain again (`hash_at` gives
    the current chain's hash at a height), or once `expiry_ms` have passed since it was set."""
    if final_height > lock.fork_height:
        return False
    if hash_at(lock.height) == lock.block_hash:
        return False
    return now_ms - lock.since_ms < expiry_ms


def binding_locks(locks: Iterable[ProducerLock], *, final_height: int, hash_at: Callable[[int], bytes | None],
                  now_ms: int, expiry_ms: int) -> list[ProducerLock]:
    """The locks of `locks` that still bind (`still_binding`); an empty list: free to produce."""
    return [lock for lock in locks
            if still_binding(lock, final_height=final_height, hash_at=hash_at, now_ms=now_ms, expiry_ms=expiry_ms)]
