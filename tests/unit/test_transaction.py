"""Transactions: canonical encoding, JSON form, digests, addresses and strict decoding."""

from __future__ import annotations

import struct
from dataclasses import replace

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from qmemo.core.codec import U8_MAX, U32_MAX, U64_MAX
from qmemo.core.hashing import Domain, blake3_512
from qmemo.core.transaction import ADDRESS_BYTES, FIXED_BYTES, MAX_PAYLOAD_BYTES, Transaction, derive_address
from qmemo.errors import DecodeError

transactions = st.builds(
    Transaction,
    chain_id=st.integers(0, U32_MAX),
    scheme_id=st.integers(0, U8_MAX),
    public_key=st.binary(max_size=64),
    nonce=st.integers(0, U64_MAX),
    recipient=st.binary(min_size=ADDRESS_BYTES, max_size=ADDRESS_BYTES),
    amount=st.integers(0, U64_MAX),
    fee=st.integers(0, U64_MAX),
    payload=st.binary(max_size=MAX_PAYLOAD_BYTES),
    signature=st.binary(max_size=100),
)


def sample(**changes: object) -> Transaction:
    fields = dict(chain_id=1, scheme_id=1, public_key=b"\x11" * 897, nonce=5, recipient=b"\x22" * 32,
                  amount=1000, fee=3, payload=b"\x33" * 256, signature=b"\x44" * 655)
    return Transaction(**{**fields, **changes})


# --- round trips ----------------------------------------------------------------------------

@given(transactions)
def test_binary_encoding_round_trips(tx):
    decoded = Transaction.decode(tx.encoded)
    assert decoded == tx
    assert (decoded.encoded, decoded.id, decoded.signing_digest, decoded.sender) == \
        (tx.encoded, tx.id, tx.signing_digest, tx.sender)


@given(transactions)
def test_json_form_round_trips_through_json_text(tx):
    text = orjson.dumps(tx.to_json())
    assert Transaction.from_json(orjson.loads(text)) == tx
    assert orjson.dumps(Transaction.from_json(orjson.loads(text)).to_json()) == text


def test_layout_is_little_endian_with_the_documented_offsets():
    tx = sample()
    fixed = struct.unpack_from("<BIBQ32sQQHH", tx.encoded)
    assert fixed == (1, 1, 1, 5, b"\x22" * 32, 1000, 3, 897, 256)
    assert tx.encoded[FIXED_BYTES:FIXED_BYTES + 897] == tx.public_key
    unsigned_end = FIXED_BYTES + 897 + 256
    assert tx.encoded[unsigned_end:unsigned_end + 2] == (655).to_bytes(2, "little")
    assert tx.encoded[unsigned_end + 2:] == tx.signature
    assert tx.size == len(tx.encoded) == unsigned_end + 2 + 655


# --- digests and addresses ---------------------------------------------------------------------

def test_signing_digest_covers_the_unsigned_encoding_under_its_domain():
    tx = sample()
    unsigned_end = FIXED_BYTES + 897 + 256
    assert tx.signing_digest == blake3_512(Domain.TX_SIGNING, tx.encoded[:unsigned_end])


def test_id_commits_to_the_signing_digest_and_the_signature():
    tx = sample()
    unsigned_end = FIXED_BYTES + 897 + 256
    assert tx.id == blake3_512(Domain.TX_ID, tx.signing_digest, tx.encoded[unsigned_end:])


def test_signature_changes_the_id_but_not_the_signing_digest():
    tx = sample()
    other = replace(tx, signature=b"\x45" * 655)
    assert other.signing_digest == tx.signing_digest and other.id != tx.id


@pytest.mark.parametrize("field, value", [("chain_id", 2), ("scheme_id", 2), ("nonce", 6), ("amount", 1001),
                                          ("fee", 4), ("recipient", b"\x23" * 32), ("payload", b"x"),
                                          ("public_key", b"\x12" * 897)])
def test_every_signed_field_changes_the_signing_digest(field, value):
    assert replace(sample(), **{field: value}).signing_digest != sample().signing_digest


def test_sender_address_derives_from_scheme_and_public_key():
    tx = sample()
    assert tx.sender == blake3_512(Domain.ADDRESS, b"\x01", tx.public_key)[:ADDRESS_BYTES]
    assert derive_address(2, tx.public_key) != tx.sender
    assert len(tx.sender) == ADDRESS_BYTES


def test_signed_sets_the_signature_over_the_signing_digest():
    tx = sample(signature=b"")
    signed = tx.signed(lambda message: b"sig:" + message)
    assert signed.signature == b"sig:" + tx.signing_digest


# --- strict decoding --------------------------------------------------------------------------

