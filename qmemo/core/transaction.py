"""Transactions: fields, the canonical binary encoding, the JSON form, digests and addresses.

A transaction moves `amount` from the account of its signer to `recipient` and pays
`fee` to the block's producer. The signer is named by public key, and the account it
spends from is *derived* from that key (`derive_address`), so a signature by any other
key can never spend from it.

Canonical encoding (little-endian, fixed-width; docs/protocol.md, "Transactions"):

    offset  size  field
    0       1     version            (1)
    1       4     chain_id           u32
    5       1     scheme_id          u8, the registry's wire id (Falcon-512 = 1)
    6       8     nonce              u64
    14      32    recipient          address
    46      8     amount             u64
    54      8     fee                u64
    62      2     public_key_length  u16
    64      2     payload_length     u16, at most MAX_PAYLOAD_BYTES
    66      pk    public_key
    ..      pl    payload            opaque bytes
    ------  end of the unsigned encoding
    ..      2     signature_length   u16 (Falcon signatures vary in length)
    ..      sl    signature

Digests (BLAKE3-512, each under its own domain, see qmemo.core.hashing):
- signing digest = H(TX_SIGNING, unsigned encoding): what the sender signs; the chain
  id is inside, so a transaction signed for one chain is invalid on every other.
- id = H(TX_ID, signing digest || signature_length || signature): commits to every byte
  of the full encoding (the signing digest stands for the unsigned part) while hashing
  ~0.7 KB instead of ~1.9 KB for a Falcon-512 transaction - the id is on the admission
  hot path, next to a ~50 us signature check.
- sender address = H(ADDRESS, scheme_id || public_key), first ADDRESS_BYTES bytes.

Decoding is structural and strict (short, trailing, unknown version, payload over the
limit: DecodeError). Whether the scheme, key and signature sizes suit the chain is a
rule checked against the genesis (`qmemo.core.state.check_transaction_form`).

Speed: a `Transaction` is decoded and hashed once; the encoding, both digests and the
sender address are computed on construction and kept. Decoding unpacks the 66-byte
fixed part with one precompiled Struct and fills the slots directly (a frozen
dataclass's generated __init__ costs about twice as much).

Pure: no I/O, no clock, no randomness; never imports a signature library.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from qmemo.core.codec import U8_MAX, U16_MAX, U32_MAX, U64_MAX, expect_object, hex_field, int_field
from qmemo.core.hashing import DIGEST_BYTES, Domain, hasher_factory
from qmemo.errors import DecodeError

TX_VERSION = 1
ADDRESS_BYTES = 32          # 256-bit addresses: stealing one needs a 2^256 (2^128 with Grover) preimage
MAX_PAYLOAD_BYTES = 1024    # MEMO's transaction bodies are 256 bytes; 4x leaves room for tests

_FIXED = struct.Struct("<BIBQ32sQQHH")   # version .. payload_length
FIXED_BYTES = _FIXED.size                # 66
_SIG_LENGTH = struct.Struct("<H")
_new_signing_hasher = hasher_factory(Domain.TX_SIGNING)
_new_id_hasher = hasher_factory(Domain.TX_ID)
_new_address_hasher = hasher_factory(Domain.ADDRESS)


@lru_cache(maxsize=1 << 13)
def derive_address(scheme_id: int, public_key: bytes) -> bytes:
    """The account address of a public key: H(ADDRESS, scheme_id || public_key)[:32].

    Memoized because a sender signs many transactions (the cache keeps each key alive:
    8,192 Falcon-512 keys are ~8 MB); bounded, so a flood of fresh keys costs only the
    hashing it would have cost anyway.
    """
    hasher = _new_address_hasher()
    hasher.update(bytes((scheme_id,)))
    hasher.update(public_key)
    return hasher.digest(DIGEST_BYTES)[:ADDRESS_BYTES]


@dataclass(frozen=True, slots=True, init=False, repr=False)
class Transaction:
    """A signed transfer. Immutable; build with the constructor or `decode`/`from_json`."""

    chain_id: int
    scheme_id: int
    public_key: bytes
    nonce: int
    recipient: bytes
    amount: int
    fee: int
    payload: bytes
    signature: bytes
    # Derived once, on construction.
    encoded: bytes = field(init=False, compare=False)
    signing_digest: bytes = field(init=False, compare=False)
    id: bytes = field(init=False, compare=False)
    sender: bytes = field(init=False, compare=False)

    def __init__(self, chain_id: int, scheme_id: int, public_key: bytes, nonce: int, recipient: bytes,
                 amount: int, fee: int, payload: bytes = b"", signature: bytes = b"") -> None:
        if not (type(chain_id) is type(scheme_id) is type(nonce) is type(amount) is type(fee) is int):
            raise DecodeError("transaction integers must be int (not bool or float)", code="malformed")
        if not (type(public_key) is type(recipient) is type(payload) is type(signature) is bytes):
            raise DecodeError("transaction byte fields must be bytes", code="malformed")
        if len(recipient) != ADDRESS_BYTES:
            raise DecodeError(f"recipient must be a {ADDRESS_BYTES}-byte address", code="out_of_range")
        if len(payload) > MAX_PAYLOAD_BYTES or len(public_key) > U16_MAX or len(signature) > U16_MAX:
            raise DecodeError(f"payload over {MAX_PAYLOAD_BYTES} bytes, or key or signature over {U16_MAX}",
                              code="oversized")
        try:   # struct checks every integer against its field's width
            fixed = _FIXED.pack(TX_VERSION, chain_id, scheme_id, nonce, recipient, amount, fee,
                                len(public_key), len(payload))
        except struct.error:
            for name, value, maximum in (("chain_id", chain_id, U32_MAX), ("scheme_id", scheme_id, U8_MAX),
                                         ("nonce", nonce, U64_MAX), ("amount", amount, U64_MAX), ("fee", fee, U64_MAX)):
                if not 0 <= value <= maximum:
                    raise DecodeError(f"transaction {name} = {value} is outside 0..{maximum}",
                                      code="out_of_range") from None
            raise
        unsigned = b"".join((fixed, public_key, payload))
        encoded = b"".join((unsigned, _SIG_LENGTH.pack(len(signature)), signature))
        _fill(self, chain_id, scheme_id, public_key, nonce, recipient, amount, fee, payload, signature,
              encoded, len(unsigned))

    @classmethod
    def decode(cls, data: bytes) -> Transaction:
        """Parse the canonical encoding; DecodeError for anything else."""
        return _decode(cls, data, None)

    @classmethod
    def decode_with_digests(cls, data: bytes, signing_digest: bytes, tx_id: bytes, sender: bytes) -> Transaction:
        """`decode`, with the signing digest, id and sender address already computed by
        the caller under this module's rules (the node's native admission kernel, proven
        equal by tests/vectors/admit_kernel.json): the structure is checked as in
        `decode`, nothing is hashed again. A caller handing in other digests gets a
        transaction that lies about itself: only code that computed them may call this."""
        return _decode(cls, data, (signing_digest, tx_id, sender))

    def to_json(self) -> dict[str, Any]:
        """The JSON wire form: integers as numbers, byte strings as lowercase hex."""
        return {
            "chain_id": self.chain_id, "scheme_id": self.scheme_id, "public_key": self.public_key.hex(),
            "nonce": self.nonce, "recipient": self.recipient.hex(), "amount": self.amount,
            "fee": self.fee, "payload": self.payload.hex(), "signature": self.signature.hex(),
        }

    @classmethod
    def from_json(cls, obj: Any) -> Transaction:
        """Parse the JSON wire form (exactly the keys `to_json` writes); DecodeError otherwise."""
        what = "transaction"
        obj = expect_object(obj, _JSON_KEYS, what)
        return cls(
            chain_id=int_field(obj, "chain_id", U32_MAX, what),
            scheme_id=int_field(obj, "scheme_id", U8_MAX, what),
            public_key=hex_field(obj, "public_key", what),
            nonce=int_field(obj, "nonce", U64_MAX, what),
            recipient=hex_field(obj, "recipient", what, length=ADDRESS_BYTES),
            amount=int_field(obj, "amount", U64_MAX, what),
            fee=int_field(obj, "fee", U64_MAX, what),
            payload=hex_field(obj, "payload", what, max_length=MAX_PAYLOAD_BYTES),
            signature=hex_field(obj, "signature", what),
        )

    @property
    def size(self) -> int:
        """Bytes of the canonical encoding (what mempool limits count)."""
        return len(self.encoded)

    def signed(self, sign: Callable[[bytes], bytes]) -> Transaction:
        """This transaction with `sign(signing_digest)` as its signature."""
        return replace(self, signature=sign(self.signing_digest))

    def __repr__(self) -> str:
        return (f"Transaction(id={self.id.hex()[:16]}.., sender={self.sender.hex()[:16]}.., "
                f"nonce={self.nonce}, amount={self.amount}, fee={self.fee})")


_JSON_KEYS = frozenset(("chain_id", "scheme_id", "public_key", "nonce", "recipient", "amount", "fee",
                        "payload", "signature"))
_new = object.__new__
# The slots' own setters: they bypass the frozen __setattr__ at half the cost of
# object.__setattr__, and are used only while a new object is filled.
(_set_chain_id, _set_scheme_id, _set_public_key, _set_nonce, _set_recipient, _set_amount, _set_fee,
 _set_payload, _set_signature, _set_encoded, _set_signing_digest, _set_id, _set_sender) = (
    Transaction.__dict__[name].__set__ for name in Transaction.__slots__)


def _decode(cls: type[Transaction], data: bytes, digests: tuple[bytes, bytes, bytes] | None) -> Transaction:
    """Transaction.decode's structural parse; the digests computed here unless given."""
    if type(data) is not bytes:
        data = bytes(data)
    size = len(data)
    if size < FIXED_BYTES:
        raise DecodeError(f"transaction truncated: {size} bytes, the fixed part is {FIXED_BYTES}",
                          code="truncated")
    version, chain_id, scheme_id, nonce, recipient, amount, fee, pk_length, payload_length = \
        _FIXED.unpack_from(data)
    if version != TX_VERSION:
        raise DecodeError(f"transaction version {version} is not {TX_VERSION}", code="unsupported_version")
    if payload_length > MAX_PAYLOAD_BYTES:
        raise DecodeError(f"payload of {payload_length} bytes, more than {MAX_PAYLOAD_BYTES}",
                          code="oversized")
    payload_start = FIXED_BYTES + pk_length
    unsigned_end = payload_start + payload_length
    if size < unsigned_end + 2:
        raise DecodeError(f"transaction truncated: {size} bytes, fields need {unsigned_end + 2}",
                          code="truncated")
    signature_start = unsigned_end + 2
    end = signature_start + _SIG_LENGTH.unpack_from(data, unsigned_end)[0]
    if size != end:
        raise DecodeError(f"transaction is {size} bytes, its fields say {end}",
                          code="truncated" if size < end else "trailing_bytes")
    tx = _new(cls)
    public_key, payload, signature = data[FIXED_BYTES:payload_start], data[payload_start:unsigned_end], \
        data[signature_start:]
    if digests is None:
        _fill(tx, chain_id, scheme_id, public_key, nonce, recipient, amount, fee, payload, signature, data,
              unsigned_end)
    else:
        _set_slots(tx, chain_id, scheme_id, public_key, nonce, recipient, amount, fee, payload, signature, data,
                   *digests)
    return tx


