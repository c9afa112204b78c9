"""A shard node's receipts room: the receipts it holds for its producer, and how it checks them.

Cross-shard transfers (qmemo.core.receipts) reach this shard as bundles - one per source
block - that this node pulls from the source shards' nodes (qmemo.node.receipt_transport).
A bundle is admitted to the pool once every receipt rule holds: its headers (source,
signatures, finality; checked once per header, remembered by digest), each receipt's
proof and destination, that none was credited on our chain, and every transaction's
signature - verified again here, in the node's verify pool through the admission
kernel (the native verifier path: one kernel call decodes and hashes a bundle's
transactions, the verify threads check them; the ids that verify join the ledger's
verified set, where a block's receipt check finds them).

The producer takes whole bundles from the pool, oldest first, skipping those whose
receipts our branch already credited (`select`); every validator checks the block's
receipts again by the same rules (qmemo.node.chain.apply_to_ledger), so all credit the
same receipts in the same order. A bundle leaves the pool once every receipt of it is
credited in a final block (`prune`), so a branch switch that undoes a credit finds its
bundle still here.

Never imports aiohttp or knows about HTTP.
"""

from __future__ import annotations

import logging
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from qmemo.core.genesis import Genesis
from qmemo.core.receipts import ReceiptBundle, check_receipts, decode_section
from qmemo.core.transaction import Transaction
from qmemo.crypto.schemes import scheme_by_id
from qmemo.errors import InvalidReceipt, UnknownScheme
from qmemo.frames import encode_frames
from qmemo.node.chain import Chain
from qmemo.node.ledger import native
from qmemo.node.verify_pool import VerifyPool

# Bundles pooled at most before the puller stops asking (back-pressure: a pooled bundle is
# never dropped, or its receipts would be lost - the puller's cursor has moved past them).
MAX_POOLED_BUNDLES = 1024
HEADER_MEMORY = 4096              # header signatures remembered as verified


@dataclass(slots=True)
class ReceiptCounters:
    """What the receipts room did since start (the /metrics `receipts` object)."""

    bundles_pulled: int = 0           # bundles received from source nodes
    receipts_pulled: int = 0
    bundles_admitted: int = 0         # new, valid: into the pool
    bundles_known: int = 0            # already pooled, or every receipt credited already
    rejected: Counter = field(default_factory=Counter)   # by rule code
    credited: int = 0                 # receipts credited by the blocks applied on our chain
    pull_failures: int = 0            # pulls a source node did not answer


@dataclass(slots=True)
class PooledBundle:
    bundle: ReceiptBundle
    encoded: bytes
    receipt_ids: tuple[bytes, ...]


class FinalCredits:
    """The receipts our chain credited in final blocks: what can never be credited again
    (`in`), as opposed to a credit on an undoable block."""

    def __init__(self, chain: Chain) -> None:
        self._credited = chain.credited
        self._unfinal = {rid for entry in chain.recent if entry.block.height > chain.final_height
                         for rid in entry.credited}

    def __contains__(self, receipt_id: object) -> bool:
        return receipt_id in self._credited and receipt_id not in self._unfinal


class NodeReceiptVerifier:
    """The receipt rules' verifier (qmemo.core.receipts.ReceiptVerifier) on a node: header
    signatures through the verify pool, each remembered once verified; transactions from
    the ledger's verified set (filled by `ReceiptRoom.preverify`), any missing one
    verified on the spot through the registry."""

    def __init__(self, pool: VerifyPool, ledger: Any, verifier: str) -> None:
        self._pool = pool
        self._ledger = ledger
        self._verifier = verifier
        self._headers: OrderedDict[bytes, None] = OrderedDict()

    def verify(self, scheme_id: int, public_key: bytes, message: bytes, signature: bytes) -> bool:
        key = public_key[:32] + message + signature
        if key in self._headers:
            return True
        if not self._pool.verify(scheme_id, public_key, message, signature):
            return False
        self._headers[key] = None
        if len(self._headers) > HEADER_MEMORY:
            self._headers.popitem(last=False)
        return True

    def verify_transactions(self, transactions: Sequence[Transaction]) -> list[bool]:
        return [self._ledger.is_verified(tx.id) or self._verify_now(tx) for tx in transactions]

    def _verify_now(self, tx: Transaction) -> bool:
        try:
            valid = scheme_by_id(tx.scheme_id, self._verifier).verify(tx.public_key, tx.signing_digest, tx.signature)
        except UnknownScheme:
            return False
        if valid:
            self._ledger.remember_verified(tx.id)
        return valid


