"""The admission kernel and the Python path against one case table (tests/vectors/admit_kernel.json).

The rule "framed body -> per-record decode, digests, signature check" lives twice: in
Python (qmemo.frames.decode_frames, Transaction.decode, the registry's verifiers)
and in C (qmemo/crypto/native/qmemo_admit.c). Like BLAKE3's test_vectors.json, one file
written by tests/vectors/make_vectors.py holds the cases, and both are checked against
it here; test_admit_kernel_properties.py compares the two on random and mutated input.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import orjson
import pytest

from qmemo.core.transaction import Transaction, derive_address
from qmemo.crypto.admit_kernel import KEY_MEMORY, RECORD, AdmitKernel, AdmitResults, Verdict, blake3_c_version
from qmemo.crypto.verifier import RegistryVerifier
from qmemo.errors import DecodeError, UnknownScheme
from qmemo.frames import decode_frames, encode_frames
from tests.vectors.make_vectors import admit_record   # the Python path for one record, as the file was made

VECTORS_DIR = Path(__file__).parents[1] / "vectors"
ADMIT = orjson.loads((VECTORS_DIR / "admit_kernel.json").read_bytes())
CORE = orjson.loads((VECTORS_DIR / "chain_core.json").read_bytes())
CHAIN_ID = ADMIT["chain_id"]    # admit_record checks chain ids against the same (make_vectors.ADMIT_CHAIN_ID)
NATIVE_SCHEMES = ("Falcon-512", "Falcon-padded-512", "ML-DSA-44")
# The vectors' signature outcomes -> the kernel's verdicts.
VERDICTS = {"valid": Verdict.VALID, "invalid": Verdict.INVALID, "wrong_chain_id": Verdict.WRONG_CHAIN_ID}


@pytest.fixture(scope="module", params=["liboqs", "fast"])
def kernel(request) -> AdmitKernel:
    """Every kernel test runs with each of the node's verifiers in the table: the fast
    Falcon verifier's slot must give liboqs's verdict on every vector."""
    return AdmitKernel(CHAIN_ID, NATIVE_SCHEMES, verifier=request.param)


def batch_id(vector: dict) -> str:
    return vector["description"][:50]


def kernel_record(results: AdmitResults, index: int, native_ids: set[int]) -> dict:
    """The kernel's result for one record, in the vectors' terms (checking its verdict)."""
    record = results[index]
    if record.error_code is not None:
        return {"error": record.error_code}
    verdict = Verdict(record.verdict)
    if verdict is Verdict.NO_VERIFIER:
        assert record.scheme_id not in native_ids
        signature = "valid" if RegistryVerifier().verify(
            record.scheme_id, results.body[record.public_key_offset:][:record.public_key_length],
            record.signing_digest, results.body[record.signature_offset:][:record.signature_length]) else "invalid"
    else:
        signature = {v: k for k, v in VERDICTS.items()}[verdict]
    return {"scheme_id": record.scheme_id, "chain_id": record.chain_id, "nonce": record.nonce,
            "amount": record.amount, "fee": record.fee, "signing_digest": record.signing_digest.hex(),
            "id": record.id.hex(), "sender": record.sender.hex(), "signature": signature}


@pytest.mark.parametrize("vector", ADMIT["batches"], ids=batch_id)
def test_python_path_matches_the_admit_vectors(vector):
    body = bytes.fromhex(vector["body"])
    try:
        records = decode_frames(body, vector["max_count"], "transaction")
    except DecodeError as exc:
        assert {"code": exc.code, "http_status": exc.http_status, "detail": exc.detail} == vector["error"]
        return
    assert "error" not in vector
    assert [admit_record(record) for record in records] == vector["records"]


@pytest.mark.parametrize("vector", ADMIT["batches"], ids=batch_id)
def test_kernel_matches_the_admit_vectors(kernel, vector):
    body = bytes.fromhex(vector["body"])
    try:
        results = kernel.admit(body, vector["max_count"])
    except DecodeError as exc:
        assert {"code": exc.code, "http_status": exc.http_status, "detail": exc.detail} == vector["error"]
        return
    assert "error" not in vector
    assert [kernel_record(results, i, set(kernel.verifiers)) for i in range(len(results))] == vector["records"]


def test_the_admit_vectors_cover_every_decode_rule_and_verdict():
    records = [r for v in ADMIT["batches"] for r in v.get("records", [])]
    assert {r["error"] for r in records if "error" in r} == \
        {"truncated", "unsupported_version", "oversized", "trailing_bytes"}
    assert {r["signature"] for r in records if "signature" in r} == set(VERDICTS)
    assert {r["scheme_id"] for r in records if "scheme_id" in r} >= {1, 2, 10, 100}
    assert {v["error"]["code"] for v in ADMIT["batches"] if "error" in v} == {"truncated", "batch_too_large"}


def test_kernel_matches_the_chain_core_vectors(kernel):
    valid = CORE["transactions"]
    invalid = CORE["invalid_transactions"]
    body = encode_frames([bytes.fromhex(v["encoded"]) for v in valid + invalid])
    results = kernel.admit(body, 100)
    assert len(results) == len(valid) + len(invalid)
    for index, vector in enumerate(valid):
        record = results[index]
        assert record.error_code is None
        assert (record.signing_digest.hex(), record.id.hex(), record.sender.hex()) == \
            (vector["signing_digest"], vector["id"], vector["sender"])
        assert results.encoding(index).hex() == vector["encoded"]
    for index, vector in enumerate(invalid, start=len(valid)):
        assert results[index].error_code == vector["error"]


def test_a_rejected_record_carries_transaction_decodes_own_error(kernel):
    short = bytes.fromhex(CORE["transactions"][1]["encoded"])[:-1]
    results = kernel.admit(encode_frames([short]), 10)
    error = results.decode_error(0)
    with pytest.raises(DecodeError) as python:
        Transaction.decode(short)
    assert (error.code, error.detail) == (python.value.code, python.value.detail)


def test_records_give_the_fields_offsets_into_the_body(kernel):
    encoded = bytes.fromhex(CORE["transactions"][0]["encoded"])
    tx = Transaction.decode(encoded)
    results = kernel.admit(encode_frames([b"", encoded]), 10)
    record = results[1]
    body = results.body
    assert record.record_offset == 4 + 4 and record.record_length == len(encoded)
    assert body[record.public_key_offset:record.public_key_offset + record.public_key_length] == tx.public_key
    payload_start = record.public_key_offset + record.public_key_length
    assert body[payload_start:payload_start + record.payload_length] == tx.payload
    assert body[record.signature_offset:record.signature_offset + record.signature_length] == tx.signature
    assert body[record.record_offset + 14:record.record_offset + 46] == tx.recipient
    assert (record.chain_id, record.scheme_id, record.nonce, record.amount, record.fee) == \
        (tx.chain_id, tx.scheme_id, tx.nonce, tx.amount, tx.fee)
    assert record.verdict == Verdict.VALID and record.verify_ns > 0
    assert list(results.rows()) == [tuple(r) for r in results.records()]


def test_a_transaction_from_a_record_is_transaction_decodes_in_every_slot(kernel):
    encodings = [bytes.fromhex(v["encoded"]) for v in CORE["transactions"]]
    encodings += decode_frames(every_scheme_body(), 10)
    results = kernel.admit(encode_frames(encodings + encodings), 100, verify=False)
    keys: dict[bytes, bytes] = {}
    built = results.transactions(keys)
    assert len(built) == 2 * len(encodings)
    for tx, encoded in zip(built, encodings + encodings):
        expected = Transaction.decode(encoded)
        assert type(tx) is Transaction and tx == expected
        assert [getattr(tx, slot) for slot in Transaction.__slots__] == \
            [getattr(expected, slot) for slot in Transaction.__slots__]
        assert hash(tx) == hash(expected)
    half = len(encodings)
    assert all(first.public_key is again.public_key for first, again in zip(built[:half], built[half:]))
    assert set(keys) == {tx.sender for tx in built}


def test_a_record_seen_comes_back_as_its_id_and_one_that_did_not_decode_as_its_status(kernel):
    encodings = decode_frames(every_scheme_body(), 10)
    seen_id = Transaction.decode(encodings[1]).id
    results = kernel.admit(encode_frames([encodings[0], b"\x07", encodings[1], encodings[2]]), 10, verify=False)
    built = results.transactions({}, (set(), {seen_id: None}))
    assert built[0] == Transaction.decode(encodings[0])
    assert built[1] == results[1].status and results[1].error_code is not None and type(built[1]) is int
    assert built[2] == seen_id and type(built[2]) is bytes
    assert built[3] == Transaction.decode(encodings[2])


def test_the_shared_keys_are_forgotten_at_key_memory_senders(kernel, monkeypatch):
    encodings = decode_frames(every_scheme_body(), 10)
    results = kernel.admit(encode_frames(encodings), 10, verify=False)
    keys = {bytes(32 - len(str(i))) + str(i).encode(): b"k" for i in range(KEY_MEMORY)}
    built = results.transactions(keys)
    assert set(keys) == {tx.sender for tx in built}       # emptied once, then filled from the batch


def test_records_of_another_body_are_refused_not_read_past_it(kernel):
    results = kernel.admit(every_scheme_body(), 10, verify=False)
    short = AdmitResults(results.body[:100], results.buffer, results.count)
    with pytest.raises(ValueError, match="past the body"):
        short.transactions({})
    with pytest.raises(ValueError, match="exceeds the records buffer"):
        AdmitResults(results.body, results.buffer, results.count + 1).transactions({})


def every_scheme_body() -> bytes:
    """Falcon-512, padded Falcon-512, ML-DSA-44 and Ed25519 transfers, all valid."""
    return bytes.fromhex(ADMIT["batches"][0]["body"])


def test_verification_can_wait_for_a_second_call_on_chosen_records(kernel):
    results = kernel.admit(every_scheme_body(), 10, verify=False)
    assert [r.verdict for r in results.records()] == [Verdict.NOT_CHECKED] * 4
    assert kernel.verify(results, [True, False, True, True]) == 2
    assert [r.verdict for r in results.records()] == \
        [Verdict.VALID, Verdict.NOT_CHECKED, Verdict.VALID, Verdict.NO_VERIFIER]
    assert kernel.verify(results) == 1                       # only the one still not checked
    assert results[1].verdict == Verdict.VALID
    assert results[2].verify_ns > 0 and results[3].verify_ns == 0


def test_verdicts_durations_and_frames_are_read_for_chosen_records(kernel):
    body = every_scheme_body()
    results = kernel.admit(body, 10, verify=False)
    kernel.verify(results, bytes([1, 0, 1, 1]))                # a mask as bytes, taken as it is
    records = results.records()
    assert results.valid([0, 1, 2, 3]) == [r.verdict == Verdict.VALID for r in records] == [True, False, True, False]
    assert results.verify_ns([2, 1]) == [records[2].verify_ns, 0] and records[2].verify_ns > 0
    assert results.frames([0, 1, 2, 3]) is body                # all of them: the body itself
    assert results.frames([1, 3]) == encode_frames([results.encoding(1), results.encoding(3)])
    assert results.frames([]) == b""


def test_a_tampered_record_is_invalid_never_a_read_outside_the_body(kernel):
    results = kernel.admit(every_scheme_body(), 10, verify=False)
    base = 0 * RECORD.size   # the first record
    results.buffer[base + 48:base + 52] = (len(results.body) - 10).to_bytes(4, "little")  # public_key_offset
    results.buffer[base + 56:base + 60] = (0xFFFFFFFF).to_bytes(4, "little")              # signature_offset
    assert kernel.verify(results, [True, False, False, False]) == 0
    assert results[0].verdict == Verdict.INVALID


def test_without_a_verifier_a_scheme_is_reported_not_guessed():
    kernel = AdmitKernel(CHAIN_ID, ())
    results = kernel.admit(every_scheme_body(), 10)
    assert {r.verdict for r in results.records()} == {Verdict.NO_VERIFIER}
    kernel.close()


def test_a_scheme_without_any_native_verifier_is_refused_by_name():
    with pytest.raises(UnknownScheme):
        AdmitKernel(CHAIN_ID, ("no such scheme",))


def test_any_buffer_type_is_admitted_as_its_bytes(kernel):
    body = every_scheme_body()
    expected = kernel.admit(body, 10, verify=False).records()
    for form in (bytearray(body), memoryview(body)):
        assert kernel.admit(form, 10, verify=False).records() == expected


def test_the_kernel_reports_its_blake3_c_version():
    assert blake3_c_version() == "1.8.7"


def test_cached_senders_stay_right_for_repeated_and_colliding_keys(kernel):
    # The kernel memoizes senders (keys up to 2,600 bytes) in slots chosen by the key's
    # length and its first and last 32 bytes: these keys share a slot, so every lookup
    # after the first is a hit or an eviction, and each must still give its own address.
    order = [0, 1, 0, 2, 2, 3, 1, 0, 3, 3]
    for scheme_id, length in ((1, 1024), (7, 1024), (1, 3000)):
        base = bytes(range(256)) * (length // 256 + 1)
        keys = [base[:500] + bytes([i]) + base[501:length] for i in range(4)]
        encodings = [Transaction(CHAIN_ID, scheme_id, keys[i], n, bytes(32), 1, 1).encoded
                     for n, i in enumerate(order)]
        for _ in range(2):
            results = kernel.admit(encode_frames(encodings), 100, verify=False)
            assert [r.sender for r in results.records()] == \
                [derive_address.__wrapped__(scheme_id, keys[i]) for i in order]


VERIFY_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint8), ctypes.c_size_t,
                             ctypes.POINTER(ctypes.c_uint8), ctypes.c_size_t, ctypes.POINTER(ctypes.c_uint8),
                             ctypes.c_size_t)


def test_a_plugged_in_verifier_gets_key_signing_digest_and_signature():
    # The slot the fast Falcon verifier takes (qmemo_admit_table_set): here a Python
    # callback stands in for it and records what it is handed.
    seen: list[tuple[int | None, bytes, bytes, bytes]] = []

    @VERIFY_FN
    def verify(ctx, public_key, public_key_length, message, message_length, signature, signature_length):
        seen.append((ctx, ctypes.string_at(public_key, public_key_length), ctypes.string_at(message, message_length),
                     ctypes.string_at(signature, signature_length)))
        return len(seen) % 2      # valid, invalid, valid, ...

    kernel = AdmitKernel(CHAIN_ID, ())
    kernel.set_native_verifier(1, ctypes.cast(verify, ctypes.c_void_p).value, 1234, "test callback")
    encodings = [bytes.fromhex(CORE["transactions"][0]["encoded"])] * 3
    results = kernel.admit(encode_frames(encodings), 10)
    tx = Transaction.decode(encodings[0])
    assert seen == [(1234, tx.public_key, tx.signing_digest, tx.signature)] * 3
    assert [r.verdict for r in results.records()] == [Verdict.VALID, Verdict.INVALID, Verdict.VALID]
    assert kernel.verifiers == {1: "test callback"}
    kernel.close()


def test_the_fast_verifiers_fill_the_falcon_and_ml_dsa_slots_and_liboqs_the_others():
    kernel = AdmitKernel(CHAIN_ID, (*NATIVE_SCHEMES, "MAYO-1"), verifier="fast")
    assert kernel.verifiers == {1: "fast Falcon-512", 2: "fast Falcon-padded-512", 10: "fast ML-DSA-44",
                                30: "liboqs MAYO-1"}
    kernel.close()


ITEM_FIELDS = [("public_key", ctypes.c_void_p), ("public_key_length", ctypes.c_size_t),
               ("message", ctypes.c_void_p), ("message_length", ctypes.c_size_t),
               ("signature", ctypes.c_void_p), ("signature_length", ctypes.c_size_t)]
ITEM = type("Item", (ctypes.Structure,), {"_fields_": ITEM_FIELDS})      # qmemo_admit_item
MANY_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(ITEM), ctypes.c_size_t, ctypes.POINTER(ctypes.c_uint8))


def test_a_many_at_once_verifier_gets_the_records_its_rule_admits_in_chunks():
    # qmemo_admit_table_set_many: the records of the scheme go to `many` in chunks of at
    # most 64 (the rule's misfits INVALID without a call), never to the one-at-a-time entry.
    from qmemo.crypto.batch import native_length_rule
    from qmemo.crypto.schemes import get_scheme

    one_by_one: list[int] = []
    chunks: list[list[tuple[bytes, bytes, bytes]]] = []

    @VERIFY_FN
    def verify(ctx, public_key, public_key_length, message, message_length, signature, signature_length):
        one_by_one.append(signature_length)
        return 1

    @MANY_FN
    def many(ctx, items, count, ok):
        chunks.append([(ctypes.string_at(items[i].public_key, items[i].public_key_length),
                        ctypes.string_at(items[i].message, items[i].message_length),
                        ctypes.string_at(items[i].signature, items[i].signature_length)) for i in range(count)])
        for i in range(count):
            ok[i] = i % 2        # invalid, valid, invalid, ...

    scheme = get_scheme("Falcon-512", "liboqs")
    kernel = AdmitKernel(CHAIN_ID, ())
    lib = kernel._lib
    assert lib.qmemo_admit_table_set_many(kernel._handle, 1, ctypes.cast(many, ctypes.c_void_p).value) == -1
    assert lib.qmemo_admit_table_set_with_rule(
        kernel._handle, 1, ctypes.cast(verify, ctypes.c_void_p).value, None, None,
        ctypes.byref(native_length_rule(scheme.rules))) == 0
    assert lib.qmemo_admit_table_set_many(kernel._handle, 1, ctypes.cast(many, ctypes.c_void_p).value) == 0
    tx = Transaction.decode(bytes.fromhex(CORE["transactions"][0]["encoded"]))
    misfit = Transaction(CHAIN_ID, 1, tx.public_key[:-1], 0, bytes(32), 1, 1, b"", tx.signature).encoded
    encodings = [tx.encoded] * 70 + [misfit]
    results = kernel.admit(encode_frames(encodings), 100)
    assert one_by_one == [] and [len(chunk) for chunk in chunks] == [64, 6]
    assert set(chunks[0]) == {(tx.public_key, tx.signing_digest, tx.signature)}
    verdicts = [r.verdict for r in results.records()]
    assert verdicts[:70] == [Verdict.INVALID, Verdict.VALID] * 32 + [Verdict.INVALID, Verdict.VALID] * 3
    assert verdicts[70] == Verdict.INVALID
    assert all(r.verify_ns == results[0].verify_ns for r in results.records()[:64])   # the chunk's time, shared
    kernel.close()


def test_the_length_rule_comes_from_the_registry_and_is_applied_before_the_verifier():
    # A verifier that says "valid" to anything, behind Falcon-512's rule: lengths the rule
    # refuses are INVALID without a call, the rest reach the verifier.
    from qmemo.crypto.native_lib import native_length_rule
    from qmemo.crypto.schemes import get_scheme

    calls: list[int] = []

    @VERIFY_FN
    def verify(ctx, public_key, public_key_length, message, message_length, signature, signature_length):
        calls.append(signature_length)
        return 1

    scheme = get_scheme("Falcon-512", "liboqs")
    kernel = AdmitKernel(CHAIN_ID, ())
    lib = kernel._lib
    assert lib.qmemo_admit_table_set_with_rule(
        kernel._handle, 1, ctypes.cast(verify, ctypes.c_void_p).value, None, None,
        ctypes.byref(native_length_rule(scheme.rules))) == 0
    tx = Transaction.decode(bytes.fromhex(CORE["transactions"][0]["encoded"]))
    too_long = bytes(scheme.rules.max_signature_bytes + 1)
    encodings = [tx.encoded, Transaction(CHAIN_ID, 1, tx.public_key, 0, bytes(32), 1, 1, b"", too_long).encoded,
                 Transaction(CHAIN_ID, 1, tx.public_key[:-1], 0, bytes(32), 1, 1, b"", tx.signature).encoded]
    results = kernel.admit(encode_frames(encodings), 10)
    assert [r.verdict for r in results.records()] == [Verdict.VALID, Verdict.INVALID, Verdict.INVALID]
    assert calls == [len(tx.signature)]
    kernel.close()


def test_a_rule_that_does_not_fit_liboqs_is_refused():
    from qmemo.core.scheme_rules import SchemeRules
    from qmemo.crypto.native_lib import LengthRule
    from qmemo.crypto.schemes import get_scheme

    rules: SchemeRules = get_scheme("Falcon-512", "liboqs").rules
    kernel = AdmitKernel(CHAIN_ID, ())
    for bad in (LengthRule(rules.public_key_bytes + 1, 1, rules.max_signature_bytes),      # liboqs would over-read
                LengthRule(rules.public_key_bytes, 0, rules.max_signature_bytes),          # empty signature
                LengthRule(rules.public_key_bytes, 1, rules.max_signature_bytes + 1)):     # longer than liboqs's
        assert kernel._lib.qmemo_admit_table_set_oqs(kernel._handle, 1, b"Falcon-512", ctypes.byref(bad)) != 0
    assert kernel.verifiers == {}
    kernel.close()


def test_a_closed_kernel_refuses_work_instead_of_using_freed_memory():
    kernel = AdmitKernel(CHAIN_ID, ())
    kernel.close()
    with pytest.raises(ValueError, match="closed"):
        kernel.admit(every_scheme_body(), 10)


def test_threads_sharing_a_kernel_get_the_same_results(kernel):
    # The node will call one kernel from several verify threads (the GIL is released in
    # the call); the sender cache they share must never hand one thread a torn entry.
    from concurrent.futures import ThreadPoolExecutor

    bodies = [every_scheme_body(), bytes.fromhex(ADMIT["batches"][2]["body"])]
    expected = [kernel.admit(body, 100).records() for body in bodies]
    with ThreadPoolExecutor(4) as pool:
        runs = list(pool.map(lambda i: (i % 2, kernel.admit(bodies[i % 2], 100).records()), range(24)))
    for which, records in runs:
        assert [r._replace(verify_ns=0) for r in records] == [r._replace(verify_ns=0) for r in expected[which]]


def test_a_class_that_is_not_a_transaction_is_refused_before_any_write():
    """The builder writes slots at its descriptors' offsets: a class with other slots, or one
    that borrows Transaction's descriptors without their layout, would be written out of bounds."""
    from qmemo.crypto.admit_kernel import _rows
    borrowed = type("Borrowed", (), {name: Transaction.__dict__[name] for name in Transaction.__slots__})
    for cls in (OneSlot, borrowed, int):
        with pytest.raises(TypeError, match="transaction slots|slot of its own"):
            _rows().transactions(cls, b"", b"", 0, {}, 1, ())


class OneSlot:
    __slots__ = ("chain_id",)


def test_the_result_list_is_not_seen_half_built_by_a_container_that_walks_the_heap(kernel):
    import gc

    class Walker:
        def __contains__(self, item: object) -> bool:
            for obj in gc.get_objects():
                if type(obj) is list:
                    len(obj) and obj[-1]     # a half-built list would hold NULL here
            return False

    results = kernel.admit(every_scheme_body(), 10, verify=False)
    assert len(results.transactions({}, (Walker(),))) == len(results)