def test_every_truncation_is_rejected_as_truncated():
    encoded = sample(public_key=b"k" * 5, payload=b"p" * 3, signature=b"s" * 4).encoded
    for length in range(len(encoded)):
        with pytest.raises(DecodeError) as rejected:
            Transaction.decode(encoded[:length])
        assert rejected.value.code == "truncated", length


def test_trailing_bytes():
    with pytest.raises(DecodeError) as rejected:
        Transaction.decode(sample().encoded + b"\x00")
    assert rejected.value.code == "trailing_bytes" and rejected.value.http_status == 400


def test_unknown_version():
    encoded = bytearray(sample().encoded)
    encoded[0] = 2
    with pytest.raises(DecodeError) as rejected:
        Transaction.decode(bytes(encoded))
    assert rejected.value.code == "unsupported_version"


def test_payload_over_the_limit_is_oversized_when_decoding():
    tx = sample(payload=b"", signature=b"")
    encoded = bytearray(tx.encoded)
    struct.pack_into("<H", encoded, 64, MAX_PAYLOAD_BYTES + 1)
    encoded[-2:-2] = bytes(MAX_PAYLOAD_BYTES + 1)
    with pytest.raises(DecodeError) as rejected:
        Transaction.decode(bytes(encoded))
    assert rejected.value.code == "oversized"


def test_payload_over_the_limit_is_oversized_when_building():
    with pytest.raises(DecodeError) as rejected:
        sample(payload=bytes(MAX_PAYLOAD_BYTES + 1))
    assert rejected.value.code == "oversized"


def test_decode_accepts_a_memoryview():
    tx = sample()
    assert Transaction.decode(memoryview(tx.encoded)) == tx


@pytest.mark.parametrize("field, value", [("nonce", U64_MAX + 1), ("amount", -1), ("chain_id", U32_MAX + 1),
                                          ("scheme_id", 256), ("fee", 1.0), ("nonce", True),
                                          ("recipient", b"\x22" * 31)])
def test_constructor_rejects_out_of_range_fields(field, value):
    with pytest.raises(DecodeError):
        sample(**{field: value})


# --- strict JSON -------------------------------------------------------------------------------

def json_with(**changes: object) -> dict:
    return {**sample().to_json(), **changes}


@pytest.mark.parametrize("changes, code", [
    ({"nonce": U64_MAX + 1}, "out_of_range"),
    ({"amount": -1}, "out_of_range"),
    ({"fee": 1.5}, "malformed"),
    ({"nonce": True}, "malformed"),
    ({"amount": "1000"}, "malformed"),
    ({"recipient": "22" * 31}, "out_of_range"),
    ({"signature": "AB"}, "malformed"),
    ({"signature": "ab cd"}, "malformed"),
    ({"signature": "abc"}, "malformed"),
    ({"payload": 33}, "malformed"),
    ({"payload": "00" * (MAX_PAYLOAD_BYTES + 1)}, "oversized"),
])
def test_json_field_rejections(changes, code):
    with pytest.raises(DecodeError) as rejected:
        Transaction.from_json(json_with(**changes))
    assert rejected.value.code == code


def test_json_with_an_unknown_key_is_rejected():
    with pytest.raises(DecodeError, match="unknown keys"):
        Transaction.from_json(json_with(memo="hi"))


def test_json_missing_a_key_is_rejected():
    document = json_with()
    del document["fee"]
    with pytest.raises(DecodeError, match="missing keys"):
        Transaction.from_json(document)


def test_json_that_is_not_an_object_is_rejected():
    with pytest.raises(DecodeError):
        Transaction.from_json([1, 2])


def test_repr_names_the_transaction_without_dumping_its_keys():
    text = repr(sample())
    assert "nonce=5" in text and len(text) < 150


@given(transactions)
def test_decode_with_digests_keeps_the_given_digests_and_hashes_nothing(tx):
    # The admission kernel hands in what it computed in C; the object must equal what
    # decode builds, field for field, with the given digests taken as they are.
    again = Transaction.decode_with_digests(tx.encoded, tx.signing_digest, tx.id, tx.sender)
    assert again == tx
    assert (again.encoded, again.signing_digest, again.id, again.sender) == \
        (tx.encoded, tx.signing_digest, tx.id, tx.sender)
    marked = Transaction.decode_with_digests(tx.encoded, b"s" * 64, b"i" * 64, b"a" * 32)
    assert (marked.signing_digest, marked.id, marked.sender) == (b"s" * 64, b"i" * 64, b"a" * 32)


def test_decode_with_digests_checks_the_structure_as_decode_does():
    tx = sample()
    for broken, code in ((tx.encoded[:-1], "truncated"), (tx.encoded + b"\0", "trailing_bytes"),
                         (b"\x02" + tx.encoded[1:], "unsupported_version")):
        with pytest.raises(DecodeError) as caught:
            Transaction.decode_with_digests(broken, tx.signing_digest, tx.id, tx.sender)
        assert caught.value.code == code
