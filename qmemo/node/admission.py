"""Admission: from transaction bytes to the mempool, cheap checks first, signatures in batches.

For a batch (one request), in order:
1. decode each transaction (DecodeError -> rejected with its code);
2. duplicate? (pending, held, or in flight in another request) -> "duplicate";
3. the chain's form rules (`check_transaction_form`: chain id, scheme, sizes);
4. nonce and balance feasibility against the tip and the mempool (`Mempool.check`);
5. the signatures of every survivor, in one call to the verification pool;
6. `Mempool.add` in input order (it checks again: the pool may have changed while the
   signatures were verified), then relay what a client sent.

Held transactions (the core's mempool only takes a sender's *next* nonce): a transaction
whose nonce is ahead of its sender's next pending nonce by at most `future_nonces` is
verified and held in `FutureQueue` until the gap fills, like Ethereum's "queued" pool.
Requests from one sender can overtake each other (two connections, a relay racing a
client), and a held transaction then joins the mempool as soon as the one before it
does. If the gap does not fill within `future_ttl_s`, it is evicted with reason
`nonce_gap_timeout` (visible in /tx/{id} and the metrics): nothing accepted is dropped
silently. Further ahead than the window: rejected with `nonce_gap`.

Holding is not free (issue 12: 320 never-funded keys once filled the whole queue with
zero-fee transactions): a sender's held transactions must be payable from its balance
together with its pending ones (amount + fee summed over pending + held <= balance, else
`insufficient_balance`), at most `held_per_sender` per sender (`held_sender_limit`) and
`held_max_txs` in all (`held_full`), both 429. With the genesis's minimum fee above zero,
a key nobody funded can hold nothing.

A binary batch (POST /txs, /peer/txs) takes the native path when the admission kernel
(qmemo.crypto.admit_kernel) has a verifier for every transaction scheme of the chain,
in clear phases that per-stage timing can wrap:
  decode+hash  `unframe`: one native call frames, decodes and hashes the whole body
               (ids, signing digests, senders; no signature yet);
  checks       duplicates from the compact records (no object for a duplicate), then a
               `Transaction` built from the kernel's fields and digests for the rest, all
               in one native call (`AdmitResults.transactions`: nothing parsed or hashed
               again; a sender's public key one shared object), and steps 3-4 as above;
  verify       the survivors' records verified in one native call per verify thread
               (`VerifyPool.verify_records`: the node's verifier, its key cache, the
               shared signature cache);
  mempool      step 6, unchanged;
  journal      the accepted transactions' frames, cut from the body in one piece (the
               body itself when all were accepted): the caller appends them.
Every outcome, error code and counter is the Python path's (the kernel's decode is
vector-tested against `Transaction.decode`; its rejections carry that very error).

Costs per transaction on the event loop are kept to a few microseconds: no
per-transaction tasks, futures or log lines.

Never imports aiohttp or knows about HTTP.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from qmemo.core.genesis import Genesis
from qmemo.core.mempool import Mempool
from qmemo.core.state import EMPTY_ACCOUNT, Account, charge, check_transaction_form
from qmemo.core.transaction import Transaction
from qmemo.crypto.admit_kernel import AdmitKernel, AdmitResults
from qmemo.errors import DecodeError, InvalidTransaction, MempoolFull, QmemoError, SetupError, UnknownScheme
from qmemo.frames import decode_frames, encode_frames
from qmemo.node.answers import ACCEPTED, DUPLICATE, REJECTED, Item, TxOutcome
from qmemo.node.block_decode import DecodedCache
from qmemo.node.chain import Chain
from qmemo.node.held import FutureQueue
from qmemo.node.metrics import NodeMetrics
from qmemo.node.stages import DECODE_HASH, MEMPOOL, thread_cpu_ns
from qmemo.node.verify_pool import VerifyPool

EVICTED_MEMORY = 100_000      # how many evicted ids /tx/{id} can still explain
# Ids of recently committed transactions: a copy arriving late (a relay that lost the race
# with the block, a client retrying) is a duplicate, not a "replayed nonce" rejection.
COMMITTED_MEMORY = 100_000


@dataclass(frozen=True, slots=True)
class AdmissionLimits:
    future_nonces: int = 64          # how far past its next pending nonce a sender may send
    future_max_txs: int = 20_000     # held transactions, all senders together
    future_per_sender: int = 64      # held transactions of one sender
    future_ttl_s: float = 30.0


def native_kernel(genesis: Genesis, verifier: str) -> tuple[AdmitKernel | None, str | None]:
    """The admission kernel for this chain with the node's verifier, or None and why not
    (a transaction scheme with no native verifier, e.g. Ed25519; the kernel not built):
    binary batches then take the Python path, which gives the same answers."""
    try:
        return AdmitKernel(genesis.chain_id, [genesis.scheme_name(i) for i in genesis.tx_scheme_ids],
                           verifier=verifier), None
    except (UnknownScheme, SetupError) as exc:
        return None, str(exc)


class Admission:
    """The mempool side of a node: admits transactions and keeps the pool in step with blocks."""

    def __init__(self, genesis: Genesis, chain: Chain, mempool: Mempool, pool: VerifyPool, metrics: NodeMetrics,
                 limits: AdmissionLimits, decoded: DecodedCache, relay: Callable[[Sequence[bytes]], None]) -> None:
        self.genesis = genesis
        self.chain = chain
        self.mempool = mempool
        self.pool = pool
        self.metrics = metrics
        self.limits = limits
        self.future = FutureQueue(limits.future_max_txs, limits.future_per_sender)
        self._relay = relay
        self._inflight: set[bytes] = set()
        self.evicted: OrderedDict[bytes, str] = OrderedDict()
        # OrderedDict, not dict: popping the oldest of a dict with churn rescans its dead
        # slots (O(n) per pop); OrderedDict's linked list makes it O(1).
        self.committed: OrderedDict[bytes, None] = OrderedDict()
        self.decoded = decoded      # shared with block intake: a transaction is decoded once
        self.kernel, self.kernel_missing = native_kernel(genesis, pool.verifier.verifier)
        self._keys: dict[bytes, bytes] = {}     # sender -> its public key, shared by its transactions

    # --- queries ------------------------------------------------------------------------------

    def is_full(self) -> bool:
        limits = self.mempool.limits
        return len(self.mempool) >= limits.max_transactions or self.mempool.size_bytes >= limits.max_bytes

    def pending_nonce(self, address: bytes) -> int:
        return self.chain.account(address).nonce + self.mempool.pending_count(address)

    def pending_status(self, tx_id: bytes) -> str | None:
        """"pending", "queued" (held for a nonce gap), "evicted:<reason>" or None."""
        if tx_id in self.mempool or tx_id in self._inflight:
            return "pending"
        if tx_id in self.future:
            return "queued"
        reason = self.evicted.get(tx_id)
        return f"evicted:{reason}" if reason else None

    def copies(self, tx_ids: Sequence[bytes]) -> tuple[Transaction, ...] | None:
        """The transactions with these ids, in order, from the pending pool (each verified
        at admission), or None if any is not there: what a block a peer pushed as its ids
        is rebuilt from (qmemo.node.intake, `receive_ids`). Not the held queue: a held
        transaction's gap is a nonce the pool lacks, so a block with both is missing one."""
        pending = self.mempool.get
        found: list[Transaction] = []
        for tx_id in tx_ids:
            tx = pending(tx_id)
            if tx is None:
                return None
            found.append(tx)
        return tuple(found)

    def unsettled(self) -> list[Transaction]:
        """Accepted but not yet in a block: the pending pool, then the held queue."""
        return self.mempool.select(len(self.mempool)) + self.future.transactions()

    # --- admitting ------------------------------------------------------------------------------

    async def admit(self, items: Sequence[Item], *, relay: bool) -> list[TxOutcome]:
        """Admit a batch; one outcome per item, in order. `relay`: the batch came from a client,
        so what is accepted goes on to the peers (held transactions go when they join the pool)."""
        metrics = self.metrics
        metrics.tx_received += len(items)
        outcomes: list[TxOutcome | None] = [None] * len(items)
        candidates: list[Transaction] = []
        positions: list[int] = []
        inflight = self._inflight
        stages = metrics.stages     # CPU per phase (qmemo.node.stages); never across an await
        try:
            started = thread_cpu_ns()
            items = self.decoded.decode_items(items)
            started = stages.lap(DECODE_HASH, started, len(items))
            self._precheck(items, outcomes, candidates, positions)
            stages.lap(MEMPOOL, started, len(items))
            valid = await self.pool.verify(candidates, "admission") if candidates else []
            started = thread_cpu_ns()
            accepted = self._add(candidates, positions, valid, outcomes, relay)
            stages.lap(MEMPOOL, started)
        finally:
            inflight.difference_update(tx.id for tx in candidates)
        if accepted:
            self._relay(accepted)
        return outcomes  # type: ignore[return-value]

    def unframe(self, body: bytes, max_count: int) -> AdmitResults | list[bytes]:
        """Phase decode+hash of a binary batch: the kernel's compact records (ids, digests,
        senders; not verified), or the frames' encodings where there is no kernel.
        DecodeError / TooLarge for a broken framing, as `decode_frames`."""
        started = thread_cpu_ns()
        if self.kernel is None:   # decoded later, in `admit`, under the same stage
            return decode_frames(body, max_count, "transaction")
        results = self.kernel.admit(body, max_count, verify=False)
        self.metrics.stages.lap(DECODE_HASH, started, len(results))
        return results

    async def admit_framed(self, batch: AdmitResults | list[bytes], *,
                           relay: bool) -> tuple[list[TxOutcome], bytes, int]:
        """Admit what `unframe` gave; the outcomes, and the accepted transactions as one
        framed buffer and their count (for the journal)."""
        if isinstance(batch, list):
            outcomes = await self.admit(batch, relay=relay)
            accepted = [item for item, outcome in zip(batch, outcomes) if outcome.status == ACCEPTED]
            return outcomes, encode_frames(accepted), len(accepted)
        metrics = self.metrics
        metrics.tx_received += len(batch)
        outcomes: list[TxOutcome | None] = [None] * len(batch)
        candidates: list[Transaction] = []
        positions: list[int] = []
        stages = metrics.stages     # CPU per phase (qmemo.node.stages); never across an await
        try:
            started = thread_cpu_ns()
            items = self._records(batch, outcomes)
            started = stages.lap(DECODE_HASH, started)   # counted once, by `unframe`
            self._precheck(items, outcomes, candidates, positions)
            stages.lap(MEMPOOL, started, len(batch))
            valid = await self.pool.verify_records(self.kernel, batch, positions, candidates, "admission") \
                if candidates else []
            started = thread_cpu_ns()
            accepted = self._add(candidates, positions, valid, outcomes, relay)
            stages.lap(MEMPOOL, started)
        finally:
            self._inflight.difference_update(tx.id for tx in candidates)
        if accepted:
            self._relay(accepted)
        positions = [i for i, outcome in enumerate(outcomes) if outcome.status == ACCEPTED]  # type: ignore[union-attr]
        return outcomes, batch.frames(positions), len(positions)   # type: ignore[return-value]

    def _records(self, results: AdmitResults, outcomes: list[TxOutcome | None]) -> list[Item | None]:
        """The kernel's records as `_precheck`'s items, made in one native call
        (`AdmitResults.transactions`): a duplicate is answered here from its id alone (None:
        decided, no object built), a record that did not decode is `Transaction.decode`'s
        own error, the rest transactions built from the kernel's digests."""
        items: list[Item | None] = []
        append = items.append
        seen = (self._inflight, self.mempool, self.future, self.committed)
        for position, item in enumerate(results.transactions(self._keys, seen)):
            kind = type(item)
            if kind is int:         # its status: did not decode
                append(results.decode_error(position).detached())    # type: ignore[union-attr]
            elif kind is bytes:     # its id: a duplicate
                outcomes[position] = TxOutcome(item, DUPLICATE)     # type: ignore[arg-type]
                append(None)
            else:
                append(item)        # type: ignore[arg-type]
        return items

    def _precheck(self, items: Sequence[Item | None], outcomes: list[TxOutcome | None],
                  candidates: list[Transaction], positions: list[int]) -> None:
        """Steps 1-4: fill `outcomes` for what fails, collect the rest for verification
        (an item None was decided before)."""
        genesis, mempool, future, inflight = self.genesis, self.mempool, self.future, self._inflight
        committed = self.committed
        accounts = self.chain.state.accounts
        window = self.limits.future_nonces
        batch_next: dict[bytes, int] = {}      # a sender's next nonce counting earlier candidates
        batch_cost: dict[bytes, int] = {}      # what a sender's earlier candidates cost
        decode = self.decoded.decode
        for position, item in enumerate(items):
            if item is None:
                continue
            tx = None
            try:
                if type(item) is bytes:
                    tx = decode(item)
                elif isinstance(item, DecodeError):
                    raise item
                else:
                    tx = item
                tx_id = tx.id
                if tx_id in inflight or tx_id in mempool or tx_id in future or tx_id in committed:
                    outcomes[position] = TxOutcome(tx_id, DUPLICATE)
                    continue
                check_transaction_form(genesis, tx)
                sender = tx.sender
                account = accounts.get(sender, EMPTY_ACCOUNT)
                next_pending = account.nonce + mempool.pending_count(sender)
                nonce = tx.nonce
                if nonce == next_pending:
                    mempool.check(tx, account)          # balance, per-sender and pool limits
                elif nonce == batch_next.get(sender) or next_pending < nonce <= next_pending + window:
                    # held or after a candidate: payable with all the sender has pending, held
                    # or earlier in this batch, and room to hold it (checked again in `hold`)
                    spent = mempool.pending_cost(sender) + future.cost(sender) + batch_cost.get(sender, 0)
                    charge(account.balance - spent, nonce, tx)
                    if nonce != batch_next.get(sender):
                        future.check_room(sender)
                else:
                    mempool.check(tx, account)          # raises the rule: replay, conflict or gap
                batch_next[sender] = nonce + 1
                batch_cost[sender] = batch_cost.get(sender, 0) + tx.amount + tx.fee
            except QmemoError as exc:
                # Detached: its traceback holds this frame, whose `outcomes` would hold it back.
                outcomes[position] = TxOutcome(tx.id if tx is not None else None, REJECTED, exc.detached())
                continue
            inflight.add(tx_id)
            candidates.append(tx)
            positions.append(position)

    def _add(self, candidates: list[Transaction], positions: list[int], valid: list[bool],
             outcomes: list[TxOutcome | None], relay: bool) -> list[bytes]:
        """Step 6: signatures known, add to the mempool (or hold) in input order. Returns the
        encodings to relay."""
        future, accounts = self.future, self.chain.state.accounts
        window = self.limits.future_nonces
        now = time.monotonic()
        relayed: list[bytes] = []
        for tx, position, ok in zip(candidates, positions, valid):
            tx_id = tx.id
            if not ok:
                outcomes[position] = TxOutcome(tx_id, REJECTED, InvalidTransaction(
                    "the signature does not verify under the sender's public key", code="bad_signature"))
                continue
            if tx_id in self.committed:      # a block took it while its signature was checked
                outcomes[position] = TxOutcome(tx_id, DUPLICATE)
                continue
            account = accounts.get(tx.sender, EMPTY_ACCOUNT)
            try:
                added = self._pool_add(tx, account)
            except InvalidTransaction as exc:
                if exc.code == "nonce_gap" and tx.nonce - self.pending_nonce(tx.sender) <= window:
                    try:
                        future.hold(tx, now, relay, account.balance - self.mempool.pending_cost(tx.sender))
                    except (InvalidTransaction, MempoolFull) as held_exc:
                        exc = held_exc
                    else:
                        outcomes[position] = TxOutcome(tx_id, ACCEPTED)
                        continue
                outcomes[position] = TxOutcome(tx_id, REJECTED, exc.detached())
                continue
            except MempoolFull as exc:
                outcomes[position] = TxOutcome(tx_id, REJECTED, exc.detached())
                continue
            if not added:
                outcomes[position] = TxOutcome(tx_id, DUPLICATE)
                continue
            outcomes[position] = TxOutcome(tx_id, ACCEPTED)
            if relay:
                relayed.append(tx.encoded)
            if future:
                relayed.extend(self._promote(tx.sender))
        self._count(outcomes)
        return relayed

    def _count(self, outcomes: list[TxOutcome | None]) -> None:
        metrics = self.metrics
        rejected = metrics.tx_rejected
        for outcome in outcomes:
            status = outcome.status   # type: ignore[union-attr]
            if status == ACCEPTED:
                metrics.tx_accepted += 1
            elif status == DUPLICATE:
                metrics.tx_duplicate += 1
            else:
                rejected[outcome.error.code] += 1   # type: ignore[union-attr]

    def _promote(self, sender: bytes) -> list[bytes]:
        """Move the sender's held transactions that are now next into the mempool."""
        relayed: list[bytes] = []
        account = self.chain.account(sender)
        for held in self.future.take_ready(sender, self.pending_nonce(sender)):
            try:
                self._pool_add(held.tx, account)
            except (InvalidTransaction, MempoolFull) as exc:
                self._evict(held.tx.id, exc.code)
                continue
            if held.relay:
                relayed.append(held.tx.encoded)
        return relayed

    # --- keeping the pool in step with the chain -----------------------------------------------

    def block_applied(self, transactions: Sequence[Transaction]) -> None:
        """A block joined the chain: drop what it committed, evict what it made stale,
        release held transactions whose gap it filled."""
        committed = self.committed
        for tx in transactions:
            committed[tx.id] = None
        for _ in range(len(committed) - COMMITTED_MEMORY):
            committed.popitem(last=False)
        for evicted in self.mempool.remove_block(transactions, self.chain.account):
            self._evict(evicted.tx.id, evicted.reason)
        if not self.future:
            return
        relayed: list[bytes] = []
        committed = {tx.id for tx in transactions}
        for sender in {tx.sender for tx in transactions}:
            for held in self.future.remove_below(sender, self.chain.account(sender).nonce):
                if held.tx.id not in committed:
                    self._evict(held.tx.id, "nonce_stale")
            relayed.extend(self._promote(sender))
        if relayed:
            self._relay(relayed)

    def blocks_undone(self, transactions: Sequence[Transaction]) -> None:
        """A fork switch undid blocks: their transactions are pending again (before the
        pending ones of the same senders, whose nonces follow theirs)."""
        undone = list(transactions)
        if not undone:
            return
        for tx in undone:
            self.committed.pop(tx.id, None)
        senders = {tx.sender for tx in undone}
        pending = [tx for tx in self.mempool.select(len(self.mempool)) if tx.sender in senders]
        self.mempool.remove_block(pending, self.chain.account)
        for tx in sorted(undone + pending, key=lambda t: (t.sender, t.nonce)):
            try:
                self._pool_add(tx, self.chain.account(tx.sender))
            except (InvalidTransaction, MempoolFull) as exc:
                self._evict(tx.id, f"reorg_{exc.code}")

    def _pool_add(self, tx: Transaction, account: Account) -> bool:
        """`Mempool.add`, remembering the transaction's bytes (one that came as JSON too)."""
        added = self.mempool.add(tx, account)
        if added:
            self.decoded.remember(tx)
        return added

    def expire_held(self) -> None:
        for held in self.future.expire(time.monotonic() - self.limits.future_ttl_s):
            self._evict(held.tx.id, "nonce_gap_timeout")

    def _evict(self, tx_id: bytes, reason: str) -> None:
        self.metrics.tx_evicted[reason] += 1
        self.evicted[tx_id] = reason
        if len(self.evicted) > EVICTED_MEMORY:
            self.evicted.popitem(last=False)
