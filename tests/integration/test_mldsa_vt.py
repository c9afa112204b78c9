"""The ML-DSA verifier with cached keys through Python: liboqs's verdicts, its KATs, the cache.

`MldsaVtVerifier` must answer as the registry's liboqs scheme (`OqsScheme`) for every
input liboqs and FIPS 204 agree on, single and batched, in both implementations (ref and
AVX2); liboqs's known-answer signatures (kat_sig's output, checked against liboqs's
kats.json) must verify; the cache must count, stay bounded and keep only keys that
verified. The inputs on which liboqs's AVX2 verify and FIPS 204 differ are the native
harness's (tests/integration/test_mldsa_vt_native.py): no liboqs call here makes them.
"""

from __future__ import annotations

import re
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from qmemo.crypto import get_scheme
from qmemo.crypto.mldsa_vt import VARIANTS, MldsaVtVerifier, description, implementation, select_implementation
from qmemo.errors import CryptoError, UnknownScheme
from tests.conftest import REPO_ROOT, run_command
from tests.integration.liboqs_kats import kat_entries

@pytest.fixture(params=["ref", "avx2"])
def impl(request):
    """Run the test under each implementation this CPU has, then restore the default."""
    default = implementation()
    try:
        select_implementation(request.param)
    except CryptoError:
        pytest.skip(f"this CPU cannot run the {request.param} code")
    yield request.param
    select_implementation(default)


def mutations(public_key: bytes, message: bytes, signature: bytes, other_key: bytes):
    """The item itself and one mutation per kind: the unit cases of the differential harness."""
    flip = lambda data, i: data[:i] + bytes([data[i] ^ 1]) + data[i + 1:]  # noqa: E731
    yield public_key, message, signature
    yield public_key, message, flip(signature, 0)                     # c~
    yield public_key, message, flip(signature, 100)                   # z
    yield public_key, message, flip(signature, len(signature) - 1)    # hint counts
    yield public_key, message, signature[:-1]                         # truncated
    yield public_key, message, signature + b"\x00"                    # extended
    yield public_key, message, b""                                    # empty
    yield public_key, message + b"x", signature                       # other message
    yield other_key, message, signature                               # other key
    yield public_key[:-1], message, signature                         # short key
    yield public_key + b"\x00", message, signature                    # long key
    yield flip(public_key, 0), message, signature                     # rho
    yield flip(public_key, 40), message, signature                    # t1
    yield bytearray(public_key), message, signature                   # not bytes


@pytest.mark.parametrize("name", VARIANTS)
def test_ml_dsa_verifier_gives_the_registry_verdict_for_every_mutation(name, impl):
    scheme = get_scheme(name, "liboqs")
    verifier = MldsaVtVerifier(name, cache_capacity=8)
    keys = [scheme.keypair() for _ in range(2)]
    items = []
    for length in (0, 1, 64, 136, 1000):
        message = (bytes(range(256)) * 4)[:length]
        items += mutations(keys[0].public_key, message, scheme.sign(keys[0].secret_key, message), keys[1].public_key)
    expected = [scheme.verify(*item) for item in items]
    assert [verifier.verify(*item) for item in items] == expected
    batch_verdicts, durations = verifier.verify_many(items)
    assert batch_verdicts == expected
    assert len(durations) == len(items) and all(d >= 0 for d in durations)
    assert sum(expected) == 5  # exactly the unmutated signatures


@pytest.mark.parametrize("name", VARIANTS)
def test_liboqs_known_answer_signatures_pass_through_the_ml_dsa_verifier(name):
    scheme = get_scheme(name, "liboqs")
    entries = kat_entries(name)  # kat_sig takes seconds: run once, verify under each implementation
    assert len(entries) == 100
    default = implementation()
    try:
        for impl_name in ("ref", "avx2"):
            try:
                select_implementation(impl_name)
            except CryptoError:
                continue  # no AVX2 on this CPU
            verifier = MldsaVtVerifier(name)
            for entry in entries:
                signature = entry["sm"][: len(entry["sm"]) - len(entry["msg"])]   # sm = signature || msg
                assert scheme.verify(entry["pk"], entry["msg"], signature)
                assert verifier.verify(entry["pk"], entry["msg"], signature), (impl_name, entry["msg"].hex())
                tampered = signature[:-100] + bytes([signature[-100] ^ 0x80]) + signature[-99:]
                assert verifier.verify(entry["pk"], entry["msg"], tampered) == \
                    scheme.verify(entry["pk"], entry["msg"], tampered)
            stats = verifier.cache_stats()
            assert (stats.misses, stats.hits) == (100, 100)  # each KAT key: expanded once, then found
    finally:
        select_implementation(default)


