"""Falcon's edge cases, built deliberately from a valid signature, each with the verdict the
round-3 specification gives it (qmemo.crypto.conformance.falcon_model says which step).

Every case starts from a signature liboqs made for a key liboqs made, and changes one
thing: an encoding rule of §3.11 (minus zero, unused bits, |s2_i| over 2047, trailing
bytes, header, nonce, the padded variant's length and padding) or, for the norm bound of
§3.10, the signature's place in its lattice coset: (s1, s2) moved by vectors (t*g, -t*f)
of the key's own NTRU lattice, which keep s1 + s2*h = c mod q, until the squared norm is
exactly floor(beta^2) (valid) or one past it (invalid). Used by the tests and by
scripts/make_conformance.py, which writes the cases a node checks at start.

Never imported by a node (numpy, and signing).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from qmemo.crypto.conformance import falcon_model as model

if TYPE_CHECKING:
    from qmemo.crypto.schemes import KeyPair

# The Falcon variants: registered name -> (logn, padded).
VARIANTS = {"Falcon-512": (9, False), "Falcon-padded-512": (9, True),
            "Falcon-1024": (10, False), "Falcon-padded-1024": (10, True)}


@dataclass(frozen=True, slots=True)
class EdgeCase:
    kind: str            # a name for the one thing changed, e.g. "minus_zero"
    public_key: bytes
    message: bytes
    signature: bytes
    valid: bool          # the specification's verdict
    rule: str            # why, in the spec's words


@dataclass(frozen=True, slots=True)
class Signed:
    """A key and a signature to start from: what `sign` returns."""

    public_key: bytes
    secret_key: bytes
    message: bytes
    signature: bytes


def _with_body(signature: bytes, body: bytes) -> bytes:
    return signature[:1 + model.NONCE_BYTES] + body


def _reencode(signed: Signed, s2: np.ndarray, logn: int, padded: bool) -> bytes | None:
    body = model.compress(s2, model.SIGNATURE_BYTES[logn] - 1 - model.NONCE_BYTES if padded else None)
    return None if body is None else _with_body(signed.signature, body)


def _flip_bit(bits: str, at: int) -> str:
    return bits[:at] + ("1" if bits[at] == "0" else "0") + bits[at + 1:]


def encoding_cases(signed: Signed, logn: int, padded: bool) -> list[EdgeCase]:
    """The cases of §3.11 that change the encoding, not the signature's values (beyond one
    coefficient's, for the over-2047 case)."""
    pk, msg, sig = signed.public_key, signed.message, signed.signature
    header_len = 1 + model.NONCE_BYTES
    _, s2 = model.parse_signature(sig, logn)
    bits = model.compress_bits(s2)
    spec_len = model.SIGNATURE_BYTES[logn]
    cases = [EdgeCase("valid", pk, msg, sig, True, "as signed")]

    def case(kind: str, signature: bytes, valid: bool, rule: str) -> None:
        cases.append(EdgeCase(kind, pk, msg, signature, valid, rule))

    # Step 9 of Algorithm 18: a zero coefficient with its sign bit set.
    zero_at = int(np.flatnonzero(s2 == 0)[0])
    start = len(model.compress_bits(s2[:zero_at]))
    case("minus_zero", _bytes_after(sig, _flip_bit(bits, start), len(sig) - header_len), False,
         "Algorithm 18 step 9: minus zero is not the unique encoding of 0")
    # Step 12: a one in the bits after the last coefficient (the last byte's unused bits,
    # or, padded, the padding's first bit).
    if len(bits) % 8 or padded:
        case("unused_bits_set", _bytes_after(sig, bits + "1", len(sig) - header_len), False,
             "Algorithm 18 step 12: bits after the last coefficient must be zero")
    # |s2_0| + 2048: 16 more unary zeros (the reference decoder's limit; the norm breaks too).
    big = s2.copy()
    big[0] = (abs(int(big[0])) + 2048) * (-1 if big[0] < 0 else 1)
    big_bits = model.compress_bits(big)
    case("magnitude_over_2047", _bytes_after(sig, big_bits, max(len(sig) - header_len, (len(big_bits) + 7) // 8)),
         False, "|s2_i| over 2047: refused by the reference decoder, and s1 = c - s2*h leaves the norm bound")
    # §3.11.3: the header byte of another degree, of another format (0x59: the constant-time
    # "uncompressed" format), and with its reserved top bit set.
    for kind, header in (("header_other_degree", model.signature_header(logn) ^ 0x03),
                         ("header_uncompressed_format", model.signature_header(logn) ^ 0x60),
                         ("header_top_bit_set", model.signature_header(logn) | 0x80)):
        case(kind, bytes([header]) + sig[1:], False, "§3.11.3: the header byte is 0cc1nnnn, cc = 01, nnnn = logn")
    # The nonce is 40 bytes: one less shifts s2's encoding by a byte; a signature that ends
    # inside the nonce, or right after it, has no s2.
    case("nonce_39_bytes", sig[:header_len - 1] + sig[header_len:], False, "§3.11.3: the nonce r is 40 bytes")
    case("ends_inside_nonce", sig[:header_len - 1], False, "§3.11.3: the nonce r is 40 bytes")
    case("no_s2", sig[:header_len], False, "Algorithm 18: s2 has n coefficients")
    case("truncated_last_byte", sig[:-1] if not padded else sig[:header_len + (len(bits) + 7) // 8 - 1], False,
         "Algorithm 18: the string ends inside the last coefficient")
    if padded:
        # Algorithm 18 step 1 and Algorithm 17 step 10: exactly sbytelen bytes, zero-padded.
        unpadded = sig[:header_len + (len(bits) + 7) // 8]
        case("padded_unpadded_length", unpadded, False, f"Algorithm 18 step 1: exactly sbytelen = {spec_len} bytes")
        case("padded_one_byte_long", sig + b"\x00", False, f"Algorithm 18 step 1: exactly sbytelen = {spec_len} bytes")
        if len(sig) > header_len + (len(bits) + 7) // 8:
            case("padded_nonzero_last_byte", sig[:-1] + b"\x01", False,
                 "Algorithm 18 step 12: the padding is zero bits")
    else:
        case("trailing_zero_byte", sig + b"\x00", False,
             "variable-length format: the body is s2's encoding, nothing after it (not sbytelen either)")
        case("trailing_nonzero_byte", sig + b"\x01", False,
             "variable-length format: nothing after s2's encoding")
        if len(sig) < spec_len:
            case("zero_padded_to_sbytelen", sig + bytes(spec_len - len(sig)), True,
                 f"the spec's own format (Algorithm 17 step 10: zero-padded to sbytelen = {spec_len}), "
                 "which liboqs's variable-length verify also takes")
            case("nonzero_padded_to_sbytelen", sig + bytes(spec_len - len(sig) - 1) + b"\x01", False,
                 "Algorithm 18 step 12: the padding is zero bits")
    return cases


def _bytes_after(sig: bytes, bits: str, body_bytes: int) -> bytes:
    """`sig`'s header and nonce, then `bits` zero-padded to `body_bytes` bytes."""
    body = model.pack_bits(bits)
    return sig[:1 + model.NONCE_BYTES] + body + bytes(max(0, body_bytes - len(body)))


# --- the norm bound ------------------------------------------------------------------------

def _negacyclic_rows(a: np.ndarray) -> np.ndarray:
    """Row k is x^k * a in Z[x]/(x^n + 1)."""
    n = len(a)
    rows = np.empty((n, n), dtype=np.int64)
    row = a.copy()
    for k in range(n):
        rows[k] = row
        row = np.concatenate(([-row[-1]], row[:-1]))
    return rows


def move_to_norm(signed: Signed, logn: int, target: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray] | None:
    """(s1, s2) for `signed`'s nonce and message with ||(s1, s2)||^2 exactly `target`, or
    None if this signature cannot get there (the caller signs again).

    A move adds +-x^k * (g, -f) and changes the squared norm by d = 2<s, v> + ||v||^2.
    Single moves bring what remains to about two moves' worth (2 ||v||^2, where most pairs
    land), then a search over all pairs finds one landing on `target` exactly; when none
    does, one more single move and the search again. Every d has the parity of ||v||^2:
    when that is even no move changes the norm's parity, and half of all signatures
    cannot reach a given target.
    """
    n = model.degree(logn)
    f, g = model.secret_basis(signed.secret_key, logn)
    h = model.decode_public_key(signed.public_key, logn)
    nonce, s2 = model.parse_signature(signed.signature, logn)
    s1 = model.s1_of(model.hash_to_point(nonce, signed.message, n), s2, h)
    rows_g, rows_f = _negacyclic_rows(g), _negacyclic_rows(f)
    step = int((f * f).sum() + (g * g).sum())               # ||v||^2, the same for every move
    signs = np.concatenate((np.ones(n, dtype=np.int64), -np.ones(n, dtype=np.int64)))
    gram = rows_g @ rows_g.T + rows_f @ rows_f.T            # <v_j, v_k>
    shift = np.arange(2 * n) % n
    cross = 2 * np.outer(signs, signs) * gram[np.ix_(shift, shift)]   # 2 <+-v_a, +-v_b>
    rng = np.random.default_rng(seed)

    def deltas() -> np.ndarray:
        inner = rows_g @ s1 - rows_f @ s2                   # <s, v_k>
        return np.concatenate((2 * inner + step, -2 * inner + step))  # +v_k, then -v_k

    def moved(move: int, s1: np.ndarray, s2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        sign = int(signs[move])
        return s1 + sign * rows_g[move % n], s2 - sign * rows_f[move % n]

    def fits(s1: np.ndarray, s2: np.ndarray) -> bool:
        # s1 stays its own centred representative; s2 stays encodable
        return bool(np.abs(s1).max() < model.Q // 2 and np.abs(s2).max() <= model.REFERENCE_MAX_COEFFICIENT)

    for _ in range(200):
        remaining = target - model.squared_norm(s1, s2)
        if remaining == 0:
            return s1, s2
        if remaining % 2 and step % 2 == 0:
            return None
        d = deltas()
        if remaining % 2 == 0 and abs(remaining - 2 * step) < 4 * int(d.std()):
            for a, b in np.argwhere(d[:, None] + d[None, :] + cross == remaining):
                t1, t2 = moved(int(b), *moved(int(a), s1, s2))
                if fits(t1, t2) and model.squared_norm(t1, t2) == target:
                    return t1, t2
        # one single move towards two moves' worth from the target (a few near-best, at
        # random, so that a failed pair search is not repeated)
        closest = np.argsort(np.abs(remaining - d - 2 * step))[:4]
        s1, s2 = moved(int(rng.choice(closest)), s1, s2)
        if not fits(s1, s2):
            return None
    return None


def norm_cases(sign: Callable[[], Signed], logn: int, padded: bool, attempts: int = 40) -> list[EdgeCase]:
    """The norm bound of Algorithm 16 step 6, "||(s1, s2)||^2 <= floor(beta^2)": a signature
    at exactly the bound (valid) and one at the bound + 1 (invalid), each from a fresh
    signature by `sign` moved inside its coset."""
    bound = model.NORM_BOUND[logn]
    cases = []
    for kind, target, valid in (("norm_at_bound", bound, True), ("norm_one_past_bound", bound + 1, False)):
        for _ in range(attempts):
            signed = sign()
            moved = move_to_norm(signed, logn, target)
            if moved is None:
                continue
            signature = _reencode(signed, moved[1], logn, padded)
            if signature is None:
                continue            # the padded variant's s2 no longer fits sbytelen
            verdict = model.verify(signed.public_key, signed.message, signature, logn, padded=padded)
            if verdict.squared_norm != target:
                raise AssertionError(f"{kind}: the model computes {verdict.squared_norm}, not {target}")
            cases.append(EdgeCase(kind, signed.public_key, signed.message, signature, valid,
                                  f"Algorithm 16: ||(s1, s2)||^2 = {target}, floor(beta^2) = {bound}"))
            break
        else:
            raise RuntimeError(f"no signature reached squared norm {target} in {attempts} attempts")
    return cases


def edge_cases(name: str, sign: Callable[[], Signed]) -> list[EdgeCase]:
    """Every edge case of the Falcon variant `name` (a key of VARIANTS); `sign` makes a fresh
    signature (of one key, or a fresh key too) each call. Each case's verdict is checked
    against the model here."""
    logn, padded = VARIANTS[name]
    cases = encoding_cases(_unaligned(sign, logn), logn, padded) + norm_cases(sign, logn, padded)
    for case in cases:
        verdict = model.verify(case.public_key, case.message, case.signature, logn, padded=padded)
        if verdict.valid != case.valid:
            raise AssertionError(f"{name} {case.kind}: the model says {verdict.reason}, the case says {case.valid}")
    return cases


def _unaligned(sign: Callable[[], Signed], logn: int) -> Signed:
    """A signature whose s2 encoding ends inside a byte (7 in 8 do: it has unused bits) and
    has a zero coefficient (about 7 in 10 of Falcon-512's: one to write as minus zero)."""
    for _ in range(64):
        signed = sign()
        s2 = model.parse_signature(signed.signature, logn)[1]
        if len(model.compress_bits(s2)) % 8 and (s2 == 0).any():
            return signed
    raise RuntimeError("no signature with unused bits and a zero coefficient in 64")


def liboqs_signer(name: str, message: bytes | Callable[[bytes], bytes], *,
                  keypair: KeyPair | None = None) -> Callable[[], Signed]:
    """A liboqs signature of `message` (or of `message(public_key)`, for a transaction,
    whose signing digest covers its sender's key) for each call: by `keypair`, signed
    again each time (Falcon's nonce is random), or by fresh liboqs keys each call."""
    from qmemo.crypto.schemes import get_scheme

    scheme = get_scheme(name, "liboqs")

    def sign() -> Signed:
        pair = keypair or scheme.keypair()
        signed = message(pair.public_key) if callable(message) else message
        return Signed(pair.public_key, pair.secret_key, signed, scheme.sign(pair.secret_key, signed))
    return sign
