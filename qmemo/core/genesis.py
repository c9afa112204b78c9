"""The genesis: a chain's parameters, validators and first balances; and the producer schedule.

The genesis file is JSON (docs/protocol.md, "Genesis"):

    {"format": "qmemo-genesis/1", "chain_id": 1, "genesis_time_ms": 1767225600000,
     "block_interval_ms": 2000, "producer_timeout_ms": 2000, "max_clock_drift_ms": 500,
     "max_block_transactions": 4000, "min_fee": 1, "tx_schemes": ["Falcon-512"],
     "validators": [{"name": "validator-0", "scheme": "Falcon-512", "public_key": "<hex>"}, ...],
     "accounts": [{"address": "<hex>", "balance": 1000000000}, ...]}

`genesis_from_json` parses a genesis file's bytes and `parse_genesis` checks every field of
the document; both return a `Genesis`, whose `hash` (BLAKE3-512
under the GENESIS domain of a canonical binary encoding, `genesis_encoding`) is the
`previous_hash` of block 1. Validators produce in the order listed.

Producer schedule (`scheduled_producer`): block h's primary producer is validator
(h - 1) mod n. Its slot opens `block_interval_ms` after the parent's timestamp. If it
misses it, every `producer_timeout_ms` the turn passes to the next validator in the
fallback order (h - 1 + 1) mod n, (h - 1 + 2) mod n, ..., wrapping around. Exactly one
validator is scheduled at any moment, so the rule is checkable from the header alone:
the header's timestamp says which window it was produced in.

`min_fee` is the least fee a transaction may pay (`check_transaction_form`, at admission
and in every block). It is required: a genesis written before it existed is refused with
a message saying to add it (its hash changes with it, so no default could keep an old
chain's blocks valid anyway).

Pure: no file reading (the caller hands in the file's bytes: qmemo.crypto.verifier.load_genesis
reads it, with the scheme registry's table) and no clock.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from qmemo.core.codec import U16_MAX, U32_MAX, U64_MAX, expect_object, hex_field, int_field
from qmemo.core.defaults import CHAIN
from qmemo.core.hashing import Domain, blake3_512
from qmemo.core.scheme_rules import SchemeTable
from qmemo.core.transaction import ADDRESS_BYTES, derive_address
from qmemo.errors import ConfigError, DecodeError

GENESIS_FORMAT = "qmemo-genesis/1"
# A genesis naming several shards (qmemo.core.shards parses it).
SHARDED_GENESIS_FORMAT = "qmemo-genesis/2"
# Balances are stored in SQLite's signed 64-bit INTEGER and every sum of balances must
# fit a u64: capping the total supply at 2^63 - 1 guarantees both, for every block.
MAX_TOTAL_SUPPLY = (1 << 63) - 1
_KEYS = frozenset(("format", "chain_id", "genesis_time_ms", "block_interval_ms", "producer_timeout_ms",
                   "max_clock_drift_ms", "max_block_transactions", "min_fee", "tx_schemes", "validators",
                   "accounts"))
_VALIDATOR_KEYS = frozenset(("name", "scheme", "public_key"))
_ACCOUNT_KEYS = frozenset(("address", "balance"))
_PARAMS = struct.Struct("<IQIIIIQ")


@dataclass(frozen=True, slots=True)
class Validator:
    """A block producer: its place in the schedule, name, scheme and key."""

    index: int
    name: str
    scheme_id: int
    public_key: bytes = field(repr=False)

    @property
    def address(self) -> bytes:
        """Where its fees are paid: the account its key derives."""
        return derive_address(self.scheme_id, self.public_key)


@dataclass(frozen=True, slots=True, repr=False)
class Genesis:
    """A parsed, checked genesis. Build with `parse_genesis`."""

    chain_id: int
    genesis_time_ms: int
    block_interval_ms: int
    producer_timeout_ms: int       # how long each producer in the fallback order has
    max_clock_drift_ms: int        # how far a header's timestamp may run ahead of a node's clock
    max_block_transactions: int
    min_fee: int                   # the least fee a transaction pays
    tx_scheme_ids: tuple[int, ...]  # schemes a transaction may use, in file order
    validators: tuple[Validator, ...]
    balances: tuple[tuple[bytes, int], ...]   # (address, balance), in file order
    schemes: SchemeTable = field(compare=False)   # every scheme the node knows (sizes, names)
    # A shard's view of a sharded genesis (qmemo.core.shards.Sharding): its place among the
    # shards and the map of all of them. None: an unsharded chain (qmemo-genesis/1).
    sharding: Any = field(default=None, compare=False)
    hash: bytes = field(init=False, compare=False)

    def __post_init__(self) -> None:
        if self.sharding is None:
            digest = blake3_512(Domain.GENESIS, genesis_encoding(self))
        else:   # every shard's chain commits to the whole sharded genesis and to its own place in it
            digest = blake3_512(Domain.GENESIS_SHARDED, struct.pack("<H", self.sharding.index),
                                self.sharding.document_encoding)
        object.__setattr__(self, "hash", digest)

    def scheme_name(self, scheme_id: int) -> str:
        rules = self.schemes.get(scheme_id)
        return rules.name if rules else f"scheme {scheme_id}"

    def to_json(self) -> dict[str, Any]:
        """The genesis file's JSON document (`parse_genesis` reads it back unchanged)."""
        return {
            "format": GENESIS_FORMAT, "chain_id": self.chain_id, "genesis_time_ms": self.genesis_time_ms,
            "block_interval_ms": self.block_interval_ms, "producer_timeout_ms": self.producer_timeout_ms,
            "max_clock_drift_ms": self.max_clock_drift_ms, "max_block_transactions": self.max_block_transactions,
            "min_fee": self.min_fee,
            "tx_schemes": [self.scheme_name(scheme_id) for scheme_id in self.tx_scheme_ids],
            "validators": [{"name": v.name, "scheme": self.scheme_name(v.scheme_id),
                            "public_key": v.public_key.hex()} for v in self.validators],
            "accounts": [{"address": address.hex(), "balance": balance} for address, balance in self.balances],
        }

    def __repr__(self) -> str:
        return (f"Genesis(chain_id={self.chain_id}, hash={self.hash.hex()[:16]}.., "
                f"validators={len(self.validators)}, accounts={len(self.balances)})")