class ReceiptRoom:
    """The pool of verified bundles and their checks, for one shard's node."""

    def __init__(self, genesis: Genesis, chain: Chain, verify_pool: VerifyPool, ledger: Any,
                 log: logging.LoggerAdapter) -> None:
        if genesis.sharding is None:
            raise ValueError("a receipts room is a shard's")
        self.genesis = genesis
        self.sharding = genesis.sharding
        self.chain = chain
        self.verify_pool = verify_pool
        self.ledger = ledger
        self.log = log
        self.verifier = NodeReceiptVerifier(verify_pool, ledger, verify_pool.verifier)
        chain.receipts = self.verifier
        self.counters = ReceiptCounters()
        self._pool: OrderedDict[tuple[int, bytes], PooledBundle] = OrderedDict()

    # --- in ----------------------------------------------------------------------------------

    async def admit(self, encoded_bundles: Sequence[bytes]) -> int:
        """Check pulled bundles and pool the new valid ones; how many were pooled. A bundle
        breaking a rule is dropped and counted by its code (a source node's fault or a
        forgery: logged), never an error for the caller."""
        admitted = 0
        for encoded in encoded_bundles:
            self.counters.bundles_pulled += 1
            try:
                bundle = ReceiptBundle.decode(encoded)
            except Exception as exc:    # DecodeError, or a transaction that does not decode
                self._reject(getattr(exc, "code", "malformed"), f"a bundle that does not decode: {exc}")
                continue
            self.counters.receipts_pulled += len(bundle.entries)
            ids = tuple(bundle.receipt_ids())
            if bundle.key in self._pool or all(rid in FinalCredits(self.chain) for rid in ids):
                self.counters.bundles_known += 1
                continue
            await self.preverify(bundle)
            try:
                # Against the final credits only, taken after the wait: a receipt a block of ours
                # credited that a branch switch may still undo must stay here, ready to be
                # credited again.
                check_receipts(self.sharding, [bundle], FinalCredits(self.chain), self.verifier)
            except InvalidReceipt as exc:
                if exc.code == "receipt_replayed":      # partly credited meanwhile: nothing to add
                    self.counters.bundles_known += 1
                else:
                    self._reject(exc.code, f"chain {bundle.source_chain_id} block {bundle.header.height}: {exc}")
                continue
            self._pool[bundle.key] = PooledBundle(bundle, bytes(encoded), ids)
            self.counters.bundles_admitted += 1
            admitted += 1
        return admitted

    async def preverify_section(self, section: bytes) -> None:
        """A block's receipts verified in the verify pool before the chain lock is taken (as
        its transactions are); the block's own check then finds them verified. A section
        that does not decode is left to the block's rules."""
        try:
            bundles = decode_section(section)
        except Exception:       # DecodeError, or a transaction that does not decode
            return
        for bundle in bundles:
            await self.preverify(bundle)

    async def preverify(self, bundle: ReceiptBundle) -> None:
        """Verify the bundle's transactions in the verify pool (native, off the event loop),
        so the rules find them in the ledger's verified set. A bundle the kernel cannot
        decode as its source chain's is left to the rules, which name what is wrong."""
        frames = encode_frames([entry.tx.encoded for entry in bundle.entries])
        body = native().decode_body(self.verify_pool.kernel.table, bundle.source_chain_id, frames,
                                    len(bundle.entries))
        if body is not None:
            await self.verify_pool.verify_body(body, "receipt")

    def _reject(self, code: str, detail: str) -> None:
        self.counters.rejected[code] += 1
        self.log.warning("refused a receipt bundle: %s: %s", code, detail)

    # --- out, to our producer ------------------------------------------------------------------

    def select(self, max_receipts: int) -> tuple[int, bytes]:
        """The receipts section of our next block: whole pooled bundles, oldest first, none of
        whose receipts our branch credited, up to `max_receipts` receipts. (count, section)."""
        credited = self.chain.credited
        chosen: list[bytes] = []
        count = 0
        for pooled in self._pool.values():
            if any(rid in credited for rid in pooled.receipt_ids):
                continue
            if count + len(pooled.receipt_ids) > max_receipts:
                break
            chosen.append(pooled.encoded)
            count += len(pooled.receipt_ids)
        return count, len(chosen).to_bytes(2, "little") + b"".join(chosen)

    def prune(self) -> None:
        """Forget the bundles every receipt of which is credited in a final block of ours."""
        final = FinalCredits(self.chain)
        done = [key for key, pooled in self._pool.items() if all(rid in final for rid in pooled.receipt_ids)]
        for key in done:
            del self._pool[key]

    # --- reading -------------------------------------------------------------------------------

    @property
    def full(self) -> bool:
        """Enough bundles wait for our blocks: the puller asks for no more until some are credited."""
        return len(self._pool) >= MAX_POOLED_BUNDLES

    @property
    def pooled_receipts(self) -> int:
        return sum(len(pooled.receipt_ids) for pooled in self._pool.values())

    def statuses(self, receipt_ids: Sequence[bytes]) -> list[tuple[str, bool]]:
        """(status, final) of each: "credited" by our branch (final: in a final block),
        "pooled" (verified, waiting for a block of ours) or "unknown"."""
        final = FinalCredits(self.chain)
        pooled = {rid for entry in self._pool.values() for rid in entry.receipt_ids}
        out = []
        for rid in receipt_ids:
            if rid in self.chain.credited:
                out.append(("credited", rid in final))
            else:
                out.append(("pooled" if rid in pooled else "unknown", False))
        return out

    def oldest_source_heights(self) -> dict[int, int]:
        """Per source chain id, the lowest height whose bundle waits here (for the puller's
        restart point)."""
        lowest: dict[int, int] = {}
        for (chain_id, _), pooled in self._pool.items():
            lowest[chain_id] = min(lowest.get(chain_id, pooled.bundle.header.height), pooled.bundle.header.height)
        return lowest
