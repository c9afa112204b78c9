"""Falcon verification written from the round-3 specification (v1.2), in numpy: the verdicts
the Falcon edge cases are held to, and the arithmetic that builds them.

Why a model of our own: the edge cases of the signature encoding (falcon_edges.py) must
get their expected verdicts from the specification, not from the implementations under
test. This module follows the spec's text step by step - §3.11.2 Decompress (Algorithm
18), §3.11.3-3.11.5 the header, nonce and key formats, §3.10 Verify (Algorithm 16) - and
names each step it applies. It is slow (milliseconds per verify) and never runs in a node.

Where the spec and the implementations differ in *format*, not verdict, the difference is
stated where it arises: the spec has one signature length, sbytelen (666 bytes for
Falcon-512), zero-padded (Algorithm 17 step 10, Algorithm 18 step 1); liboqs's "Falcon-512"
is the reference code's variable-length format (the encoding's own length, nothing
after it), and "Falcon-padded-512" is the spec's.

Never: sign, or touch a secret key except to read the NTRU basis (f, g) a test uses to
move a signature inside its lattice coset (`secret_basis`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

Q = 12289
NONCE_BYTES = 40
# floor(beta^2), Table 3.3 of the spec (and PQClean's l2bound[logn]).
NORM_BOUND = {9: 34034726, 10: 70265242}
# sbytelen, Table 3.3: the spec's one signature length (header + nonce + padded s2).
SIGNATURE_BYTES = {9: 666, 10: 1280}
# HashToPoint (Algorithm 3) keeps 16-bit words below k*q, k = floor(2^16 / q) = 5.
HASH_WORD_LIMIT = 5 * Q
# The reference decoder's bound on |s2_i| (comp_decode: |x| >> 7 at most 15); Algorithm 18
# itself has none, but no coefficient that large is ever signed (see decompress).
REFERENCE_MAX_COEFFICIENT = 2047
# Bits of f, g and F per coefficient in a liboqs/PQClean secret key (max_fg_bits, max_FG_bits).
_FG_BITS = {9: 6, 10: 5}
_BIG_F_BITS = {9: 8, 10: 8}


def degree(logn: int) -> int:
    return 1 << logn


def signature_header(logn: int) -> int:
    """§3.11.3: the header byte 0cc1nnnn, cc = 01 (compressed s2), nnnn = logn."""
    return 0x30 + logn


# --- encodings -------------------------------------------------------------------------------

def _bits_of(data: bytes) -> str:
    return "".join(f"{byte:08b}" for byte in data)


def pack_bits(bits: str) -> bytes:
    """A bit string, first bit the first byte's top bit, zero-padded to whole bytes."""
    bits += "0" * (-len(bits) % 8)
    return bytes(int(bits[i:i + 8], 2) for i in range(0, len(bits), 8))


def compress_bits(s2: np.ndarray) -> str:
    """Algorithm 17 (Compress) without its padding step: per coefficient the sign bit, the
    7 low bits of |s_i| (most significant first), then |s_i| >> 7 zeros and a one."""
    out = []
    for value in s2.tolist():
        magnitude = abs(value)
        out.append(("1" if value < 0 else "0") + f"{magnitude & 127:07b}" + "0" * (magnitude >> 7) + "1")
    return "".join(out)


def compress(s2: np.ndarray, length_bytes: int | None = None) -> bytes | None:
    """Compress s2 into bytes: its own length rounded up to a byte (the variable-length
    format), or exactly `length_bytes` zero-padded (Algorithm 17 with slen = 8*length_bytes;
    None if it does not fit, the spec's "str <- bottom")."""
    bits = compress_bits(s2)
    if length_bytes is None:
        return pack_bits(bits)
    if len(bits) > 8 * length_bytes:
        return None
    return pack_bits(bits + "0" * (8 * length_bytes - len(bits)))