def genesis_encoding(genesis: Genesis) -> bytes:
    """The canonical bytes the genesis hash is taken over (docs/protocol.md, "Genesis")."""
    parts = [_PARAMS.pack(genesis.chain_id, genesis.genesis_time_ms, genesis.block_interval_ms,
                          genesis.producer_timeout_ms, genesis.max_clock_drift_ms, genesis.max_block_transactions,
                          genesis.min_fee),
             struct.pack("<B", len(genesis.tx_scheme_ids)), bytes(genesis.tx_scheme_ids),
             struct.pack("<H", len(genesis.validators))]
    for validator in genesis.validators:
        name = validator.name.encode()
        parts += [struct.pack("<BH", validator.scheme_id, len(name)), name,
                  struct.pack("<H", len(validator.public_key)), validator.public_key]
    parts.append(struct.pack("<I", len(genesis.balances)))
    for address, balance in genesis.balances:
        parts += [address, struct.pack("<Q", balance)]
    return b"".join(parts)


def genesis_from_json(raw: bytes, schemes: SchemeTable, source: str = "the genesis") -> Genesis:
    """A genesis file's bytes, parsed and checked; ConfigError ("bad_genesis") naming
    `source` if it is not JSON or breaks a rule."""
    try:
        document = json.loads(raw)
    except ValueError as exc:       # not JSON, or not UTF-8
        raise ConfigError(f"genesis file {source} is not JSON: {exc}", code="bad_genesis") from None
    return parse_genesis(document, schemes)


