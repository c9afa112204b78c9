"""Every registered scheme: round trip, tamper rejection, malformed input never crashes."""

import pytest

from qmemo.crypto import get_scheme, scheme_by_id, scheme_id_of, scheme_names
from qmemo.crypto.schemes import VERIFIERS, backend_of, key_cache_stats
from qmemo.crypto.selftest import flip_bit, self_test
from qmemo.errors import MalformedKey, UnknownScheme

MESSAGE = bytes(range(256))
FALCON = [name for name in scheme_names() if name.startswith("Falcon")]
ML_DSA = [name for name in scheme_names() if name.startswith("ML-DSA")]
# Every scheme with its default verifier, and the schemes with a second verifier with that one too.
SCHEMES_AND_VERIFIERS = [(name, "fast") for name in scheme_names()] + [(name, "liboqs") for name in FALCON + ML_DSA]


@pytest.fixture(scope="module", params=SCHEMES_AND_VERIFIERS, ids=lambda p: f"{p[0]}-{p[1]}")
def signed(request):
    """(scheme, keypair, other keypair, signature of MESSAGE) for each scheme and verifier."""
    scheme = get_scheme(*request.param)
    pair, other = scheme.keypair(), scheme.keypair()
    return scheme, pair, other, scheme.sign(pair.secret_key, MESSAGE)


def test_valid_signature_verifies(signed):
    scheme, pair, _, signature = signed
    assert scheme.verify(pair.public_key, MESSAGE, signature)


def test_key_and_signature_sizes_match_the_declared_ones(signed):
    scheme, pair, _, signature = signed
    assert len(pair.public_key) == scheme.info.public_key_bytes
    assert len(pair.secret_key) == scheme.info.secret_key_bytes
    assert 0 < len(signature) <= scheme.info.max_signature_bytes
    if scheme.info.fixed_signature_length and scheme.info.family != "classical":
        assert len(signature) == scheme.info.max_signature_bytes


@pytest.mark.parametrize("bit", [0, 8 * 100 + 5, 8 * 255 + 7])
def test_flipped_message_bit_is_rejected(signed, bit):
    scheme, pair, _, signature = signed
    assert not scheme.verify(pair.public_key, flip_bit(MESSAGE, bit), signature)


@pytest.mark.parametrize("where", [0.1, 0.5, 0.9])
def test_flipped_signature_bit_is_rejected(signed, where):
    scheme, pair, _, signature = signed
    assert not scheme.verify(pair.public_key, MESSAGE, flip_bit(signature, int(8 * len(signature) * where)))


