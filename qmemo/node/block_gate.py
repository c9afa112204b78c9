"""The gate in front of a pushed block: its header is judged before its body is decoded.

Decoding a block costs ~7 us per transaction of event loop, while its header says almost
everything that can make it worthless: which chain, which height, who signed it and when,
how many transactions it may carry. So a block a peer pushes goes through, on its header
alone and in this order:
1. the form (version, chain id) and the declared size (`tx_count` within the genesis
   limit, the encoding no longer than that many transactions can fill);
2. the height window: a block we have is "known"; one at or below the final height, or
   whose parent we do not have, is "sync" (we ask our peers) - neither decodes its body;
3. its turn: timestamp, scheduled producer and header signature, against its parent.
Only then does `BlockIntake.receive` decode the body (or `receive_ids` rebuild it from the
pool, for a block pushed as its ids) and run `apply_block` in full.

The rules are the core's (`check_header_form`, `check_declared_size`, `check_header_turn`);
this module only finds the parent they are checked against. Never imports aiohttp.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from qmemo.core.block import BlockHeader
from qmemo.core.genesis import Genesis
from qmemo.core.state import HeaderVerifier, check_declared_size, check_header_form, check_header_turn
from qmemo.errors import DecodeError, InvalidBlock
from qmemo.node.answers import BlockAnswer, BlockStatus
from qmemo.node.chain import Chain
from qmemo.node.metrics import NodeMetrics


def screen_block(encoded: bytes, genesis: Genesis, chain: Chain, verifier: HeaderVerifier, metrics: NodeMetrics,
                 now_ms: Callable[[], int], log: logging.LoggerAdapter) -> BlockAnswer | None:
    """The answer a pushed block gets from its header alone ("known" or "sync"), None if
    its body is worth decoding; DecodeError or InvalidBlock (counted) if the header is bad."""
    try:
        header, header_bytes = BlockHeader.decode_from(encoded)
        check_header_form(genesis, header)
        check_declared_size(genesis, header, header_bytes, len(encoded))
        height = header.height
        if chain.hash_at(height) == header.hash:
            return BlockAnswer(BlockStatus.KNOWN, height)
        parent_timestamp_ms = _parent_timestamp_ms(chain, header)
        if height <= chain.final_height or parent_timestamp_ms is None:
            return BlockAnswer(BlockStatus.SYNC, height)
        check_header_turn(genesis, header, parent_timestamp_ms, verifier, now_ms())
    except (DecodeError, InvalidBlock) as exc:
        metrics.blocks_rejected[exc.code] += 1
        if isinstance(exc, InvalidBlock):   # as intake logs a block that fails in full
            log.warning("rejected block %d from validator %d on its header: %s: %s", header.height,
                        header.producer_index, exc.code, exc.detail)
        raise
    return None


def _parent_timestamp_ms(chain: Chain, header: BlockHeader) -> int | None:
    """The timestamp of the block `header` builds on, if it is one of ours."""
    parent_height = header.height - 1
    if parent_height < 0 or chain.hash_at(parent_height) != header.previous_hash:
        return None
    if parent_height == chain.height:
        return chain.tip_timestamp_ms
    if parent_height == 0:
        return chain.genesis.genesis_time_ms
    parent = chain.recent_block(parent_height)
    if parent is not None:
        return parent.header.timestamp_ms
    stored = chain.store.header(parent_height)
    return stored.timestamp_ms if stored is not None else None
