"""The fast verifiers' key-cache figures: one cache per scheme, labelled by scheme.

Why: each Falcon variant and ML-DSA parameter set has its own cache (FastScheme), and
/metrics once showed the capacity summed over all four Falcon variants as if it were the
node's one cache. These tests pin the rule of qmemo.crypto.schemes.key_cache_stats: a
named scheme gives that cache alone; without a name, the family's cache in use, and a
sum only when several were used, then named as covering all of them.
"""

from __future__ import annotations

from qmemo.crypto.falcon_vt import DEFAULT_CACHE_CAPACITY
from qmemo.crypto.mldsa_vt import default_capacity
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
    _verify_once("ML-DSA-87")
    by_scheme = key_cache_stats_by_scheme()
    assert {"Falcon-512", "Falcon-1024", "ML-DSA-87"} <= set(by_scheme)
    for name, stats in by_scheme.items():
        capacity = DEFAULT_CACHE_CAPACITY if name.startswith("Falcon") else default_capacity(name)
        assert stats.schemes == (name,) and stats.capacity == capacity
    assert set(key_cache_stats_by_scheme("ML-DSA")) == {name for name in by_scheme if name.startswith("ML-DSA")}


def test_figures_over_several_variants_in_use_name_all_of_them():
    _verify_once("Falcon-512")
    _verify_once("Falcon-1024")
    in_use = {name: s for name, s in key_cache_stats_by_scheme("Falcon").items() if s.hits + s.misses}
    summed = key_cache_stats()                        # Falcon's, unless another family is asked for
    assert summed is not None and set(summed.schemes) == set(in_use)
    assert summed.capacity == DEFAULT_CACHE_CAPACITY * len(in_use)
    assert summed.hits == sum(s.hits for s in in_use.values())


def test_a_scheme_without_a_fast_verifier_has_no_figures():
    get_scheme("MAYO-1", "fast")                     # made, but liboqs's only: no key cache
    assert key_cache_stats("MAYO-1") is None


def test_an_ml_dsa_cache_stays_within_its_memory_budget():
    # ML-DSA keys are big once expanded (A-hat alone is 16-56 KiB): the default capacity is
    # 4,096 keys only where that fits the budget, fewer for the larger parameter sets.
    from qmemo.crypto.mldsa_vt import DEFAULT_CACHE_BYTES, DEFAULT_CACHE_KEYS, _library

    lib = _library()
    for name in ("ML-DSA-44", "ML-DSA-65", "ML-DSA-87"):
        entry = lib.qmv_entry_bytes(lib.qmv_variant(name.encode()))
        assert default_capacity(name) * entry <= DEFAULT_CACHE_BYTES and default_capacity(name) <= DEFAULT_CACHE_KEYS
    assert default_capacity("ML-DSA-44") == DEFAULT_CACHE_KEYS