def parse_genesis(document: Any, schemes: SchemeTable) -> Genesis:
    """Check a genesis JSON document against the rules and the known schemes."""
    try:
        return _parse(document, schemes)
    except DecodeError as exc:
        raise ConfigError(f"genesis: {exc}", code="bad_genesis") from None


def _parse(document: Any, schemes: SchemeTable) -> Genesis:
    if isinstance(document, dict) and "min_fee" not in document:
        raise ConfigError('genesis has no "min_fee" (written before fees had a minimum): add '
                          f'"min_fee": {CHAIN.min_fee} or make the devnet again with `qmemo genesis`',
                          code="bad_genesis")
    if isinstance(document, dict) and document.get("format") == SHARDED_GENESIS_FORMAT:
        raise ConfigError(f"genesis format is {SHARDED_GENESIS_FORMAT!r}: it names several shards, and a node "
                          "or tool reads it with qmemo.core.shards (a node picks its shard by its key, or "
                          "--shard)", code="bad_genesis")
    obj = expect_object(document, _KEYS, "genesis")
    if obj["format"] != GENESIS_FORMAT:
        raise ConfigError(f"genesis format is {obj['format']!r}, expected {GENESIS_FORMAT!r}", code="bad_genesis")
    params = parse_params(obj, "genesis")
    tx_scheme_ids = parse_tx_schemes(obj, schemes)
    validators = parse_validators(_list(obj, "validators", 1, U16_MAX), schemes, "genesis.validators")
    balances = parse_accounts(_list(obj, "accounts", 0, U32_MAX), "genesis.accounts")
    _require(sum(balance for _, balance in balances) <= MAX_TOTAL_SUPPLY,
             f"the total supply exceeds {MAX_TOTAL_SUPPLY} (2^63 - 1)")
    return Genesis(**params, tx_scheme_ids=tx_scheme_ids, validators=tuple(validators),
                   balances=tuple(balances), schemes=schemes)


# The chain parameters every genesis format shares, and their widths.
PARAMS = (("chain_id", U32_MAX), ("genesis_time_ms", U64_MAX), ("block_interval_ms", U32_MAX),
          ("producer_timeout_ms", U32_MAX), ("max_clock_drift_ms", U32_MAX), ("max_block_transactions", U32_MAX),
          ("min_fee", U64_MAX))


def parse_params(obj: Mapping[str, Any], what: str, names: tuple[str, ...] | None = None) -> dict[str, int]:
    """The chain parameters in `obj` (all of `PARAMS`, or those in `names`), checked."""
    params = {key: int_field(obj, key, maximum, what) for key, maximum in PARAMS if names is None or key in names}
    if "block_interval_ms" in params:
        _require(params["block_interval_ms"] > 0, "block_interval_ms must be positive")
        _require(params["producer_timeout_ms"] > 0, "producer_timeout_ms must be positive")
        # A clock running ahead may not reach into the next producer's window.
        _require(params["max_clock_drift_ms"] < params["producer_timeout_ms"],
                 "max_clock_drift_ms must be less than producer_timeout_ms")
        _require(params["max_block_transactions"] > 0, "max_block_transactions must be positive")
    return params


def parse_tx_schemes(obj: Mapping[str, Any], schemes: SchemeTable) -> tuple[int, ...]:
    """The ids of the schemes `obj["tx_schemes"]` allows for transactions, in file order."""
    tx_schemes = _list(obj, "tx_schemes", 1, 255)
    tx_scheme_ids = tuple(schemes.by_name(_string(name, "tx_schemes entry")).scheme_id for name in tx_schemes)
    _require(len(set(tx_scheme_ids)) == len(tx_scheme_ids), "tx_schemes lists a scheme twice")
    return tx_scheme_ids


