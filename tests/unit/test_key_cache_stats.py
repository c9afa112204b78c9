"""The fast Falcon verifiers' key-cache figures: one cache per variant, labelled by variant.

Why: each Falcon variant has its own cache (FastFalconScheme), and /metrics once showed
the capacity summed over all four as if it were the node's one cache. These tests pin
the rule of qmemo.crypto.schemes.key_cache_stats: a named variant gives that cache
alone; without a name, the cache in use, and a sum only when several variants were
used, then named as covering all of them.
"""

from __future__ import annotations

from qmemo.crypto.falcon_vt import DEFAULT_CACHE_CAPACITY
from qmemo.crypto.schemes import get_scheme, key_cache_stats, key_cache_stats_by_scheme

MESSAGE = b"key cache figures"


def _verify_once(name: str) -> None:
    scheme = get_scheme(name, "fast")
    pair = scheme.keypair()
    assert scheme.verify(pair.public_key, MESSAGE, scheme.sign(pair.secret_key, MESSAGE))


def test_a_named_variant_reports_its_own_cache_and_capacity_only():
    _verify_once("Falcon-512")
    stats = key_cache_stats("falcon-512")           # any spelling the registry knows
    assert stats is not None and stats.schemes == ("Falcon-512",)
    assert stats.capacity == DEFAULT_CACHE_CAPACITY  # one cache's, never a sum
    assert stats.hits + stats.misses >= 1


def test_every_variant_cache_is_reported_apart_with_its_own_capacity():
    _verify_once("Falcon-512")
    _verify_once("Falcon-1024")
    by_scheme = key_cache_stats_by_scheme()
    assert {"Falcon-512", "Falcon-1024"} <= set(by_scheme)
    for name, stats in by_scheme.items():
        assert stats.schemes == (name,) and stats.capacity == DEFAULT_CACHE_CAPACITY


def test_figures_over_several_variants_in_use_name_all_of_them():
    _verify_once("Falcon-512")
    _verify_once("Falcon-1024")
    in_use = {name: s for name, s in key_cache_stats_by_scheme().items() if s.hits + s.misses}
    summed = key_cache_stats()
    assert summed is not None and set(summed.schemes) == set(in_use)
    assert summed.capacity == DEFAULT_CACHE_CAPACITY * len(in_use)
    assert summed.hits == sum(s.hits for s in in_use.values())


def test_a_scheme_without_a_fast_verifier_has_no_figures():
    get_scheme("ML-DSA-44", "fast")                  # made, but not a fast Falcon: no key cache
    assert key_cache_stats("ML-DSA-44") is None