@dataclass(frozen=True, slots=True)
class Decoded:
    """What Decompress made of a string: s2, or why it is bottom (`refused`)."""

    s2: np.ndarray | None
    refused: str | None      # None, or the step of Algorithm 18 that returns bottom
    bits_used: int = 0


def decompress(body: bytes, n: int) -> Decoded:
    """Algorithm 18 (Decompress) on a string of exactly len(body) bytes (its step 1, the
    length, is the caller's: the length of the format being read).

    Steps 3-11 read n coefficients (step 9: "minus zero" is bottom, the unique-encoding
    rule); step 12: any non-zero bit after the last coefficient is bottom. A string that
    ends inside a coefficient is bottom too (str has no bits left to read). |s_i| above
    2047 is refused as the reference decoder refuses it: Algorithm 18 has no such step, but
    Sign never makes one, and the two readings give the same verdict for every edge case
    built here (the over-2047 case also breaks the norm bound).
    """
    bits = _bits_of(body)
    at, out = 0, []
    for _ in range(n):
        if at + 8 > len(bits):
            return Decoded(None, "the string ends inside a coefficient")
        sign, low = bits[at], int(bits[at + 1:at + 8], 2)
        at += 8
        high = 0
        while at < len(bits) and bits[at] == "0":
            high, at = high + 1, at + 1
        if at >= len(bits):
            return Decoded(None, "the string ends inside a coefficient")
        at += 1
        value = low + (high << 7)
        if value == 0 and sign == "1":
            return Decoded(None, "minus zero (step 9: unique encoding of 0)")
        if value > REFERENCE_MAX_COEFFICIENT:
            return Decoded(None, "|s2_i| over 2047")
        out.append(-value if sign == "1" else value)
    if "1" in bits[at:]:
        return Decoded(None, "non-zero bits after the last coefficient (step 12)")
    return Decoded(np.array(out, dtype=np.int64), None, at)


def decode_public_key(public_key: bytes, logn: int) -> np.ndarray | None:
    """§3.11.4: header byte 0x00 + logn, then n coefficients of 14 bits each, each below q."""
    n = degree(logn)
    if len(public_key) != 1 + 14 * n // 8 or public_key[0] != logn:
        return None
    bits = _bits_of(public_key[1:])
    h = np.array([int(bits[14 * i:14 * i + 14], 2) for i in range(n)], dtype=np.int64)
    return None if (h >= Q).any() else h


def secret_basis(secret_key: bytes, logn: int) -> tuple[np.ndarray, np.ndarray]:
    """(f, g) of a liboqs/PQClean Falcon secret key (header 0x50 + logn, then f, g, F as
    signed fixed-width integers, most significant bit first): h = g/f mod q, so every
    (t*g, -t*f) solves s1 + s2*h = 0 mod q and moves a signature inside its coset."""
    n, fg_bits = degree(logn), _FG_BITS[logn]
    if secret_key[0] != 0x50 + logn:
        raise ValueError("not a Falcon secret key of this degree")
    bits = _bits_of(secret_key[1:])

    def signed(at: int, width: int) -> np.ndarray:
        raw = np.array([int(bits[at + width * i:at + width * (i + 1)], 2) for i in range(n)], dtype=np.int64)
        return np.where(raw >= 1 << (width - 1), raw - (1 << width), raw)

    f, g = signed(0, fg_bits), signed(n * fg_bits, fg_bits)
    if len(secret_key) != 1 + (2 * fg_bits + _BIG_F_BITS[logn]) * n // 8:
        raise ValueError("a Falcon secret key of the wrong length")
    return f, g


# --- arithmetic ------------------------------------------------------------------------------

