"""A scheme's one-line self-test: does this build sign, verify and reject tampering?

Used by `qmemo schemes` (a user's first check that the native libraries behave) and by
the tests. It proves behaviour, not speed: keygen, sign a 256-byte message (the size
of a MEMO transaction body), verify it, and expect rejection of a flipped message bit,
a flipped signature bit, another key, a truncated signature and an empty one.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from qmemo.core.hashing import Domain, blake3_512
from qmemo.crypto.schemes import SignatureScheme

MESSAGE_BYTES = 256


@dataclass(frozen=True, slots=True)
class SelfTestResult:
    scheme: str
    passed: bool
    detail: str          # "ok" or the first check that failed
    signature_bytes: int
    elapsed_ms: float


def flip_bit(data: bytes, bit: int) -> bytes:
    """`data` with one bit inverted (bit 0 is the low bit of the first byte)."""
    out = bytearray(data)
    out[bit // 8 % len(out)] ^= 1 << (bit % 8)
    return bytes(out)


def self_test(scheme: SignatureScheme) -> SelfTestResult:
    started = time.perf_counter()
    message = blake3_512(Domain.SELF_TEST, os.urandom(32)) * (MESSAGE_BYTES // 64)
    pair = scheme.keypair()
    other = scheme.keypair()
    signature = scheme.sign(pair.secret_key, message)
    checks = [
        ("valid signature accepted", scheme.verify(pair.public_key, message, signature)),
        ("flipped message bit rejected", not scheme.verify(pair.public_key, flip_bit(message, 8 * 17 + 3), signature)),
        ("flipped signature bit rejected", not scheme.verify(pair.public_key, message, flip_bit(signature, 8 * (len(signature) // 2)))),
        ("other public key rejected", not scheme.verify(other.public_key, message, signature)),
        ("truncated signature rejected", not scheme.verify(pair.public_key, message, signature[:-1])),
        ("empty signature rejected", not scheme.verify(pair.public_key, message, b"")),
        ("signature within declared maximum", 0 < len(signature) <= scheme.info.max_signature_bytes),
    ]
    failed = [name for name, ok in checks if not ok]
    return SelfTestResult(
        scheme=scheme.name,
        passed=not failed,
        detail="ok" if not failed else f"FAILED: {failed[0]}",
        signature_bytes=len(signature),
        elapsed_ms=(time.perf_counter() - started) * 1e3,
    )
