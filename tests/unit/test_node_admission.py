"""The node's admission room built directly (qmemo.node.admission.Admission over a real ledger,
the admission kernel and a VerifyPool with and without threads): what it answers, counts,
relays and hands the journal, per batch; held transactions released and expired on the
node's own clock."""

from __future__ import annotations

import asyncio

import pytest

from qmemo.errors import DecodeError, TooLarge
from qmemo.frames import decode_frames, encode_frames
from qmemo.node.admission import Admission, frame_items
from qmemo.node.ledger import RELAY_ROOM, PoolLimits, new_ledger
from qmemo.node.metrics import NodeMetrics, VerifyMetrics
from qmemo.node.verify_pool import VerifyPool
from tests.unit.ledger_kit import SMALL, address_of, ed_keys, genesis, sign_tx


class Room:
    """An Admission with everything it talks to, the relay and the clock recorded."""

    def __init__(self, threads: int, limits: PoolLimits = SMALL) -> None:
        from qmemo.crypto.admit_kernel import AdmitKernel
        self.genesis = genesis()
        self.ledger = new_ledger(self.genesis, limits)
        for address, balance in self.genesis.balances:
            self.ledger.set_account(address, balance, 0)
        self.metrics = NodeMetrics(VerifyMetrics(threads=threads))
        kernel = AdmitKernel(self.genesis.chain_id, ["Ed25519"], verifier="liboqs")
        self.pool = VerifyPool(threads, self.metrics.verify, kernel, self.ledger, verifier="fast")
        self.relayed: list[bytes] = []
        self.now = 100.0
        self.admission = Admission(self.genesis, self.ledger, kernel, self.pool, self.metrics, limits,
                                   lambda frames, count: self.relayed.extend(decode_frames(frames, count)),
                                   monotonic=lambda: self.now)

    def admit(self, encodings: list[bytes], *, relay: bool = True, relayed: bool = False):
        batch = self.admission.decode(encode_frames(encodings), 100, relayed)
        return asyncio.run(self.admission.admit(batch, relay=relay))


@pytest.mark.parametrize("threads", [0, 2])
def test_a_batch_is_answered_counted_relayed_and_journaled(threads):
    room = Room(threads)
    alice, bob = ed_keys()[3], ed_keys()[4]
    good = [sign_tx(alice, n, address_of(bob)) for n in range(3)]
    forged = sign_tx(bob, 0, address_of(alice))
    forged_bytes = forged.encoded[:-1] + bytes([forged.encoded[-1] ^ 1])
    admitted = room.admit([tx.encoded for tx in good] + [good[0].encoded, forged_bytes, b"\x01"])
    assert admitted.counts() == {"accepted": 3, "duplicate": 1, "rejected": 2}
    assert [o.status for o in admitted.outcomes()] == ["accepted"] * 3 + ["duplicate", "rejected", "rejected"]
    assert {position: error.code for position, error in admitted.errors().items()} == {4: "bad_signature",
                                                                                       5: "truncated"}
    assert decode_frames(admitted.journal_frames, admitted.journal_count) == [tx.encoded for tx in good]
    assert room.relayed == [tx.encoded for tx in good]
    metrics = room.metrics
    assert (metrics.tx_received, metrics.tx_accepted, metrics.tx_duplicate, dict(metrics.tx_rejected)) == \
        (6, 3, 1, {"bad_signature": 1, "truncated": 1})
    assert metrics.verify.count["admission"] == 4 and metrics.verify.cache_misses == 4
    room.pool.close()


def test_a_peers_batch_is_not_relayed_and_its_answer_is_the_post_txs_document():
    room = Room(1)
    alice, bob = ed_keys()[3], ed_keys()[4]
    admitted = room.admit([sign_tx(alice, 0, address_of(bob)).encoded, sign_tx(alice, 0, address_of(bob), fee=0).encoded],
                          relay=False)
    assert room.relayed == []
    import orjson
    answer = orjson.loads(admitted.answer_json())
    assert answer["accepted"] == 1 and answer["rejected"] == 1 and answer["duplicate"] == 0
    assert answer["results"][1] == {"id": admitted.batch.tx_id(1).hex(), "status": "rejected", "code": "fee_too_low",
                                    "detail": "fee 0, this chain's minimum is 1"}
    room.pool.close()


