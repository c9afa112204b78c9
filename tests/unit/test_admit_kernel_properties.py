"""The admission kernel against the Python path on random and mutated input (hypothesis).

For any body: the kernel raises exactly what decode_frames raises (type, code, message),
or gives one record per frame that agrees with Transaction.decode on that frame - the
same error code, or the same fields, digests, sender and field offsets. Bounded example
counts: these run in the default suite.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from qmemo.core.codec import U32_MAX, U64_MAX
from qmemo.core.transaction import MAX_PAYLOAD_BYTES, Transaction
from qmemo.crypto.admit_kernel import AdmitKernel, Verdict
from qmemo.errors import DecodeError
from qmemo.frames import decode_frames, encode_frames

CHAIN_ID = 7
KERNEL = AdmitKernel(CHAIN_ID, ("Falcon-512",))

transactions = st.builds(
    Transaction,
    chain_id=st.sampled_from((CHAIN_ID, 0, U32_MAX)) | st.integers(0, U32_MAX),
    scheme_id=st.sampled_from((1, 2, 10, 100)) | st.integers(0, 255),
    public_key=st.binary(max_size=1000),
    nonce=st.integers(0, U64_MAX),
    recipient=st.binary(min_size=32, max_size=32),
    amount=st.integers(0, U64_MAX),
    fee=st.integers(0, U64_MAX),
    payload=st.binary(max_size=MAX_PAYLOAD_BYTES),
    signature=st.binary(max_size=800),
)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """A valid encoding, then maybe one mutation of the kinds the decode rules catch."""
    data = bytearray(draw(transactions).encoded)
    kind = draw(st.sampled_from(("none", "cut", "append", "byte", "u16 field", "version")))
    if kind == "cut":
        del data[draw(st.integers(0, len(data))):]
    elif kind == "append":
        data += draw(st.binary(min_size=1, max_size=8))
    elif kind == "byte":
        data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
    elif kind == "u16 field":   # public_key_length, payload_length or signature_length
        pk_length = int.from_bytes(data[62:64], "little")
        payload_length = int.from_bytes(data[64:66], "little")
        at = draw(st.sampled_from((62, 64, 66 + pk_length + payload_length)))
        data[at:at + 2] = draw(st.integers(0, 0xFFFF)).to_bytes(2, "little")
    elif kind == "version":
        data[0] = draw(st.integers(0, 255))
    return bytes(data)


def check_record(body: bytes, results, index: int, encoding: bytes) -> None:
    record = results[index]
    assert body[record.record_offset:record.record_offset + record.record_length] == encoding
    try:
        tx = Transaction.decode(encoding)
    except DecodeError as exc:
        assert record.error_code == exc.code
        assert record.verdict == Verdict.NOT_CHECKED
        return
    assert record.error_code is None
    assert (record.id, record.signing_digest, record.sender) == (tx.id, tx.signing_digest, tx.sender)
    assert (record.chain_id, record.scheme_id, record.nonce, record.amount, record.fee) == \
        (tx.chain_id, tx.scheme_id, tx.nonce, tx.amount, tx.fee)
    assert body[record.public_key_offset:][:record.public_key_length] == tx.public_key
    assert record.payload_length == len(tx.payload)
    assert body[record.signature_offset:][:record.signature_length] == tx.signature
    if tx.chain_id != CHAIN_ID:
        assert record.verdict == Verdict.WRONG_CHAIN_ID
    elif tx.scheme_id == 1:
        assert record.verdict == Verdict.INVALID     # random bytes are never a Falcon signature
    else:
        assert record.verdict == Verdict.NO_VERIFIER


def compare(body: bytes, max_count: int) -> None:
    try:
        expected = decode_frames(body, max_count, "transaction")
    except DecodeError as python:
        try:
            KERNEL.admit(body, max_count)
        except DecodeError as native:
            assert (type(native), native.code, native.detail) == (type(python), python.code, python.detail)
        else:
            raise AssertionError(f"the kernel admitted a body decode_frames refuses: {python}")
        return
    results = KERNEL.admit(body, max_count)
    assert len(results) == len(expected)
    for index, encoding in enumerate(expected):
        check_record(body, results, index, encoding)


@settings(max_examples=150, deadline=None)
@given(st.lists(mutated(), max_size=6))
def test_kernel_agrees_with_transaction_decode_on_mutated_batches(records):
    compare(encode_frames(records), 1000)


@settings(max_examples=150, deadline=None)
@given(st.lists(mutated(), max_size=5), st.integers(-2, 6), st.binary(max_size=12))
def test_kernel_frames_like_decode_frames_whatever_the_tail(records, max_count, tail):
    compare(encode_frames(records) + tail, max_count)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.integers(0, 300))
def test_kernel_agrees_with_the_python_path_on_arbitrary_bytes(body, max_count):
    compare(body, max_count)
