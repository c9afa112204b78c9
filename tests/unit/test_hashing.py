"""BLAKE3-512 helper: the official BLAKE3 vectors and our domain separation."""

import json
from pathlib import Path

import pytest

from qmemo.core.hashing import DIGEST_BYTES, Domain, blake3_512, blake3_xof, split_digests
from qmemo.errors import CryptoError

VECTORS = json.loads((Path(__file__).parents[1] / "vectors" / "blake3_official.json").read_text())


def _input(length: int) -> bytes:
    return bytes(i % 251 for i in range(length))


@pytest.mark.parametrize("case", VECTORS["cases"], ids=lambda c: f"len{c['input_len']}")
@pytest.mark.parametrize("mode", ["hash", "keyed_hash", "derive_key"])
def test_blake3_matches_official_extended_output_vectors(case, mode):
    expected = bytes.fromhex(case[mode])
    kwargs = {"keyed_hash": {"key": VECTORS["key"].encode()},
              "derive_key": {"context": VECTORS["context_string"]}}.get(mode, {})
    data = _input(case["input_len"])
    assert blake3_xof(data, len(expected), **kwargs) == expected
    # The default-length output is the 32-byte prefix of the extended output.
    assert blake3_xof(data, 32, **kwargs) == expected[:32]
    # And our 64-byte digests are the 64-byte prefix.
    assert blake3_xof(data, DIGEST_BYTES, **kwargs) == expected[:DIGEST_BYTES]


def test_blake3_512_is_derive_key_mode_under_the_domain_context():
    data = _input(1025)
    assert blake3_512(Domain.TX_ID, data) == blake3_xof(data, 64, context=Domain.TX_ID.value)


def test_blake3_512_concatenates_parts():
    assert blake3_512(Domain.MERKLE_NODE, b"ab", b"cd") == blake3_512(Domain.MERKLE_NODE, b"abcd")


def test_every_domain_gives_a_different_digest_of_the_same_bytes():
    data = b"\x00" * 128
    digests = {blake3_512(domain, data) for domain in Domain}
    assert len(digests) == len(Domain)
    assert all(len(d) == DIGEST_BYTES for d in digests)


def test_domain_context_strings_are_unique():
    assert len({d.value for d in Domain}) == len(Domain)


def test_key_and_context_together_are_refused():
    with pytest.raises(CryptoError):
        blake3_xof(b"", 32, key=b"k" * 32, context="c")


def test_split_digests_gives_back_each_64_byte_digest_of_a_span_in_order():
    digests = [bytes([i]) * 64 for i in range(3)]
    packed = b"head" + b"".join(digests)
    assert split_digests(packed, 4) == tuple(digests)
    assert split_digests(packed, 4, 4 + 128) == tuple(digests[:2])
    assert split_digests(b"".join(digests)) == tuple(digests) and split_digests(b"") == ()
