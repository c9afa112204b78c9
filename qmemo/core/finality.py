"""Finality: when may a block never be undone? A pure rule over the producers of a chain.

A block is final once blocks from a strict majority of the validators - distinct
producers, the block's own producer counted - sit at its height or above it on the
chain (docs/protocol.md, "Finality"). Why a majority of *producers* and not a depth:
with round-robin turns and fallbacks, a node cut off from the others produces every
block itself, so its chain grows as fast as the majority's; a fixed depth let it
"finalize" blocks that the heal then had to replace. Blocks signed by a majority can
only exist where a majority of validators built on them, which an isolated minority
never has. The same count decides between two branches (qmemo.node.chain,
`branch_is_better`), so a branch a majority built on beats one only a minority built
on, whatever their lengths.

Nothing here reads a clock, a store or the network: heights and producer indexes in,
a height out.
"""

from __future__ import annotations

from collections.abc import Iterable


def quorum(validator_count: int) -> int:
    """Distinct producers a block needs at or above it to be final: a strict majority."""
    if validator_count < 1:
        raise ValueError(f"a chain needs at least one validator, got {validator_count}")
    return validator_count // 2 + 1


def final_height(blocks: Iterable[tuple[int, int]], needed: int, *, min_confirmations: int = 1) -> int | None:
    """The highest final height among `blocks`, or None if none of them is final.

    `blocks`: (height, producer_index) of consecutive blocks, ascending, ending at the tip.
    `needed`: distinct producers at or above a block for it to be final (`quorum`).
    `min_confirmations`: a final block also has at least this many blocks at or above it
    (counting itself; 1: no extra depth), for a node configured to wait longer.
    The producer sets only grow going down the chain, so the first block found from the
    tip that has enough is the highest final one.
    """
    ordered = list(blocks)
    if not ordered:
        return None
    tip = ordered[-1][0]
    producers: set[int] = set()
    for height, producer in reversed(ordered):
        producers.add(producer)
        if len(producers) >= needed and tip - height + 1 >= min_confirmations:
            return height
    return None