def parse_validators(entries: list[Any], schemes: SchemeTable, what: str) -> list[Validator]:
    """A validator list (name, scheme, key), in producer order; names and keys unique."""
    validators = []
    for index, entry in enumerate(entries):
        where = f"{what}[{index}]"
        entry = expect_object(entry, _VALIDATOR_KEYS, where)
        rules = schemes.by_name(_string(entry["scheme"], f"{where}.scheme"))
        validators.append(Validator(index, _string(entry["name"], f"{where}.name"), rules.scheme_id,
                                    hex_field(entry, "public_key", where, length=rules.public_key_bytes)))
    _require(len({v.name for v in validators}) == len(validators), "two validators share a name")
    _require(len({v.public_key for v in validators}) == len(validators), "two validators share a key")
    return validators


def parse_accounts(entries: list[Any], what: str) -> list[tuple[bytes, int]]:
    """A funded account list (address, balance); each address once."""
    balances = []
    for index, entry in enumerate(entries):
        where = f"{what}[{index}]"
        entry = expect_object(entry, _ACCOUNT_KEYS, where)
        balances.append((hex_field(entry, "address", where, length=ADDRESS_BYTES),
                         int_field(entry, "balance", U64_MAX, where)))
    _require(len({address for address, _ in balances}) == len(balances), "an account is listed twice")
    return balances


def require(condition: bool, detail: str) -> None:
    """ConfigError ("bad_genesis") saying `detail` unless `condition` holds."""
    _require(condition, detail)


def _require(condition: bool, detail: str) -> None:
    if not condition:
        raise ConfigError(f"genesis: {detail}", code="bad_genesis")


def list_field(obj: Mapping[str, Any], key: str, minimum: int, maximum: int) -> list[Any]:
    """`obj[key]` as a list of `minimum` to `maximum` entries (ConfigError otherwise)."""
    return _list(obj, key, minimum, maximum)


def _list(obj: Mapping[str, Any], key: str, minimum: int, maximum: int) -> list[Any]:
    value = obj[key]
    _require(isinstance(value, list) and minimum <= len(value) <= maximum,
             f"{key} must be a list of {minimum} to {maximum} entries")
    return value


def _string(value: Any, what: str) -> str:
    _require(isinstance(value, str) and 0 < len(value.encode()) <= 255, f"{what} must be a non-empty string")
    return value


# --- the producer schedule ---------------------------------------------------------------

def fallback_order(genesis: Genesis, height: int) -> list[int]:
    """Validator indexes in the order they may produce block `height`: primary first."""
    count = len(genesis.validators)
    return [(height - 1 + rank) % count for rank in range(count)]


def scheduled_producer(genesis: Genesis, height: int, parent_timestamp_ms: int, timestamp_ms: int) -> int | None:
    """The validator allowed to produce block `height` stamped `timestamp_ms`, or None
    if that is earlier than the primary's slot (parent + block_interval_ms)."""
    elapsed_ms = timestamp_ms - parent_timestamp_ms - genesis.block_interval_ms
    if elapsed_ms < 0:
        return None
    rank = elapsed_ms // genesis.producer_timeout_ms % len(genesis.validators)
    return (height - 1 + rank) % len(genesis.validators)


def next_turn_ms(genesis: Genesis, validator_index: int, height: int, parent_timestamp_ms: int,
                 not_before_ms: int) -> int:
    """The earliest time >= `not_before_ms` at which `validator_index` is scheduled to
    produce block `height` (what a producer loop sleeps until)."""
    count = len(genesis.validators)
    rank = (validator_index - (height - 1)) % count
    cycle_ms = count * genesis.producer_timeout_ms
    first_ms = parent_timestamp_ms + genesis.block_interval_ms + rank * genesis.producer_timeout_ms
    if not_before_ms < first_ms:
        return first_ms
    window_ms = first_ms + (not_before_ms - first_ms) // cycle_ms * cycle_ms
    if not_before_ms < window_ms + genesis.producer_timeout_ms:
        return not_before_ms
    return window_ms + cycle_ms