def ring_multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a*b in Z[x]/(x^n + 1) (exact integers: |a_i| < 2^12, b_i < q, n <= 1024 fit int64)."""
    n = len(a)
    full = np.convolve(a, b)
    out = full[:n].copy()
    out[:n - 1] -= full[n:]
    return out


def hash_to_point(nonce: bytes, message: bytes, n: int) -> np.ndarray:
    """Algorithm 3: SHAKE256(nonce || message) read as big-endian 16-bit words, each below
    5q kept (mod q) until there are n."""
    need = 2 * n + 256
    while True:
        stream = hashlib.shake_256(nonce + message).digest(need)
        words = np.frombuffer(stream, dtype=">u2").astype(np.int64)
        kept = words[words < HASH_WORD_LIMIT]
        if len(kept) >= n:
            return kept[:n] % Q
        need *= 2


def centred(values: np.ndarray) -> np.ndarray:
    """Each value mod q in [-(q-1)/2, (q-1)/2] (Algorithm 16 step 5's representative)."""
    reduced = values % Q
    return np.where(reduced > Q // 2, reduced - Q, reduced)


def s1_of(c: np.ndarray, s2: np.ndarray, h: np.ndarray) -> np.ndarray:
    """Algorithm 16 step 5: s1 = c - s2*h mod q, centred."""
    return centred(c - ring_multiply(s2, h))


def squared_norm(s1: np.ndarray, s2: np.ndarray) -> int:
    return int((s1 * s1).sum() + (s2 * s2).sum())


# --- the verdict -----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Verdict:
    valid: bool
    reason: str              # "valid", or the first rule the signature breaks
    squared_norm: int | None = None


def verify(public_key: bytes, message: bytes, signature: bytes, logn: int, *, padded: bool) -> Verdict:
    """Algorithm 16 (Verify) with the signature format of §3.11.3: `padded` for the spec's
    fixed sbytelen bytes (liboqs's Falcon-padded-*), else the variable-length format whose
    body is exactly s2's encoding rounded up to a byte, with what liboqs's own verify also
    takes, the body zero-padded to the spec's length (which is the spec's format itself).
    """
    n = degree(logn)
    h = decode_public_key(public_key, logn)
    if h is None:
        return Verdict(False, "not a public key (§3.11.4)")
    if len(signature) < 1 + NONCE_BYTES + 1:
        return Verdict(False, "shorter than header + 40-byte nonce + s2")
    if signature[0] != signature_header(logn):
        return Verdict(False, f"header byte {signature[0]:#04x}, not {signature_header(logn):#04x} (§3.11.3)")
    nonce, body = signature[1:1 + NONCE_BYTES], signature[1 + NONCE_BYTES:]
    spec_body_bytes = SIGNATURE_BYTES[logn] - 1 - NONCE_BYTES
    if padded and len(body) != spec_body_bytes:
        return Verdict(False, f"{len(signature)} bytes, not sbytelen {SIGNATURE_BYTES[logn]} (Algorithm 18 step 1)")
    decoded = decompress(body, n)
    if decoded.s2 is None:
        return Verdict(False, decoded.refused or "not decodable")
    if not padded and len(body) != spec_body_bytes and (decoded.bits_used + 7) // 8 != len(body):
        return Verdict(False, "bytes after s2's encoding (the variable-length format has none)")
    s2 = decoded.s2
    c = hash_to_point(nonce, message, n)
    s1 = s1_of(c, s2, h)
    norm = squared_norm(s1, s2)
    if norm > NORM_BOUND[logn]:
        return Verdict(False, f"||(s1, s2)||^2 = {norm} over floor(beta^2) = {NORM_BOUND[logn]}", norm)
    return Verdict(True, "valid", norm)


def parse_signature(signature: bytes, logn: int) -> tuple[bytes, np.ndarray]:
    """(nonce, s2) of a signature the implementations made (ValueError if it does not decode)."""
    decoded = decompress(signature[1 + NONCE_BYTES:], degree(logn))
    if decoded.s2 is None:
        raise ValueError(f"not a decodable Falcon signature: {decoded.refused}")
    return signature[1:1 + NONCE_BYTES], decoded.s2