def test_flipped_public_key_bit_is_rejected(signed):
    scheme, pair, _, signature = signed
    bit = 8 * (len(pair.public_key) // 2) + 1
    assert not scheme.verify(flip_bit(pair.public_key, bit), MESSAGE, signature)


def test_another_keys_signature_is_rejected(signed):
    scheme, _, other, signature = signed
    assert not scheme.verify(other.public_key, MESSAGE, signature)


def test_truncated_oversized_and_empty_signatures_are_rejected(signed):
    scheme, pair, _, signature = signed
    # A Falcon signature ends with its compressed s2's padding bits; when its last byte holds
    # only padding (zero), the signature without it still decodes to the same s2 and verifies
    # (liboqs and the fast verifier alike; FIPS 206 draft allows zero padding: docs/methodology.md, Falcon). One
    # signature in ~256 ends so; dropping a byte that is not zero must fail.
    if not (scheme.name.startswith("Falcon") and signature[-1] == 0):
        assert not scheme.verify(pair.public_key, MESSAGE, signature[:-1])
    assert not scheme.verify(pair.public_key, MESSAGE, signature[: len(signature) // 2])
    assert not scheme.verify(pair.public_key, MESSAGE, signature + b"\x00")
    assert not scheme.verify(pair.public_key, MESSAGE, b"\x00" * (scheme.info.max_signature_bytes + 1))
    assert not scheme.verify(pair.public_key, MESSAGE, b"")


def test_fixed_length_signatures_are_accepted_only_at_their_length(signed):
    scheme, pair, _, signature = signed
    if not scheme.info.fixed_signature_length:
        return
    # Cut the trailing bytes off (for padded Falcon: its zero padding) - never valid.
    for cut in range(1, 12):
        assert not scheme.verify(pair.public_key, MESSAGE, signature[:-cut])


def test_malformed_public_keys_are_rejected(signed):
    scheme, pair, _, signature = signed
    assert not scheme.verify(pair.public_key[:-1], MESSAGE, signature)
    assert not scheme.verify(pair.public_key + b"\x00", MESSAGE, signature)
    assert not scheme.verify(b"", MESSAGE, signature)
    assert not scheme.verify(b"\xff" * scheme.info.public_key_bytes, MESSAGE, signature)


def test_signature_of_another_scheme_is_rejected(signed):
    scheme, pair, _, _ = signed
    for other_name in ("Falcon-512", "ML-DSA-44", "Ed25519"):
        if other_name == scheme.name:
            continue
        other_scheme = get_scheme(other_name)
        foreign = other_scheme.sign(other_scheme.keypair().secret_key, MESSAGE)
        assert not scheme.verify(pair.public_key, MESSAGE, foreign)


def test_signing_with_a_secret_key_of_the_wrong_length_raises(signed):
    scheme, pair, _, _ = signed
    with pytest.raises(MalformedKey):
        scheme.sign(pair.secret_key[:-1], MESSAGE)


def test_self_test_passes(signed):
    result = self_test(signed[0])
    assert result.passed, result.detail


def test_published_sizes_of_falcon_512_and_ml_dsa_44():
    falcon, mldsa = get_scheme("Falcon-512").info, get_scheme("ML-DSA-44").info
    assert (falcon.public_key_bytes, falcon.secret_key_bytes, falcon.max_signature_bytes) == (897, 1281, 752)
    assert (mldsa.public_key_bytes, mldsa.max_signature_bytes) == (1312, 2420)
    assert not falcon.fixed_signature_length and mldsa.fixed_signature_length


def test_names_are_case_insensitive_and_ids_round_trip():
    assert get_scheme("falcon-512") is get_scheme("Falcon-512")
    for name in scheme_names():
        assert scheme_by_id(scheme_id_of(name)).name == name


def test_unknown_names_and_ids_raise_unknown_scheme():
    with pytest.raises(UnknownScheme):
        get_scheme("RSA-2048")
    with pytest.raises(UnknownScheme):
        scheme_by_id(250)


def test_every_liboqs_scheme_names_its_implementation():
    for name in scheme_names():
        implementation = get_scheme(name, verifier="liboqs").info.implementation
        assert implementation.startswith(("liboqs 0.13.0", "libsodium", "libsecp256k1"))
        fast = get_scheme(name).info.implementation
        if name.startswith("Falcon"):   # the default verifier names our code and liboqs's
            assert fast.startswith("liboqs 0.13.0 + qMEMO fast verifier (") and "variable-time" in fast
        elif name.startswith("ML-DSA"):
            assert fast.startswith("liboqs 0.13.0 + qMEMO ML-DSA verifier (") and "variable-time" in fast
        else:
            assert fast == implementation


def test_verify_many_agrees_with_verify_on_good_and_bad_items(signed):
    scheme, pair, other, signature = signed
    items = [
        (pair.public_key, MESSAGE, signature),                       # valid
        (pair.public_key, flip_bit(MESSAGE, 3), signature),          # message changed
        (other.public_key, MESSAGE, signature),                      # another key
        (pair.public_key, MESSAGE, signature[:-1]),                  # truncated
        (pair.public_key[:-1], MESSAGE, signature),                  # short key
        (pair.public_key, MESSAGE, b""),                             # empty signature
        (pair.public_key, MESSAGE, signature),                       # valid again
    ]
    results, durations = scheme.verify_many(items)
    assert results == [scheme.verify(*item) for item in items]
    assert results[0] and results[-1] and not any(results[1:-1])
    assert len(durations) == len(items) and all(d >= 0 for d in durations)
    assert scheme.verify_many([]) == ([], [])


class _LyingBytes(bytes):
    """A bytes subclass whose len() lies: it must never reach native code as a length."""

    def __len__(self) -> int:
        return 1 << 40


def test_verify_refuses_anything_but_exact_bytes(signed):
    scheme, pair, _, signature = signed
    assert not scheme.verify(_LyingBytes(pair.public_key), MESSAGE, signature)
    assert not scheme.verify(pair.public_key, MESSAGE, _LyingBytes(signature))
    assert not scheme.verify(None, MESSAGE, signature)  # type: ignore[arg-type]
    results, _ = scheme.verify_many([(pair.public_key, MESSAGE, _LyingBytes(signature)),
                                     (pair.public_key, MESSAGE, signature)])
    assert results == [False, True]


def test_falcon_and_ml_dsa_have_two_verifiers_and_other_schemes_one():
    for name in FALCON + ML_DSA:
        fast, liboqs = get_scheme(name, "fast"), get_scheme(name, "liboqs")
        assert fast is not liboqs and fast.info.scheme_id == liboqs.info.scheme_id
        assert ("variable-time hash-to-point, cached key" if name in FALCON else
                "variable-time (cached expanded key)") in fast.info.implementation
        assert "variable-time" not in liboqs.info.implementation
        assert fast.rules == liboqs.rules
    assert get_scheme("MAYO-1", "fast") is get_scheme("MAYO-1", "liboqs")
    assert backend_of("Falcon-512", "liboqs") == "liboqs" and backend_of("Falcon-512") == "falcon-vt"
    assert backend_of("ML-DSA-65") == "mldsa-vt"
    with pytest.raises(UnknownScheme):
        get_scheme("Falcon-512", "fastest")


@pytest.mark.parametrize("name", FALCON)
def test_both_falcon_verifiers_give_the_same_verdicts_through_the_registry(name):
    signer = get_scheme(name, "liboqs")
    pairs = [signer.keypair() for _ in range(3)]
    items = []
    for index, pair in enumerate(pairs):
        message = MESSAGE[index:]
        signature = signer.sign(pair.secret_key, message)
        wrong_header = bytes([signature[0] ^ 0x01]) + signature[1:]
        items += [
            (pair.public_key, message, signature),                               # valid
            (pair.public_key, message, signature),                               # valid, key now cached
            (pair.public_key, flip_bit(message, 9), signature),                  # message changed
            (pair.public_key, message, flip_bit(signature, 8 * 3 + 2)),          # nonce changed
            (pair.public_key, message, flip_bit(signature, 8 * (len(signature) - 20))),  # s2 changed
            (pair.public_key, message, wrong_header),                            # header byte
            (pairs[index - 1].public_key, message, signature),                   # another key
            (flip_bit(pair.public_key, 8 * 40), message, signature),             # key changed
            (pair.public_key[:-1], message, signature),                          # key too short
            (pair.public_key, message, signature[:-1]),                          # truncated
            (pair.public_key, message, signature + b"\x00"),                    # extended
            (pair.public_key, message, b""),                                     # empty
        ]
    verdicts = {verifier: [get_scheme(name, verifier).verify(*item) for item in items] for verifier in VERIFIERS}
    batched = {verifier: get_scheme(name, verifier).verify_many(items)[0] for verifier in VERIFIERS}
    assert verdicts["fast"] == verdicts["liboqs"] == batched["fast"] == batched["liboqs"]
    assert sum(verdicts["fast"]) >= 2 * len(pairs)     # the valid ones are valid for both


def test_key_cache_stats_count_the_fast_verifiers_lookups():
    scheme = get_scheme("Falcon-512", "fast")
    pair = scheme.keypair()
    signature = scheme.sign(pair.secret_key, MESSAGE)
    before = key_cache_stats()
    assert scheme.verify(pair.public_key, MESSAGE, signature) and scheme.verify(pair.public_key, MESSAGE, signature)
    after = key_cache_stats()
    assert after is not None and after.hits + after.misses == (before.hits + before.misses if before else 0) + 2
    assert after.hits >= (before.hits if before else 0) + 1 and 0 < after.hit_rate <= 1
