"""The fast Falcon verifier through Python: liboqs's verdicts, its KATs, the key cache.

`FalconVtVerifier` must answer exactly as the registry's liboqs scheme (`OqsScheme`)
for every input, single and batched, in both PQClean implementations; liboqs's
known-answer signatures (kat_sig's output, checked against liboqs's kats.json) must
verify; the cache must count, stay bounded and keep only keys that verified.
"""

from __future__ import annotations

import re
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from qmemo.crypto import get_scheme
from qmemo.crypto.falcon_vt import (VARIANTS, FalconVtVerifier, decoder, description, implementation,
                                    select_implementation)
from qmemo.errors import CryptoError, UnknownScheme
from tests.conftest import REPO_ROOT, run_command
from tests.integration.liboqs_kats import kat_entries

@pytest.fixture(params=["clean", "avx2"])
def impl(request):
    """Run the test under each PQClean implementation this CPU has, then restore the default."""
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
    yield public_key, message, flip(signature, 0)                     # header byte
    yield public_key, message, flip(signature, 5)                     # nonce
    yield public_key, message, flip(signature, len(signature) - 3)    # s2
    yield public_key, message, signature[:-1]                         # truncated
    yield public_key, message, signature + b"\x00"                    # extended
    yield public_key, message, signature.rstrip(b"\x00")              # padding cut off
    yield public_key, message, b""                                    # empty
    yield public_key, message + b"x", signature                       # other message
    yield other_key, message, signature                               # other key
    yield public_key[:-1], message, signature                         # short key
    yield public_key + b"\x00", message, signature                    # long key
    yield flip(public_key, 0), message, signature                     # key header
    yield bytearray(public_key), message, signature                   # not bytes


@pytest.mark.parametrize("name", VARIANTS)
def test_fast_verifier_gives_the_registry_verdict_for_every_mutation(name, impl):
    scheme = get_scheme(name)
    verifier = FalconVtVerifier(name, cache_capacity=4)
    keys = [scheme.keypair() for _ in range(2)]
    items = []
    for length in (0, 1, 64, 136, 1000):
        message = bytes(range(256)) * 4
        message = message[:length]
        signature = scheme.sign(keys[0].secret_key, message)
        items += mutations(keys[0].public_key, message, signature, keys[1].public_key)
    expected = [scheme.verify(*item) for item in items]
    assert [verifier.verify(*item) for item in items] == expected
    batch_verdicts, durations = verifier.verify_many(items)
    assert batch_verdicts == expected
    assert len(durations) == len(items) and all(d >= 0 for d in durations)
    assert sum(expected) >= 5  # the unmutated signatures at least


def kat_signature(name: str, msg: bytes, sm: bytes) -> bytes:
    """The liboqs signature inside a KAT signed message (kat_sig.c's layouts)."""
    if "padded" in name:
        return sm[: len(sm) - len(msg)]  # signature || msg
    # len (2 bytes, big endian, = 1 + |s2|) || nonce (40) || msg || 0x20+logn || s2
    logn = 9 if name == "Falcon-512" else 10
    body_length = int.from_bytes(sm[:2], "big") - 1
    nonce, header_at = sm[2:42], 42 + len(msg)
    assert sm[42:header_at] == msg and sm[header_at] == 0x20 + logn
    return bytes([0x30 + logn]) + nonce + sm[header_at + 1: header_at + 1 + body_length]


@pytest.mark.parametrize("name", VARIANTS)
def test_liboqs_known_answer_signatures_pass_through_the_fast_verifier(name):
    scheme = get_scheme(name)
    entries = kat_entries(name)  # kat_sig takes seconds: run once, verify under each implementation
    assert len(entries) == 100
    default = implementation()
    try:
        for impl_name in ("clean", "avx2"):
            try:
                select_implementation(impl_name)
            except CryptoError:
                continue  # no AVX2 on this CPU
            verifier = FalconVtVerifier(name)
            for entry in entries:
                signature = kat_signature(name, entry["msg"], entry["sm"])
                assert scheme.verify(entry["pk"], entry["msg"], signature)
                assert verifier.verify(entry["pk"], entry["msg"], signature), (impl_name, entry["msg"].hex())
                tampered = signature[:-1] + bytes([signature[-1] ^ 0x80])
                assert verifier.verify(entry["pk"], entry["msg"], tampered) == \
                    scheme.verify(entry["pk"], entry["msg"], tampered)
            stats = verifier.cache_stats()
            assert (stats.misses, stats.hits) == (100, 100)  # each KAT key: decoded once, then found
    finally:
        select_implementation(default)


