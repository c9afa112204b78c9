"""Workload planning: account affinity, consecutive nonces, batches, and the cache."""

from collections import defaultdict

import pytest

from qmemo.errors import ConfigError
from qmemo.load.workload import Account, PlanShape, assign, cache_key, previous_nonces, signed_batches
from qmemo.net.wire import encode_tx_batch

NODES = ("http://a", "http://b", "http://c")


def accounts(n, start_nonce=0):
    return [Account(bytes([i % 256]) * 8, b"", i.to_bytes(32, "little"), start_nonce + i % 3) for i in range(n)]


@pytest.mark.parametrize("targeting", ["round-robin", "random", "single"])
def test_each_sender_always_reaches_the_same_node_with_consecutive_nonces(targeting):
    funded = accounts(30)
    shape = PlanShape(count=1000, batch_size=7, targets=NODES, targeting=targeting, seed=3)
    senders, batch_targets = assign(shape, funded)
    assert len(senders) == 1000 and len(batch_targets) == -(-1000 // 7)
    nodes_of = defaultdict(set)
    nonces_of = defaultdict(list)
    for i, (account, nonce) in enumerate(senders):
        nodes_of[account].add(batch_targets[i // 7])
        nonces_of[account].append(nonce)
    assert all(len(nodes) == 1 for nodes in nodes_of.values())
    for account, nonces in nonces_of.items():
        first = funded[account].next_nonce
        assert nonces == list(range(first, first + len(nonces)))


def test_round_robin_spreads_batches_over_every_node():
    _, targets = assign(PlanShape(90, 10, NODES, "round-robin", 0), accounts(9))
    assert targets == list(NODES) * 3


def test_single_targeting_uses_one_node_and_every_account():
    senders, targets = assign(PlanShape(40, 10, NODES, "single", 0), accounts(8))
    assert set(targets) == {"http://a"}
    assert {account for account, _ in senders} == set(range(8))


def test_plan_is_reproducible():
    shape = PlanShape(200, 9, NODES, "random", 11)
    assert assign(shape, accounts(12)) == assign(shape, accounts(12))


def test_too_few_accounts_for_the_nodes_is_a_config_error():
    with pytest.raises(ConfigError):
        assign(PlanShape(10, 5, NODES, "round-robin", 0), accounts(2))


def test_unknown_targeting_is_a_config_error():
    with pytest.raises(ConfigError):
        assign(PlanShape(10, 5, NODES, "nearest", 0), accounts(3))


@pytest.mark.parametrize("processes", [False, True])
def test_signing_on_threads_or_processes_gives_the_plan_in_order(monkeypatch, processes):
    from qmemo.core.transaction import Transaction, derive_address
    from qmemo.crypto.schemes import get_scheme
    from qmemo.load import workload

    scheme = get_scheme("Falcon-512")
    keys = [scheme.keypair() for _ in range(3)]
    accounts = [Account(k.public_key, k.secret_key, derive_address(scheme.info.scheme_id, k.public_key), 0)
                for k in keys]
    senders = [(i % 3, i // 3) for i in range(30)]
    monkeypatch.setattr(workload, "PROCESS_SIGNING_MIN", 1 if processes else 10**9)
    monkeypatch.setattr(workload, "SIGN_CHUNK", 1)          # 10-transaction chunks on processes, 1 on threads
    chunks = list(workload.sign_chunks(senders, accounts, scheme="Falcon-512", chain_id=5, fee=2))
    assert [len(chunk_ids) for chunk_ids, _ in chunks] == ([10] * 3 if processes else [1] * 30)
    ids = [tx_id for chunk_ids, _ in chunks for tx_id in chunk_ids]
    encodings = [encoding for _, chunk_encodings in chunks for encoding in chunk_encodings]
    txs = [Transaction.decode(encoding) for encoding in encodings]
    assert [tx.id for tx in txs] == ids and len(set(ids)) == 30
    assert [(tx.public_key, tx.nonce) for tx in txs] == [(keys[a].public_key, n) for a, n in senders]
    assert all(tx.chain_id == 5 and tx.fee == 2 for tx in txs)
    assert all(scheme.verify(tx.public_key, tx.signing_digest, tx.signature) for tx in txs)


def test_the_cache_key_ignores_the_nodes_urls_but_not_how_many_there_are():
    # A soak's devnet gets free ports every run; the signed bytes depend only on the count.
    def key(targets):
        return cache_key(b"g" * 64, "falcon-512", 7, PlanShape(100, 10, targets, "round-robin", 0), accounts(6))
    assert key(("http://a:1", "http://b:2", "http://c:3")) == key(("http://x:7", "http://y:8", "http://z:9"))
    assert key(("http://a:1", "http://b:2", "http://c:3")) != key(("http://a:1", "http://b:2"))


def test_previous_nonces_link_each_transaction_to_its_senders_one_before():
    assert list(previous_nonces([(0, 5), (1, 0), (0, 6), (2, 3), (1, 1), (0, 7)])) == [-1, -1, 0, -1, 1, 2]


# --- signing into framed batches, and the cache ------------------------------------------------

def fake_chunks(count: int, chunk: int) -> list[tuple[list[bytes], list[bytes]]]:
    """A plan's (ids, encodings) chunks without signing: transaction i is i's bytes."""
    out = []
    for start in range(0, count, chunk):
        numbers = range(start, min(start + chunk, count))
        out.append(([n.to_bytes(64, "little") for n in numbers], [b"tx%d" % n * (1 + n % 3) for n in numbers]))
    return out


def iter_chunks(chunks):
    yield from chunks


def framed(shape: PlanShape, targets: list[str]) -> list[tuple[int, int, str, bytes]]:
    chunks = fake_chunks(shape.count, 1)
    encodings = [chunk[1][0] for chunk in chunks]
    return [(first, min(first + shape.batch_size, shape.count), targets[k],
             encode_tx_batch(encodings[first:first + shape.batch_size]))
            for k, first in enumerate(range(0, shape.count, shape.batch_size))]


def as_tuples(batches) -> list[tuple[int, int, str, bytes]]:
    return [(batch.first, batch.last, batch.target, batch.body) for batch in batches]


def test_signed_chunks_are_framed_into_the_plans_batches_whatever_the_chunk_size(tmp_path):
    shape = PlanShape(23, 5, ("a", "b"), "round-robin", 0)
    targets = ["a", "b", "a", "b", "a"]
    for chunk in (1, 4, 7, 23):
        ids, batches, from_cache = signed_batches(None, shape, targets, iter_chunks(fake_chunks(23, chunk)), None)
        assert ids == [n.to_bytes(64, "little") for n in range(23)] and not from_cache
        assert as_tuples(batches) == framed(shape, targets)


def test_signing_reports_its_progress_with_or_without_a_cache(tmp_path):
    shape = PlanShape(23, 5, ("a",), "single", 0)
    for cache in (None, tmp_path / "plan.bin"):
        advanced: list[int] = []
        signed_batches(cache, shape, ["a"] * 5, iter_chunks(fake_chunks(23, 7)), advanced.append)
        assert advanced == [7, 7, 7, 2]


def test_a_cache_record_claiming_gigabytes_is_signed_again_not_read(tmp_path):
    import struct
    shape = PlanShape(3, 5, ("a",), "single", 0)
    cache = tmp_path / "plan.bin"
    cache.write_bytes(b"qmemo-workload/1\n" + struct.pack("<64sI", bytes(64), 0xFFFF_FFF0) + b"x" * 10)
    ids, _, from_cache = signed_batches(cache, shape, ["a"], iter_chunks(fake_chunks(3, 3)), None)
    assert not from_cache and len(ids) == 3


def test_the_cache_gives_back_the_same_plan_and_a_bad_one_is_signed_again(tmp_path):
    shape = PlanShape(23, 5, ("a",), "single", 0)
    targets = ["a"] * 5
    cache = tmp_path / "workloads" / "plan.bin"
    signed = []

    def sign():            # counted once read: a plan served from the cache signs nothing
        signed.append(1)
        yield from fake_chunks(23, 7)
    advanced = []
    first = signed_batches(cache, shape, targets, sign(), advanced.append)
    assert cache.is_file() and not first[2] and sum(advanced) == 23 and len(signed) == 1
    again = signed_batches(cache, shape, targets, sign(), advanced.append)
    assert again[2] and len(signed) == 1 and again[0] == first[0] and as_tuples(again[1]) == as_tuples(first[1])
    assert sum(advanced) == 46
    for spoil in (lambda data: data[:-3], lambda data: data + b"x", lambda data: b"qmemo-workload/0\n" + data[17:]):
        cache.write_bytes(spoil(cache.read_bytes()))
        redone = signed_batches(cache, shape, targets, sign(), None)
        assert not redone[2] and as_tuples(redone[1]) == as_tuples(first[1])
    assert len(signed) == 4 and signed_batches(cache, shape, targets, sign(), None)[2]    # rewritten whole


def test_a_plan_not_signed_to_the_end_leaves_no_cache_file(tmp_path):
    shape = PlanShape(23, 5, ("a",), "single", 0)
    cache = tmp_path / "plan.bin"

    def broken():
        yield fake_chunks(23, 7)[0]
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        signed_batches(cache, shape, ["a"] * 5, broken(), None)
    assert list(tmp_path.iterdir()) == []


def test_the_signers_are_stopped_at_once_when_framing_fails(tmp_path):
    # sign_chunks shuts its pool of signers down when closed: a failure while framing
    # (Ctrl-C, a full disk under the cache) must close it then, not when it is collected.
    shape = PlanShape(23, 5, ("a",), "single", 0)
    stopped = []

    def sign():
        try:
            yield from fake_chunks(23, 7)
        finally:
            stopped.append(1)

    def interrupted(_count):
        raise KeyboardInterrupt
    signing = sign()
    with pytest.raises(KeyboardInterrupt):
        signed_batches(tmp_path / "plan.bin", shape, ["a"] * 5, signing, interrupted)
    assert stopped == [1]
