"""The signature cache: a signature verified once is not verified again; only successes
are remembered; it is bounded, counts hits and misses, and is safe across threads."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from qmemo.core.transaction import Transaction
from qmemo.core.verify_cache import VerifyCache
from qmemo.crypto.verifier import RegistryVerifier
from qmemo.errors import Misuse
from tests.unit.chain_kit import Devnet


class CountingVerifier:
    """Accepts signatures equal to b"ok"; counts every call."""

    def __init__(self) -> None:
        self.calls = 0

    def verify(self, scheme_id: int, public_key: bytes, message: bytes, signature: bytes) -> bool:
        self.calls += 1
        return signature == b"ok"


def tx(nonce: int, signature: bytes = b"ok") -> Transaction:
    return Transaction(1, 1, b"pk", nonce, bytes(32), 1, 1, b"", signature)


def test_second_verification_is_a_hit_without_calling_the_verifier():
    inner = CountingVerifier()
    cache = VerifyCache(inner)
    assert cache.verify_transaction(tx(0)) and cache.verify_transaction(tx(0))
    assert (inner.calls, cache.hits, cache.misses) == (1, 1, 1)


def test_failures_are_not_remembered():
    inner = CountingVerifier()
    cache = VerifyCache(inner)
    bad = tx(0, b"bad")
    assert not cache.verify_transaction(bad) and not cache.verify_transaction(bad)
    assert (inner.calls, cache.misses, len(cache)) == (2, 2, 0)


def test_same_fields_with_another_signature_is_a_miss():
    cache = VerifyCache(CountingVerifier())
    cache.verify_transaction(tx(0))
    assert not cache.verify_transaction(tx(0, b"bad"))


def test_capacity_bounds_the_cache_dropping_the_oldest():
    cache = VerifyCache(CountingVerifier(), capacity=2)
    for nonce in range(3):
        cache.verify_transaction(tx(nonce))
    assert len(cache) == 2 and tx(0).id not in cache and tx(2).id in cache


def test_capacity_zero_remembers_nothing():
    inner = CountingVerifier()
    cache = VerifyCache(inner, capacity=0)
    cache.verify_transaction(tx(0))
    cache.verify_transaction(tx(0))
    assert inner.calls == 2


def test_forget_drops_ids():
    cache = VerifyCache(CountingVerifier())
    cache.verify_transaction(tx(0))
    cache.forget([tx(0).id, tx(1).id])
    assert len(cache) == 0


def test_batch_verifies_only_the_misses_through_map_fn():
    inner = CountingVerifier()
    mapped: list[int] = []

    def recording_map(fn, items):
        mapped.append(len(items))
        return map(fn, items)

    cache = VerifyCache(inner, map_fn=recording_map)
    cache.verify_transaction(tx(0))
    assert cache.verify_transactions([tx(0), tx(1), tx(2, b"bad")]) == [True, True, False]
    assert mapped == [2] and inner.calls == 3 and (cache.hits, cache.misses) == (1, 3)


def test_header_signatures_pass_through_uncached():
    inner = CountingVerifier()
    cache = VerifyCache(inner)
    assert cache.verify(1, b"pk", b"m", b"ok") and cache.verify(1, b"pk", b"m", b"ok")
    assert inner.calls == 2 and len(cache) == 0


def test_threads_sharing_the_cache_count_every_lookup():
    cache = VerifyCache(CountingVerifier(), capacity=500)
    txs = [tx(n) for n in range(1000)]
    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(cache.verify_transaction, txs * 3))
    assert cache.hits + cache.misses == 3000 and len(cache) == 500


def test_real_falcon_signatures_through_the_registry():
    net = Devnet()
    cache = VerifyCache(RegistryVerifier())
    good = net.transfer(net.alice, net.bob)
    assert cache.verify_transaction(good)
    assert not cache.verify_transaction(net.transfer(net.alice, net.bob, signed_by=net.mallory))
    assert good.id in cache and len(cache) == 1


def test_registry_verifier_says_false_for_an_unknown_scheme():
    assert RegistryVerifier().verify(99, b"pk", b"m", b"sig") is False


def test_negative_capacity_is_refused_as_our_misuse():
    with pytest.raises(Misuse) as misuse:      # no setting reaches it: a 500, not a user's 400
        VerifyCache(CountingVerifier(), capacity=-1)
    assert (misuse.value.code, misuse.value.http_status) == ("bad_capacity", 500)


class _BatchCounting:
    """A batch-capable verifier that records its calls and trusts a set of good ids."""

    def __init__(self, good_signatures: set[bytes]) -> None:
        self.good = good_signatures
        self.batches: list[tuple[int, int]] = []

    def verify(self, scheme_id, public_key, message, signature):
        return signature in self.good

    def verify_many(self, scheme_id, items):
        self.batches.append((scheme_id, len(items)))
        return [signature in self.good for _, _, signature in items]


def _tx(scheme_id: int, nonce: int, signature: bytes):
    from qmemo.core.transaction import Transaction

    return Transaction(1, scheme_id, b"k" * 32, nonce, b"r" * 32, 1, 1, b"", signature)


def test_batch_verifier_gets_each_schemes_misses_in_one_call_and_only_successes_are_cached():
    from qmemo.core.verify_cache import VerifyCache

    txs = [_tx(1, 0, b"good0"), _tx(100, 1, b"good1"), _tx(1, 2, b"bad"), _tx(1, 3, b"good3")]
    inner = _BatchCounting({b"good0", b"good1", b"good3"})
    cache = VerifyCache(inner)
    assert cache.verify_transactions(txs) == [True, True, False, True]
    assert sorted(inner.batches) == [(1, 3), (100, 1)]
    assert (cache.hits, cache.misses) == (0, 4)
    inner.batches.clear()
    assert cache.verify_transactions(txs) == [True, True, False, True]
    assert inner.batches == [(1, 1)]            # only the bad one is checked again
    assert (cache.hits, cache.misses) == (3, 5)


def test_cache_drops_the_oldest_id_past_capacity_in_batches_too():
    from qmemo.core.verify_cache import VerifyCache

    txs = [_tx(1, n, b"ok") for n in range(5)]
    cache = VerifyCache(_BatchCounting({b"ok"}), capacity=3)
    cache.verify_transactions(txs)
    assert len(cache) == 3
    assert txs[0].id not in cache and txs[4].id in cache


def test_a_batch_verifier_that_answers_short_fails_closed():
    from qmemo.core.verify_cache import VerifyCache

    class Short(_BatchCounting):
        def verify_many(self, scheme_id, items):
            return []

    txs = [_tx(1, n, b"good") for n in range(3)]
    cache = VerifyCache(Short({b"good"}))
    assert cache.verify_transactions(txs) == [False, False, False]
    assert len(cache) == 0


def test_verdicts_reached_elsewhere_are_remembered_and_counted():
    # The node's admission kernel verifies through the same registry verifiers and hands
    # its successes here, so the block that carries them is a hit.
    inner = CountingVerifier()
    cache = VerifyCache(inner)
    txs = [tx(0), tx(1), tx(2)]
    assert cache.unknown(txs) == [0, 1, 2]
    cache.remember([txs[0].id, txs[2].id])
    cache.count(hits=0, misses=3)
    assert cache.unknown(txs) == [1] and txs[2].id in cache
    assert cache.verify_transactions(txs) == [True, True, True] and inner.calls == 1
    assert (cache.hits, cache.misses) == (2, 4)