def _fill(tx: Transaction, chain_id: int, scheme_id: int, public_key: bytes, nonce: int, recipient: bytes,
          amount: int, fee: int, payload: bytes, signature: bytes, encoded: bytes, unsigned_end: int) -> None:
    """Set every slot of a new transaction, computing the digests once."""
    view = memoryview(encoded)
    hasher = _new_signing_hasher()
    hasher.update(view[:unsigned_end])
    signing_digest = hasher.digest(DIGEST_BYTES)
    hasher = _new_id_hasher()
    hasher.update(signing_digest)
    hasher.update(view[unsigned_end:])
    _set_slots(tx, chain_id, scheme_id, public_key, nonce, recipient, amount, fee, payload, signature, encoded,
               signing_digest, hasher.digest(DIGEST_BYTES), derive_address(scheme_id, public_key))


def _set_slots(tx: Transaction, chain_id: int, scheme_id: int, public_key: bytes, nonce: int, recipient: bytes,
               amount: int, fee: int, payload: bytes, signature: bytes, encoded: bytes, signing_digest: bytes,
               tx_id: bytes, sender: bytes) -> None:
    _set_chain_id(tx, chain_id)
    _set_scheme_id(tx, scheme_id)
    _set_public_key(tx, public_key)
    _set_nonce(tx, nonce)
    _set_recipient(tx, recipient)
    _set_amount(tx, amount)
    _set_fee(tx, fee)
    _set_payload(tx, payload)
    _set_signature(tx, signature)
    _set_encoded(tx, encoded)
    _set_signing_digest(tx, signing_digest)
    _set_id(tx, tx_id)
    _set_sender(tx, sender)

