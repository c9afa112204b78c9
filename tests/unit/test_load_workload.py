"""Workload planning: account affinity, consecutive nonces, batches, and the cache."""

from collections import defaultdict

import pytest

from qmemo.errors import ConfigError
from qmemo.load.workload import Account, PlanShape, assign, cache_key, previous_nonces

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
    ids, encodings = workload._sign_all(senders, accounts, scheme="Falcon-512", chain_id=5, fee=2, progress=None)
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