def test_a_clients_batch_fills_the_pool_to_its_cap_and_a_peers_relay_to_twice_that():
    """A peer's door judged its clients against its own pool: its relay still gets in here
    past this pool's cap, up to RELAY_ROOM times it; a client's batch stops at the cap."""
    cap = 4
    room = Room(1, PoolLimits(max_txs=cap, max_bytes=1 << 20, max_per_sender=100))
    alice, bob = ed_keys()[3], ed_keys()[4]
    txs = [sign_tx(alice, n, address_of(bob)).encoded for n in range(RELAY_ROOM * cap + 1)]
    assert RELAY_ROOM == 2
    first = room.admit(txs[:cap + 1])                                  # a client's: the cap and one past it
    assert [o.status for o in first.outcomes()] == ["accepted"] * cap + ["rejected"]
    assert first.errors()[cap].code == "mempool_full"
    assert room.admission.is_full() and not room.admission.is_full(relayed=True)
    relayed = room.admit(txs[cap:], relay=False, relayed=True)           # a peer's relay of the rest
    assert [o.status for o in relayed.outcomes()] == ["accepted"] * cap + ["rejected"]
    assert relayed.errors()[cap].code == "mempool_full"
    assert room.admission.is_full(relayed=True) and room.admission.pending_count() == RELAY_ROOM * cap
    room.pool.close()


def test_held_transactions_join_when_the_gap_fills_and_expire_on_the_nodes_clock():
    room = Room(1)
    alice, bob = ed_keys()[3], ed_keys()[4]
    to = address_of(bob)
    ahead = [sign_tx(alice, n, to) for n in (1, 2)]
    room.admit([tx.encoded for tx in ahead])
    assert [room.admission.pending_status(tx.id) for tx in ahead] == ["held", "held"]
    assert room.relayed == []                       # held: relayed when they join the pool
    first = sign_tx(alice, 0, to)
    room.admit([first.encoded])
    assert [room.admission.pending_status(tx.id) for tx in ahead] == ["pending", "pending"]
    assert room.relayed == [first.encoded] + [tx.encoded for tx in ahead]
    stranded = sign_tx(ed_keys()[5], 3, to)
    room.admit([stranded.encoded])
    room.now += SMALL.held_ttl_s + 1
    room.admission.expire_held()
    assert room.admission.pending_status(stranded.id) == "evicted:nonce_gap_timeout"
    assert room.metrics.tx_evicted == {"nonce_gap_timeout": 1}
    room.pool.close()


def test_a_broken_framing_is_refused_before_anything_is_counted():
    room = Room(1)
    with pytest.raises(DecodeError) as truncated:
        room.admission.decode(b"\x09\x00\x00\x00abc", 100)
    assert truncated.value.code == "truncated"
    with pytest.raises(TooLarge):
        room.admission.decode(encode_frames([b"x"] * 3), 2)
    assert room.metrics.tx_received == 0
    room.pool.close()


def test_a_json_batch_is_framed_with_its_broken_items_kept_aside():
    tx = sign_tx(ed_keys()[3], 0, address_of(ed_keys()[4]))
    error = DecodeError("broken", code="malformed")
    body, positions, failed = frame_items([error, tx, tx.encoded])
    assert decode_frames(body, 2) == [tx.encoded, tx.encoded] and positions == [1, 2] and failed == {0: error}


class CommitSpy:
    """The ledger with its `commit` calls' `relay` argument recorded."""

    def __init__(self, ledger) -> None:
        self.ledger = ledger
        self.relay_args: list[bool] = []

    def commit(self, batch, now, relay):
        self.relay_args.append(relay)
        return self.ledger.commit(batch, now, relay)

    def __getattr__(self, name):
        return getattr(self.ledger, name)


def test_a_node_without_peers_builds_no_relay_buffers():
    """No relay (a node without peers): a client's batch is committed without the relay
    frames the ledger would copy for the peers; with one, it asks for them."""
    for relay, expected in ((None, [False]), (lambda frames, count: None, [True])):
        room = Room(0)
        spy = CommitSpy(room.ledger)
        room.admission = Admission(room.genesis, spy, room.admission.kernel, room.pool, room.metrics, SMALL, relay)
        alice, bob = ed_keys()[3], ed_keys()[4]
        admitted = room.admit([sign_tx(alice, 0, address_of(bob)).encoded], relay=True)
        assert admitted.counts()["accepted"] == 1
        assert spy.relay_args == expected
