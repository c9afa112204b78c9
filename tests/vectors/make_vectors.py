"""Write tests/vectors/chain_core.json, signature_lengths.json and admit_kernel.json: shared test vectors.

    .venv/bin/python tests/vectors/make_vectors.py            # (re)write the vectors
    .venv/bin/python tests/vectors/make_vectors.py --check    # exit 1 if a file is stale
    .venv/bin/python tests/vectors/make_vectors.py --new-keys # new Falcon keys and signatures

What the vectors hold (docs/protocol.md explains every encoding): transaction
encodings with their signing digests, ids and sender addresses; encodings a decoder
must reject, with the error code; Merkle roots of 0..9 leaves and an inclusion proof;
a signed block with its header digests and hash; a genesis and its hash; the domain
strings. tests/unit/test_vectors.py checks the code against this file.

signature_lengths.json is the case table of the signature-length rule (a rule Python
and C both apply): for every registered scheme its sizes and whether its signatures
have one fixed length, as the registry states them, and cases of public-key and
signature lengths with the verdict on length grounds alone. Each verdict is written
from what the case is (the longest signature: accept; one byte short: accept only for a
variable-length scheme; ...), not by calling the rule under test.
tests/unit/test_signature_lengths.py holds the Python rule and the native batch
verifier to it.

admit_kernel.json (`build_admit`): framed POST /txs bodies with what decode_frames and
Transaction.decode make of them - per record its error code, or its digests and signature
check (valid transactions of Falcon-512, padded Falcon-512, ML-DSA-44 and Ed25519, one
mutation per decode rule, framing errors). tests/unit/test_admit_kernel.py checks both the
Python path and the native admission kernel against it.

Deterministic inputs: the Ed25519 key is derived from a fixed seed and Ed25519 signs
deterministically. Falcon-512 keys cannot be derived from a seed through liboqs, and
its signatures are randomized, so the Falcon keys (test keys, secret included) and
each Falcon signature are generated once and then read back from the existing file:
a rerun reproduces the file byte for byte. A Falcon signature is reused only if it
still verifies over the message the code now computes; otherwise it is signed afresh.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import orjson

from qmemo.core.block import make_block
from qmemo.core.codec import U16_MAX, U32_MAX, U64_MAX
from qmemo.core.genesis import genesis_encoding, parse_genesis
from qmemo.core.hashing import Domain, blake3_512
from qmemo.core.merkle import EMPTY_LEAF, merkle_proof, merkle_root
from qmemo.core.transaction import MAX_PAYLOAD_BYTES, Transaction, derive_address
from qmemo.crypto.schemes import SchemeInfo, get_scheme, scheme_names
from qmemo.crypto.verifier import RegistryVerifier, scheme_table
from qmemo.errors import DecodeError
from qmemo.frames import decode_frames, encode_frames

VECTORS = Path(__file__).with_name("chain_core.json")
FORMAT = "qmemo-core-vectors/1"
LENGTHS = Path(__file__).with_name("signature_lengths.json")
LENGTHS_FORMAT = "qmemo-signature-lengths/1"
# Falcon's compressed and padded encodings of one parameter set: each gets a case at the
# other's signature length.
FALCON_PAIRS = {"Falcon-512": "Falcon-padded-512", "Falcon-1024": "Falcon-padded-1024"}
ED25519_SEED = bytes(range(32))


def ed25519_key() -> dict[str, str]:
    import nacl.signing

    return {"name": "carol", "scheme": "Ed25519", "secret_key": ED25519_SEED.hex(),
            "public_key": bytes(nacl.signing.SigningKey(ED25519_SEED).verify_key).hex()}


def falcon_key(name: str) -> dict[str, str]:
    pair = get_scheme("Falcon-512").keypair()
    return {"name": name, "scheme": "Falcon-512", "public_key": pair.public_key.hex(),
            "secret_key": pair.secret_key.hex()}


class Signer:
    """Signs as a key of the vectors, reusing a stored Falcon signature of the same message."""

    def __init__(self, previous: dict[str, str], keep: tuple[str, ...] = ("Falcon-512",)) -> None:
        self.previous = previous     # message hex -> signature hex, from the existing file
        self.keep = keep             # the randomized schemes whose signatures are stored
        self.used: dict[str, str] = {}

    def __call__(self, key: dict[str, str]):
        scheme = get_scheme(key["scheme"])
        public_key, secret_key = bytes.fromhex(key["public_key"]), bytes.fromhex(key["secret_key"])

        def sign(message: bytes) -> bytes:
            stored = self.previous.get(message.hex())
            if stored is not None and scheme.verify(public_key, message, bytes.fromhex(stored)):
                signature = bytes.fromhex(stored)
            else:
                signature = scheme.sign(secret_key, message)
            if scheme.name in self.keep:   # randomized: keep it so reruns reproduce the file
                self.used[message.hex()] = signature.hex()
            return signature
        return sign


def transaction_vector(description: str, tx: Transaction) -> dict:
    return {"description": description, "json": tx.to_json(), "encoded": tx.encoded.hex(),
            "signing_digest": tx.signing_digest.hex(), "id": tx.id.hex(), "sender": tx.sender.hex()}


def build(previous: dict | None, new_keys: bool) -> dict:
    keys = {k["name"]: k for k in previous["keys"]} if previous and not new_keys else \
        {"alice": falcon_key("alice"), "validator-0": falcon_key("validator-0")}
    keys["carol"] = ed25519_key()
    sign = Signer({} if new_keys or not previous else previous.get("falcon_signatures", {}))
    alice, carol, validator = keys["alice"], keys["carol"], keys["validator-0"]
    address = {name: derive_address(get_scheme(k["scheme"]).info.scheme_id, bytes.fromhex(k["public_key"]))
               for name, k in keys.items()}

    falcon_tx = Transaction(1, 1, bytes.fromhex(alice["public_key"]), 0, address["carol"], 1_000, 10,
                            bytes(range(256))).signed(sign(alice))
    ed_tx = Transaction(1, 100, bytes.fromhex(carol["public_key"]), 7, address["alice"], 25, 1).signed(sign(carol))
    extreme_tx = Transaction(U32_MAX, 255, b"\xaa" * 3, U64_MAX, b"\xbb" * 32, U64_MAX, U64_MAX, b"\xcc")
    transactions = [transaction_vector("Falcon-512 transfer with a 256-byte payload (MEMO's body size)", falcon_tx),
                    transaction_vector("Ed25519 transfer, empty payload", ed_tx),
                    transaction_vector("unsigned, every integer at its maximum (structure only)", extreme_tx)]

    oversized = bytearray(Transaction(1, 1, b"", 0, bytes(32), 0, 0).encoded)
    oversized[64:66] = (MAX_PAYLOAD_BYTES + 1).to_bytes(2, "little")
    oversized[-2:-2] = bytes(MAX_PAYLOAD_BYTES + 1)
    bad_version = bytearray(ed_tx.encoded)
    bad_version[0] = 2
    invalid = [
        {"description": "truncated: one byte short", "encoded": ed_tx.encoded[:-1].hex(), "error": "truncated"},
        {"description": "truncated: only part of the fixed fields", "encoded": ed_tx.encoded[:40].hex(),
         "error": "truncated"},
        {"description": "one trailing byte", "encoded": (ed_tx.encoded + b"\x00").hex(), "error": "trailing_bytes"},
        {"description": "version 2", "encoded": bytes(bad_version).hex(), "error": "unsupported_version"},
        {"description": f"payload of {MAX_PAYLOAD_BYTES + 1} bytes", "encoded": bytes(oversized).hex(),
         "error": "oversized"},
    ]

    leaf_ids = [blake3_512(Domain.SELF_TEST, bytes([i])) for i in range(9)]
    merkle = {
        "leaf_ids": [i.hex() for i in leaf_ids],
        "empty_leaf": EMPTY_LEAF.hex(),
        "roots": [{"leaf_count": n, "root": merkle_root(leaf_ids[:n]).hex()} for n in range(10)],
        "proof": {"leaf_count": 7, "leaf_id": leaf_ids[5].hex(), "root": merkle_root(leaf_ids[:7]).hex(),
                  "proof": merkle_proof(leaf_ids[:7], 5).to_json()},
    }

    genesis_document = {
        "format": "qmemo-genesis/1", "chain_id": 1, "genesis_time_ms": 1_767_225_600_000,
        "block_interval_ms": 2000, "producer_timeout_ms": 2000, "max_clock_drift_ms": 500,
        "max_block_transactions": 4000, "min_fee": 1, "tx_schemes": ["Falcon-512", "Ed25519"],
        "validators": [{"name": "validator-0", "scheme": "Falcon-512", "public_key": validator["public_key"]}],
        "accounts": [{"address": address["alice"].hex(), "balance": 1_000_000},
                     {"address": address["carol"].hex(), "balance": 1_000_000}],
    }
    genesis = parse_genesis(genesis_document, scheme_table(["Falcon-512", "Ed25519"]))
    block = make_block(chain_id=1, height=1, previous_hash=genesis.hash,
                       timestamp_ms=genesis.genesis_time_ms + genesis.block_interval_ms, producer_index=0,
                       transactions=(falcon_tx, ed_tx), sign=sign(validator))

    return {
        "format": FORMAT,
        "generated_by": "tests/vectors/make_vectors.py (see its docstring); encodings: docs/protocol.md",
        "domains": {domain.name: domain.value for domain in Domain},
        "keys": [alice, validator, carol],
        "transactions": transactions,
        "invalid_transactions": invalid,
        "merkle": merkle,
        "genesis": {"document": genesis_document, "encoding": genesis_encoding(genesis).hex(),
                    "hash": genesis.hash.hex()},
        "block": {"json": block.to_json(), "encoded": block.encode().hex(),
                  "header_encoded": block.header.encoded.hex(),
                  "signing_digest": block.header.signing_digest.hex(), "hash": block.hash.hex()},
        "falcon_signatures": dict(sorted(sign.used.items())),
    }


def length_cases(info: SchemeInfo) -> list[tuple[str, int, int, bool]]:
    """(description, public key bytes, signature bytes, accept) for one scheme."""
    key, longest, fixed = info.public_key_bytes, info.max_signature_bytes, info.fixed_signature_length
    cases = [
        ("exact: the longest signature", key, longest, True),
        ("signature one byte short", key, longest - 1, not fixed),
        ("signature one byte long", key, longest + 1, False),
        ("empty signature", key, 0, False),
        ("one-byte signature", key, 1, not fixed),
        (f"signature of {U16_MAX} bytes, the most a transaction carries", key, U16_MAX, False),
        ("public key one byte short", key - 1, longest, False),
        ("public key one byte long", key + 1, longest, False),
        ("empty public key", 0, longest, False),
    ]
    if info.name in FALCON_PAIRS:
        padded = get_scheme(FALCON_PAIRS[info.name]).info
        cases.append((f"the length of a {padded.name} signature", key, padded.max_signature_bytes, True))
    elif info.name in FALCON_PAIRS.values():
        # liboqs 0.13 accepts a padded signature with its zero padding cut off; we never do.
        cases.append(("padding cut off: 32 bytes short", key, longest - 32, False))
    return cases


def build_lengths() -> dict:
    infos = [get_scheme(name).info for name in scheme_names()]
    return {
        "format": LENGTHS_FORMAT,
        "generated_by": "tests/vectors/make_vectors.py (see its docstring)",
        "rule": "a public key of exactly public_key_bytes; a signature of exactly max_signature_bytes "
                "(fixed length) or of 1..max_signature_bytes (variable length)",
        "schemes": {info.name: {"family": info.family, "public_key_bytes": info.public_key_bytes,
                                "max_signature_bytes": info.max_signature_bytes,
                                "signature_length": "fixed" if info.fixed_signature_length else "variable"}
                    for info in infos},
        "cases": [{"scheme": info.name, "description": description, "public_key_bytes": key,
                   "signature_bytes": signature, "accept": accept}
                  for info in infos for description, key, signature, accept in length_cases(info)],
    }


# --- tests/vectors/admit_kernel.json: the admission kernel's case table -------------------

ADMIT_VECTORS = Path(__file__).with_name("admit_kernel.json")
ADMIT_FORMAT = "qmemo-admit-vectors/1"
ADMIT_CHAIN_ID = 1
# Randomized signers whose keys and signatures the admit file stores (reruns reproduce it).
ADMIT_SCHEMES = ("Falcon-512", "Falcon-padded-512", "ML-DSA-44")


def admit_record(encoding: bytes) -> dict:
    """What the Python path makes of one record: its DecodeError code, or its digests and
    the signature check (chain id first, then the registry's verifier)."""
    try:
        tx = Transaction.decode(encoding)
    except DecodeError as exc:
        return {"error": exc.code}
    if tx.chain_id != ADMIT_CHAIN_ID:
        signature = "wrong_chain_id"
    else:
        valid = RegistryVerifier().verify(tx.scheme_id, tx.public_key, tx.signing_digest, tx.signature)
        signature = "valid" if valid else "invalid"
    return {"scheme_id": tx.scheme_id, "chain_id": tx.chain_id, "nonce": tx.nonce, "amount": tx.amount,
            "fee": tx.fee, "signing_digest": tx.signing_digest.hex(), "id": tx.id.hex(),
            "sender": tx.sender.hex(), "signature": signature}


def admit_batch(description: str, body: bytes, max_count: int = 1000) -> dict:
    """A framed body and what decode_frames and Transaction.decode make of it."""
    vector: dict = {"description": description, "body": body.hex(), "max_count": max_count}
    try:
        records = decode_frames(body, max_count, "transaction")
    except DecodeError as exc:
        return {**vector, "error": {"code": exc.code, "http_status": exc.http_status, "detail": exc.detail}}
    return {**vector, "records": [admit_record(record) for record in records]}


def decode_mutations(tx: Transaction) -> list[tuple[str, bytes]]:
    """One encoding per rule of Transaction.decode, each breaking only that rule."""
    encoded = tx.encoded
    unsigned_end = len(encoded) - 2 - len(tx.signature)
    version = bytearray(encoded)
    version[0] = 2
    oversized = bytearray(encoded)
    oversized[64:66] = (MAX_PAYLOAD_BYTES + 1).to_bytes(2, "little")
    oversized[unsigned_end:unsigned_end] = bytes(MAX_PAYLOAD_BYTES + 1 - len(tx.payload))
    long_key = bytearray(encoded[:unsigned_end + 1])      # the key's length runs past the record
    long_key[62:64] = (0xFFFF).to_bytes(2, "little")
    return [
        ("truncated: empty record", b""),
        ("truncated: the fixed part minus one byte", encoded[:65]),
        ("truncated: no room for the signature length", bytes(long_key)),
        ("truncated: signature one byte short", encoded[:-1]),
        ("trailing_bytes: one byte after the signature", encoded + b"\x00"),
        ("unsupported_version: version 2", bytes(version)),
        (f"oversized: payload of {MAX_PAYLOAD_BYTES + 1} bytes", bytes(oversized)),
    ]


def build_admit(core: dict, previous: dict | None, new_keys: bool) -> dict:
    keys = {k["name"]: k for k in core["keys"]}
    stored = {k["name"]: k for k in previous["keys"]} if previous and not new_keys else {}
    for name, scheme in (("dave", "ML-DSA-44"), ("erin", "Falcon-padded-512")):
        keys[name] = stored.get(name) or scheme_key(name, scheme)
    sign = Signer({} if new_keys or not previous else previous.get("signatures", {}), keep=ADMIT_SCHEMES)
    carol = derive_address(100, bytes.fromhex(keys["carol"]["public_key"]))

    def transfer(name: str, nonce: int, chain_id: int = ADMIT_CHAIN_ID, payload: bytes = bytes(range(256)),
                 public_key: bytes | None = None) -> Transaction:
        key = keys[name]
        scheme_id = get_scheme(key["scheme"]).info.scheme_id
        tx = Transaction(chain_id, scheme_id, public_key or bytes.fromhex(key["public_key"]), nonce, carol,
                         1_000 + nonce, 10, payload)
        return tx.signed(sign(key))

    falcon, padded, mldsa = transfer("alice", 1), transfer("erin", 0), transfer("dave", 0)
    ed25519 = transfer("carol", 0, payload=b"")
    flipped = bytearray(falcon.encoded)
    flipped[-1] ^= 0x01
    bad_signature = bytes(flipped)
    wrong_chain = transfer("alice", 2, chain_id=2).encoded
    short_key = transfer("alice", 3, public_key=b"\x01\x02\x03").encoded  # the verifier's length rule
    mutations = decode_mutations(ed25519)
    frames = encode_frames
    batches = [
        admit_batch("valid transactions of every verifier kind (Falcon, padded Falcon, ML-DSA, Ed25519)",
                    frames([falcon.encoded, padded.encoded, mldsa.encoded, ed25519.encoded])),
        admit_batch("decoded, not valid: a flipped signature bit, another chain, a 3-byte key",
                    frames([bad_signature, wrong_chain, short_key])),
        admit_batch("one record per decode rule between valid ones: a bad record is its own rejection",
                    frames([falcon.encoded, *(encoding for _, encoding in mutations), mldsa.encoded])),
        *(admit_batch(f"a lone record, {description}", frames([encoding])) for description, encoding in mutations),
        admit_batch("an empty body: no records", b""),
        admit_batch("exactly max_count records", frames([falcon.encoded, ed25519.encoded]), max_count=2),
        admit_batch("more than max_count records: the whole batch is refused",
                    frames([falcon.encoded, ed25519.encoded, mldsa.encoded]), max_count=2),
        admit_batch("a truncated length prefix after one record", frames([falcon.encoded]) + b"\x01\x00"),
        admit_batch("a length that runs past the body", frames([falcon.encoded, ed25519.encoded])[:-3]),
        admit_batch("a length of 2^32 - 1", frames([ed25519.encoded]) + b"\xff\xff\xff\xff"),
    ]
    return {
        "format": ADMIT_FORMAT,
        "generated_by": "tests/vectors/make_vectors.py (build_admit); rules: docs/protocol.md, sections 5 and 12",
        "chain_id": ADMIT_CHAIN_ID,
        "keys": [keys["dave"], keys["erin"]],
        "batches": batches,
        "signatures": dict(sorted(sign.used.items())),
    }


def scheme_key(name: str, scheme: str) -> dict[str, str]:
    pair = get_scheme(scheme).keypair()
    return {"name": name, "scheme": scheme, "public_key": pair.public_key.hex(), "secret_key": pair.secret_key.hex()}


def render(vectors: dict) -> bytes:
    return orjson.dumps(vectors, option=orjson.OPT_INDENT_2) + b"\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a vectors file is out of date")
    parser.add_argument("--new-keys", action="store_true", help="generate new keys and randomized signatures")
    args = parser.parse_args(argv)
    previous = orjson.loads(VECTORS.read_bytes()) if VECTORS.exists() else None
    core = build(previous, args.new_keys)
    previous_admit = orjson.loads(ADMIT_VECTORS.read_bytes()) if ADMIT_VECTORS.exists() else None
    files = {VECTORS: render(core), LENGTHS: render(build_lengths()),
             ADMIT_VECTORS: render(build_admit(core, previous_admit, args.new_keys))}
    stale = 0
    for path, text in files.items():
        if args.check:
            current = path.read_bytes() if path.exists() else b""
            print(f"{path}: {'up to date' if text == current else 'STALE: rerun make_vectors.py'}")
            stale += text != current
        else:
            path.write_bytes(text)
            print(f"wrote {path}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
