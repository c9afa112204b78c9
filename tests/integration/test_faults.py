"""Faults under load, with real `qmemo node` processes: what "accepted", "served" and
"final" promise (docs/api.md, "Durability") must survive SIGKILL and SIGSTOP.

Load is a few hundred transactions per second, posted in small batches; every node is
stopped by PID (`NodeProcess.kill`, SIGKILL) and every wait is a predicate with a
deadline. Each test records what the nodes said before the fault (transactions
answered "accepted", blocks served by `/blocks`) and checks it all after the restart.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest

from qmemo.core.transaction import Transaction
from qmemo.node.journal import JOURNAL_FILE
from tests.integration.nodes import Devnet, ManualClock, Network, NodeProcess, Wallet, make_devnet, running_node

pytestmark = pytest.mark.slow

BATCH_TXS = 15          # per request; one request every ~50 ms: ~300 tx/s
BATCH_PAUSE_S = 0.05
LOAD_S = 4.0            # load before the fault: several 500 ms blocks


@pytest.fixture
def devnet(tmp_path: Path) -> Devnet:
    return make_devnet(tmp_path / "devnet", validators=3, accounts=30)


@dataclass
class Observed:
    """What the nodes promised before the fault."""

    accepted: set[str] = field(default_factory=set)
    rejected: dict[str, str] = field(default_factory=dict)       # id -> code
    served: dict[int, str] = field(default_factory=dict)        # height -> hash, from /blocks
    final: dict[int, str] = field(default_factory=dict)         # height -> hash, served with final=true
    behind: Counter[str] = field(default_factory=Counter)       # node -> transactions it answered 503 `behind` or `busy`

    def look_at_blocks(self, node: NodeProcess) -> None:
        height = max(self.served, default=0) - 5      # the last few again: a branch switch shows
        document = node.try_get(f"/blocks?from={max(1, height)}&limit=100&txs=ids")
        for block in (document or {}).get("blocks", []):
            self.served.setdefault(block["height"], block["hash"])
            if block.get("final"):
                self.final[block["height"]] = block["hash"]


def run_load(targets: list[NodeProcess], transactions: list[Transaction], observed: Observed,
             load_s: float = LOAD_S) -> list[Transaction]:
    """Post `transactions` in batches, round-robin over `targets`, for `load_s`; remember what
    was accepted and which blocks were served meanwhile. The transactions not sent."""
    deadline = time.monotonic() + load_s
    position, request = 0, 0
    while time.monotonic() < deadline and position < len(transactions):
        batch = transactions[position:position + BATCH_TXS]
        position += len(batch)
        node = targets[request % len(targets)]
        request += 1
        answer = node.post_txs(batch)
        if answer.status == 503:
            # Behind its peers, or its pool already holds its next block (docs/api.md): the
            # wallet sends to the next node. A node just resumed has both: the relays that
            # waited in its sockets.
            assert answer.json()["error"] in ("behind", "busy") and int(answer.headers["Retry-After"]) >= 0, \
                answer.body
            observed.behind[node.name] += len(batch)
            node = targets[request % len(targets)]
            answer = node.post_txs(batch)
        assert answer.status == 200, f"{node.name}: {answer.status} {answer.body[:300]!r}"
        for tx, result in zip(batch, answer.json()["results"]):
            if result["status"] == "accepted":
                observed.accepted.add(tx.id.hex())
            elif result["status"] == "rejected":
                observed.rejected[tx.id.hex()] = result["code"]
        if request % 4 == 0:
            observed.look_at_blocks(node)
        time.sleep(BATCH_PAUSE_S)
    return transactions[position:]


def committed_once(net: Network, node: NodeProcess, ids: set[str]) -> bool:
    counts = Counter(net.committed_ids(node))
    return all(counts[tx_id] == 1 for tx_id in ids)


def chain_hashes(node: NodeProcess) -> dict[int, str]:
    """height -> hash of every block `node` serves."""
    hashes: dict[int, str] = {}
    while blocks := node.get(f"/blocks?from={len(hashes) + 1}&limit=100&txs=ids")["blocks"]:
        hashes.update((block["height"], block["hash"]) for block in blocks)
    return hashes


def check_after_restart(net: Network, observed: Observed, what: str) -> None:
    """Every accepted transaction committed exactly once on every node, every served block kept."""
    deadline = time.monotonic() + 30
    while not all(committed_once(net, node, observed.accepted) for node in net.nodes) \
            and time.monotonic() < deadline:
        time.sleep(0.2)
    node = net.nodes[0]
    statuses = Counter(node.get(f"/tx/{tx_id}")["status"] for tx_id in sorted(observed.accepted))
    counts = Counter(net.committed_ids(node))
    twice = [tx_id for tx_id in observed.accepted if counts[tx_id] > 1]
    assert statuses == {"committed": len(observed.accepted)} and not twice, \
        f"{what}: {len(observed.accepted)} accepted, {statuses} ({len(twice)} committed twice)\n{net.logs()}"
    chain = chain_hashes(node)
    lost = {height: hash_ for height, hash_ in observed.served.items() if chain.get(height) != hash_}
    assert not lost, f"{what}: {len(lost)} of {len(observed.served)} served block(s) lost or replaced: {sorted(lost)}"
    print(f"{what}: {len(observed.accepted)} accepted, {statuses['committed']} committed once, "
          f"{len(observed.served)} served blocks ({len(observed.final)} final) all kept")   # the figures, with -s


@pytest.fixture
def transactions(devnet: Devnet) -> list[Transaction]:
    """Enough signed transfers for LOAD_S of load."""
    return Wallet(devnet).transfers(int(LOAD_S / BATCH_PAUSE_S) * BATCH_TXS)


def test_a_killed_producer_loses_no_accepted_transaction(devnet, transactions, tmp_path):
    observed = Observed()
    with Network(devnet, tmp_path) as net:
        net.start()
        victim = net.nodes[0]          # a producer in every third slot; it alone hears the load
        run_load([victim], transactions, observed)
        victim.kill()
        assert observed.accepted and observed.served
        net.start([victim])
        check_after_restart(net, observed, "producer killed")


def test_killing_every_node_loses_nothing_served_final_or_accepted(devnet, transactions, tmp_path):
    observed = Observed()
    with Network(devnet, tmp_path) as net:
        net.start()
        run_load(net.nodes, transactions, observed)
        for node in net.nodes:
            observed.look_at_blocks(node)
        for node in net.nodes:
            node.kill()
        assert observed.accepted and observed.served
        net.start()
        check_after_restart(net, observed, "every node killed")
        chain = chain_hashes(net.nodes[1])
        assert observed.final and all(chain.get(height) == hash_ for height, hash_ in observed.final.items())


PAUSE_S = 10.0          # SIGSTOP: long enough for each of the paused node's slots to pass several times


def test_a_paused_node_lets_the_chain_go_on_and_catches_up_after(devnet, tmp_path):
    """SIGSTOP one validator for PAUSE_S under load: the other two produce (the paused one's
    slots fall to the next validator after producer_timeout_ms), then SIGCONT: it reaches the
    same tip within a bounded time and every accepted transaction is final exactly once."""
    observed = Observed()
    transactions = Wallet(devnet).transfers(int((LOAD_S + PAUSE_S + 2) / BATCH_PAUSE_S) * BATCH_TXS)
    with Network(devnet, tmp_path) as net:
        net.start()
        paused, running = net.nodes[2], net.nodes[:2]
        rest = run_load(net.nodes, transactions, observed, LOAD_S / 2)
        before = running[0].height()
        os.kill(paused.process.pid, signal.SIGSTOP)
        try:
            rest = run_load(running, rest, observed, PAUSE_S)
            during = running[0].height() - before
        finally:
            os.kill(paused.process.pid, signal.SIGCONT)
        resumed = time.monotonic()
        run_load(net.nodes, rest, observed, 2.0)
        # Blocks every 0.5 s, 1 s when the paused node's slot passes: ~13 in PAUSE_S.
        assert during >= PAUSE_S / 2 / 1.0, f"the chain stalled: {during} blocks in {PAUSE_S} s\n{net.logs()}"
        net.wait_until(lambda: len(set(net.tips())) == 1 and all(net.tips()), "the paused node at the same tip",
                       timeout=20)
        caught_up_s = time.monotonic() - resumed
        # Right after SIGCONT the paused node still has its old state: a transaction sent to
        # it then may be refused `nonce_gap` (its sender's last nonces are in blocks it has not
        # seen yet), and that sender's later transactions, accepted by the others, wait for
        # it in their held queues until evicted (`nonce_gap_timeout`). Each such one must be
        # explained: evicted on a node, behind a refused transaction of its own sender.
        by_id = {tx.id.hex(): tx for tx in transactions}
        final = net.wait_until(lambda: settled(net, observed.accepted), "every accepted transaction final or evicted",
                               timeout=60)
        unexplained = []
        for tx_id in observed.accepted - final:
            tx = by_id[tx_id]
            answers = [node.get(f"/tx/{tx_id}") for node in net.nodes]
            refused_before = any(by_id[r].public_key == tx.public_key and by_id[r].nonce < tx.nonce
                                 for r in observed.rejected)
            if not (refused_before and any(a.get("reason") == "nonce_gap_timeout" for a in answers)):
                unexplained.append((tx_id[:16], tx.nonce, [a["status"] for a in answers]))
        assert not unexplained, f"{len(unexplained)} accepted, neither final nor explained: {unexplained[:10]}"
        evicted = len(observed.accepted - final)
        assert committed_once(net, paused, final)
        chain = chain_hashes(paused)
        assert all(chain.get(height) == hash_ for height, hash_ in observed.final.items())
        replaced = sum(chain.get(height) != hash_ for height, hash_ in observed.served.items())
        assert set(observed.behind) <= {paused.name}, f"only the paused node may be behind or busy: {observed.behind}"
        print(f"node paused {PAUSE_S:.0f} s: {during} blocks meanwhile, caught up {caught_up_s:.1f} s after "
              f"SIGCONT; {sum(observed.behind.values())} answered 503 behind or busy by it and sent to another node; "
              f"{len(observed.accepted)} accepted: {len(final)} final once, {evicted} evicted "
              f"(nonce_gap_timeout, behind {len(observed.rejected)} refused nonce_gap); {len(observed.served)} served blocks "
              f"({len(observed.final)} final, all kept; {replaced} not yet final replaced)")


def settled(net: Network, ids: set[str]) -> set[str] | None:
    """The final ones of `ids` once each is final (exactly once in the chain) or evicted on
    some node; None while any is still pending, queued or in a block not yet final."""
    node = net.nodes[0]
    final = {tx_id for tx_id in ids if node.get(f"/tx/{tx_id}").get("final")}
    rest = ids - final
    if any(not any(n.get(f"/tx/{tx_id}")["status"] == "evicted" for n in net.nodes) for tx_id in rest):
        return None
    return final if committed_once(net, node, final) else None


def test_a_relayed_transaction_survives_the_receivers_sigkill(devnet, tmp_path):
    """Two observers (the chain stands still): node-1 hears node-0's client transactions by
    relay, journals them on receipt, and is SIGKILLed: at restart it holds them again."""
    transactions = Wallet(devnet).transfers(40)
    with Network(devnet, tmp_path, count=2, key=devnet.observer_key()) as net:
        net.start()
        sender, receiver = net.nodes
        assert sender.post_txs(transactions).json()["accepted"] == len(transactions)
        journal = receiver.data / JOURNAL_FILE
        # at least one batch entry (u32 length, u32 checksum) of framed encodings (u32 length each)
        journaled_bytes = 8 + sum(4 + len(tx.encoded) for tx in transactions)
        net.wait_until(lambda: journal.exists() and journal.stat().st_size >= journaled_bytes,
                       "node-1 journaled the relayed transactions")
        sender.kill()
        receiver.kill()
        net.start([receiver])
        statuses = Counter(receiver.get(f"/tx/{tx.id.hex()}")["status"] for tx in transactions)
        assert statuses == {"pending": len(transactions)}, f"{statuses}\n{net.logs([receiver])}"
        print(f"relayed then receiver killed: {len(transactions)} relayed, {statuses['pending']} pending again")


async def test_a_fallback_producer_skips_its_turn_while_the_late_primarys_block_is_validated(devnet, tmp_path):
    """Validator 0's block 1 arrives but verifies slowly (held here by a gate); validator 1's
    fallback turn comes meanwhile: it must not produce a competing block 1."""
    genesis_ms = orjson.loads(devnet.genesis.read_bytes())["genesis_time_ms"]
    clock = ManualClock(genesis_ms + 600)              # validator 0's turn for block 1 (slot at +500)
    async with running_node(devnet, tmp_path / "data", devnet.validator_key(1), clock=clock) as node:
        intake, gate = node.intake, asyncio.Event()
        waited = []
        wait_validated = intake.wait_validated

        async def watched_wait() -> None:
            waited.append(True)
            await wait_validated()

        intake.wait_validated = watched_wait
        verify = intake.preverify

        async def slow_preverify(block):
            await gate.wait()
            await verify(block)

        intake.preverify = slow_preverify
        block = devnet.block(height=1, previous_hash=node.genesis.hash, timestamp_ms=genesis_ms + 500, producer=0)
        push = asyncio.create_task(node.receive_block(block.encode()))
        deadline = asyncio.get_running_loop().time() + 10
        while not intake.validating(1):                # its header passed the gate; its body is verifying
            assert asyncio.get_running_loop().time() < deadline and not push.done(), push
            await asyncio.sleep(0.01)
        clock.advance(500)                             # validator 1's fallback window for block 1 opens
        while not waited and node.metrics.blocks_produced == 0:
            assert asyncio.get_running_loop().time() < deadline, "the producer neither waited nor produced"
            await asyncio.sleep(0.05)
        assert node.metrics.blocks_produced == 0 and node.chain.height == 0, "a competing block 1 was produced"
        gate.set()
        assert (await push).status == "accepted"
        assert node.chain.hash_at(1) == block.hash
