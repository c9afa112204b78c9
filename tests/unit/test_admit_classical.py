"""The admission kernel's classical slots (qmemo_admit_classical.c) give the registry's
verdicts (PyNaCl's Ed25519, coincurve's ECDSA) on valid, mutated and malformed signatures,
keys and messages: the node admits a classical chain on the same native path as a
post-quantum one, so the scheme comparison measures signatures."""

from __future__ import annotations

import random

import pytest

from qmemo.crypto.admit_kernel import AdmitKernel, Verdict
from qmemo.crypto.schemes import get_scheme, scheme_id_of
from qmemo.frames import encode_frames
from qmemo.core.transaction import Transaction

CHAIN_ID = 5
SECP256K1_ORDER = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141


def _signed(scheme, key, nonce: int, payload: bytes = b"") -> Transaction:
    tx = Transaction(CHAIN_ID, scheme_id_of(scheme.name), key.public_key, nonce, b"\x01" * 32, 1, 1, payload)
    return tx.signed(lambda digest: scheme.sign(key.secret_key, digest))


def _high_s(signature: bytes) -> bytes:
    r, s = signature[:32], int.from_bytes(signature[32:], "big")
    return r + (SECP256K1_ORDER - s).to_bytes(32, "big")


@pytest.mark.parametrize("name", ["Ed25519", "ECDSA-secp256k1"])
def test_the_kernels_classical_verdicts_are_the_registrys(name):
    scheme = get_scheme(name)
    kernel = AdmitKernel(CHAIN_ID, (name,))
    rng = random.Random(7)
    keys = [scheme.keypair() for _ in range(4)]
    cases: list[Transaction] = []
    for n in range(120):
        tx = _signed(scheme, rng.choice(keys), n, bytes(rng.randrange(3)))
        kind = n % 6
        if kind == 1:     # a flipped signature bit
            sig = bytearray(tx.signature)
            sig[rng.randrange(len(sig))] ^= 1 << rng.randrange(8)
            tx = Transaction.decode(tx.encoded[:-len(sig)] + bytes(sig))
        elif kind == 2:   # another key's signature
            other = _signed(scheme, keys[(keys.index(next(k for k in keys if k.public_key == tx.public_key)) + 1) % 4], n)
            tx = Transaction.decode(tx.encoded[:-len(tx.signature)] + other.signature)
        elif kind == 3 and name == "ECDSA-secp256k1":   # the same signature with a high S
            tx = Transaction.decode(tx.encoded[:-64] + _high_s(tx.signature))
        elif kind == 4:   # a key that is no point / not canonical
            key = bytearray(tx.public_key)
            key[0] ^= 0x04 if name == "ECDSA-secp256k1" else 0x80
            raw = tx.encoded
            tx = Transaction.decode(raw[:66] + bytes(key) + raw[66 + len(key):])
        elif kind == 5 and name == "ECDSA-secp256k1":   # r beyond the group order
            tx = Transaction.decode(tx.encoded[:-64] + b"\xff" * 32 + tx.signature[32:])
        cases.append(tx)
    results = kernel.admit(encode_frames([tx.encoded for tx in cases]), len(cases))
    native = [r.verdict == Verdict.VALID for r in results.records()]
    registry = [scheme.verify(tx.public_key, tx.signing_digest, tx.signature) for tx in cases]
    assert native == registry
    assert sum(registry) >= 20 and sum(not v for v in registry) >= 40
    kernel.close()