def test_key_cache_counts_lookups_stays_bounded_and_keeps_only_keys_that_verified():
    scheme = get_scheme("ML-DSA-44", "liboqs")
    verifier = MldsaVtVerifier("ML-DSA-44", cache_capacity=8)
    keys = [scheme.keypair() for _ in range(12)]
    signed = [(k.public_key, b"m", scheme.sign(k.secret_key, b"m")) for k in keys]
    assert verifier.cache_stats().capacity == 8
    assert not verifier.verify(signed[0][0], b"other", signed[0][2])  # invalid: looked up, not kept
    assert verifier.cache_stats().size == 0
    assert verifier.verify(*signed[0]) and verifier.verify(*signed[0])
    stats = verifier.cache_stats()
    assert (stats.hits, stats.misses, stats.size) == (1, 2, 1)
    for item in signed * 3:
        assert verifier.verify(*item)
    assert verifier.cache_stats().size <= 8


def test_uncached_verifier_verifies_and_reports_an_empty_cache():
    scheme = get_scheme("ML-DSA-65", "liboqs")
    key = scheme.keypair()
    verifier = MldsaVtVerifier("ML-DSA-65", cache_capacity=0)
    assert verifier.verify(key.public_key, b"m", scheme.sign(key.secret_key, b"m"))
    assert verifier.cache_stats().capacity == 0 and verifier.cache_stats().hit_rate is None
    with pytest.raises(CryptoError):
        verifier.kernel_hooks()        # the admission kernel's slot needs a cache (its context)


def test_threads_share_one_verifier_and_its_cache_while_it_evicts():
    # More keys than entries: keys are evicted while other threads verify with them (the
    # reference counts keep an evicted key alive until its last verify ends).
    scheme = get_scheme("ML-DSA-44", "liboqs")
    verifier = MldsaVtVerifier("ML-DSA-44", cache_capacity=8)
    keys = [scheme.keypair() for _ in range(20)]
    items = [(k.public_key, bytes([i]), scheme.sign(k.secret_key, bytes([i]))) for i, k in enumerate(keys)]
    items += [(pk, msg + b"!", sig) for pk, msg, sig in items]
    expected = [i < len(keys) for i in range(len(items))]

    def worker(_: int) -> list[bool]:
        return [verifier.verify(*item) for item in items * 3]

    with ThreadPoolExecutor(max_workers=4) as pool:
        assert all(result == expected * 3 for result in pool.map(worker, range(6)))
    assert verifier.cache_stats().size <= 8


def test_implementation_is_named_overridable_and_unknown_ones_refused():
    assert implementation() in {"avx2", "ref"}
    assert "variable-time (cached expanded key)" in description("ML-DSA-44")
    with pytest.raises(CryptoError):
        select_implementation("neon")
    with pytest.raises(UnknownScheme):
        MldsaVtVerifier("Falcon-512")
    forced = run_command([sys.executable, "-c", "from qmemo.crypto.mldsa_vt import implementation; "
                          "print(implementation())"], env={"QMEMO_MLDSA_IMPL": "ref"})
    assert forced.returncode == 0, forced.stderr
    assert forced.stdout.strip() == "ref"


def test_shared_library_exports_only_its_api():
    library = REPO_ROOT / ".deps" / "native" / "libqmemo_mldsa.so"
    symbols = run_command(["nm", "-D", "--defined-only", str(library)]).stdout.split()
    exported = {s for s in symbols if not re.fullmatch(r"[0-9a-f]+|[A-Za-z]", s)}
    assert exported and all(s.startswith("qmv_") for s in exported), sorted(exported)