def test_key_cache_counts_lookups_stays_bounded_and_keeps_only_keys_that_verified():
    scheme = get_scheme("Falcon-512")
    verifier = FalconVtVerifier("Falcon-512", cache_capacity=4)
    keys = [scheme.keypair() for _ in range(6)]
    signed = [(k.public_key, b"m", scheme.sign(k.secret_key, b"m")) for k in keys]
    assert verifier.cache_stats().capacity == 4
    assert not verifier.verify(signed[0][0], b"other", signed[0][2])  # invalid: looked up, not kept
    assert verifier.cache_stats().size == 0
    assert verifier.verify(*signed[0]) and verifier.verify(*signed[0])
    stats = verifier.cache_stats()
    assert (stats.hits, stats.misses, stats.size) == (1, 2, 1)
    assert stats.hit_rate == pytest.approx(1 / 3)
    for item in signed * 3:
        assert verifier.verify(*item)
    assert verifier.cache_stats().size <= 4


def test_uncached_verifier_verifies_and_reports_an_empty_cache():
    scheme = get_scheme("Falcon-1024")
    key = scheme.keypair()
    verifier = FalconVtVerifier("Falcon-1024", cache_capacity=0)
    assert verifier.verify(key.public_key, b"m", scheme.sign(key.secret_key, b"m"))
    assert verifier.cache_stats().capacity == 0 and verifier.cache_stats().hit_rate is None


def test_threads_share_one_verifier_and_its_cache():
    scheme = get_scheme("Falcon-512")
    verifier = FalconVtVerifier("Falcon-512", cache_capacity=8)
    keys = [scheme.keypair() for _ in range(12)]
    items = [(k.public_key, bytes([i]), scheme.sign(k.secret_key, bytes([i]))) for i, k in enumerate(keys)]
    items += [(pk, msg + b"!", sig) for pk, msg, sig in items]
    expected = [i < len(keys) for i in range(len(items))]

    def worker(_: int) -> list[bool]:
        return [verifier.verify(*item) for item in items * 5]

    with ThreadPoolExecutor(max_workers=4) as pool:
        assert all(result == expected * 5 for result in pool.map(worker, range(8)))
    assert verifier.cache_stats().size <= 8


def test_implementation_is_named_overridable_and_unknown_ones_refused():
    assert implementation() in {"avx2", "clean"}
    assert "variable-time hash-to-point, cached key" in description("Falcon-512")
    with pytest.raises(CryptoError):
        select_implementation("neon")
    with pytest.raises(UnknownScheme):
        FalconVtVerifier("ML-DSA-44")
    forced = run_command([sys.executable, "-c", "from qmemo.crypto.falcon_vt import implementation; "
                          "print(implementation())"], env={"QMEMO_FALCON_IMPL": "clean"})
    assert forced.returncode == 0, forced.stderr
    assert forced.stdout.strip() == "clean"


def test_the_decoder_follows_the_implementation():
    default = implementation()
    try:
        select_implementation("clean")
        assert decoder() == "portable"        # the portable code never gets the BMI2 build
        if default == "avx2":
            select_implementation("avx2")
            assert decoder() in {"bmi2", "portable"}
    finally:
        select_implementation(default)


def test_native_harness_checks_the_decoder_the_library_dispatches():
    # falcon_diff's arithmetic checks take the BMI2 decoder exactly when the library's AVX2
    # implementation dispatches to it (qfv_decoder), never by a CPUID test of their own.
    harness = REPO_ROOT / ".deps" / "native" / "falcon" / "falcon_diff"
    if not harness.is_file():
        pytest.skip("falcon_diff not built (qmemo/crypto/native/falcon_vt.mk tools)")
    out = run_command([str(harness), "20", "2"]).stdout
    default = implementation()
    try:
        select_implementation("avx2")
        bmi2 = decoder() == "bmi2"
    except CryptoError:         # no AVX2 here: only the portable decoder runs
        bmi2 = False
    finally:
        select_implementation(default)
    assert f"decoders: {'portable + bmi2' if bmi2 else 'portable'})" in out


def test_shared_library_exports_only_its_api():
    library = REPO_ROOT / ".deps" / "native" / "libqmemo_falcon.so"
    symbols = run_command(["nm", "-D", "--defined-only", str(library)]).stdout.split()
    exported = {s for s in symbols if not re.fullmatch(r"[0-9a-f]+|[A-Za-z]", s)}
    assert exported and all(s.startswith("qfv_") for s in exported), sorted(exported)
