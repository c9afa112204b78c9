"""Shards: the account -> shard rule, and the sharded genesis (one document, every shard).

MEMO is a sharded chain. Here a shard is an ordinary qMEMO chain - its own chain id,
validators, producer rotation and accounts - and a sharded devnet is several of them
under one genesis document (docs/protocol.md, "Shards"):

    {"format": "qmemo-genesis/2", "genesis_time_ms": ..., "block_interval_ms": ...,
     "producer_timeout_ms": ..., "max_clock_drift_ms": ..., "max_block_transactions": ...,
     "min_fee": ..., "tx_schemes": [...], "shard_rule": "address-u32le-mod",
     "shards": [{"chain_id": 1, "validators": [...], "accounts": [...]}, ...]}

The rule (`shard_of`): an account belongs to shard u32le(address[0:4]) mod shard_count.
Addresses are hashes, so accounts spread evenly, and anyone can tell an address's shard
from the address alone. Every funded account is listed in its own shard, and every
validator's key derives an address in its own shard (its fees stay home).

A node runs one shard: its `Genesis` is that shard's view (chain id, validators,
balances) with `sharding` set - a `Sharding`: which shard it is, and the map of all of
them (chain ids and validators), which is what checking another shard's receipts needs
(qmemo.core.receipts). A shard's genesis hash is H(GENESIS_SHARDED, u16 index || the
whole document's encoding): each shard's chain commits to every shard's validators and
balances, so two nodes with different maps can never share a chain.

One shard (`--shards 1`) is today's unsharded chain (qmemo-genesis/1), unchanged.

Pure: the document's bytes come in, values go out; no I/O.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from typing import Any

from qmemo.core.codec import U16_MAX, U32_MAX, expect_object, int_field
from qmemo.core.genesis import (GENESIS_FORMAT, MAX_TOTAL_SUPPLY, SHARDED_GENESIS_FORMAT, Genesis, Validator,
                                genesis_from_json, list_field, parse_accounts, parse_params, parse_tx_schemes,
                                parse_validators, require)
from qmemo.core.scheme_rules import SchemeTable
from qmemo.errors import ConfigError, DecodeError

SHARD_RULE = "address-u32le-mod"    # the only rule: shard = u32le(address[0:4]) mod shard_count
MAX_SHARDS = 256                    # MEMO's largest configuration
_COMMON = ("genesis_time_ms", "block_interval_ms", "producer_timeout_ms", "max_clock_drift_ms",
           "max_block_transactions", "min_fee")
_KEYS = frozenset(("format", *_COMMON, "tx_schemes", "shard_rule", "shards"))
_SHARD_KEYS = frozenset(("chain_id", "validators", "accounts"))
_COMMON_STRUCT = struct.Struct("<QIIIIQ")


def shard_of(address: bytes, shard_count: int) -> int:
    """The shard an address belongs to: its first four bytes, little-endian, mod the count."""
    return int.from_bytes(address[:4], "little") % shard_count


@dataclass(frozen=True, slots=True)
class ShardInfo:
    """What every shard knows of one shard: its place, chain id and validators."""

    index: int
    chain_id: int
    validators: tuple[Validator, ...]

    @property
    def quorum(self) -> int:
        """Distinct producers that make one of its blocks final (qmemo.core.finality)."""
        return len(self.validators) // 2 + 1


@dataclass(frozen=True, slots=True, repr=False)
class Sharding:
    """A shard's place among the shards, and the map of all of them."""

    index: int
    shards: tuple[ShardInfo, ...]
    document_encoding: bytes = field(compare=False)     # what every shard's genesis hash commits to

    @property
    def count(self) -> int:
        return len(self.shards)

    @property
    def own(self) -> ShardInfo:
        return self.shards[self.index]

    def shard_of(self, address: bytes) -> int:
        return shard_of(address, len(self.shards))

    def by_chain_id(self, chain_id: int) -> ShardInfo | None:
        """The shard whose chain id this is (None: no shard of this genesis)."""
        return next((shard for shard in self.shards if shard.chain_id == chain_id), None)

    def __repr__(self) -> str:
        return f"Sharding(shard {self.index} of {len(self.shards)})"


@dataclass(frozen=True, slots=True, repr=False)
class ShardedGenesis:
    """Every shard's view of a qmemo-genesis/2 document, in shard order."""

    views: tuple[Genesis, ...]

    @property
    def count(self) -> int:
        return len(self.views)

    @property
    def sharding(self) -> Sharding:
        return self.views[0].sharding

    def view(self, index: int) -> Genesis:
        if not 0 <= index < len(self.views):
            raise ConfigError(f"this genesis has shards 0 to {len(self.views) - 1}, not {index}", code="bad_genesis")
        return self.views[index]

    def shard_of_validator(self, public_key: bytes) -> int | None:
        """The shard whose validator holds this key (None: no validator of any shard)."""
        return next((view.sharding.index for view in self.views
                     if any(v.public_key == public_key for v in view.validators)), None)

    @property
    def total_supply(self) -> int:
        return sum(balance for view in self.views for _, balance in view.balances)

    def __repr__(self) -> str:
        return f"ShardedGenesis({len(self.views)} shards, chain ids {[v.chain_id for v in self.views]})"


def parse_sharded_genesis(document: Any, schemes: SchemeTable) -> ShardedGenesis:
    """Check a qmemo-genesis/2 document; every shard's view. ConfigError ("bad_genesis")."""
    try:
        return _parse(document, schemes)
    except DecodeError as exc:
        raise ConfigError(f"genesis: {exc}", code="bad_genesis") from None


def any_genesis_from_json(raw: bytes, schemes: SchemeTable, source: str = "the genesis") -> Genesis | ShardedGenesis:
    """A genesis file of either format: a `Genesis` (qmemo-genesis/1) or a `ShardedGenesis`."""
    try:
        document = json.loads(raw)
    except ValueError as exc:
        raise ConfigError(f"genesis file {source} is not JSON: {exc}", code="bad_genesis") from None
    if isinstance(document, dict) and document.get("format") == SHARDED_GENESIS_FORMAT:
        return parse_sharded_genesis(document, schemes)
    return genesis_from_json(raw, schemes, source)


def _parse(document: Any, schemes: SchemeTable) -> ShardedGenesis:
    obj = expect_object(document, _KEYS, "genesis")
    require(obj["format"] == SHARDED_GENESIS_FORMAT, f"format must be {SHARDED_GENESIS_FORMAT!r}")
    require(obj["shard_rule"] == SHARD_RULE, f"shard_rule must be {SHARD_RULE!r} (the only rule)")
    common = parse_params(obj, "genesis", _COMMON)
    tx_scheme_ids = parse_tx_schemes(obj, schemes)
    entries = list_field(obj, "shards", 1, MAX_SHARDS)
    count = len(entries)
    parsed: list[tuple[int, list[Validator], list[tuple[bytes, int]]]] = []
    for index, entry in enumerate(entries):
        what = f"genesis.shards[{index}]"
        entry = expect_object(entry, _SHARD_KEYS, what)
        chain_id = int_field(entry, "chain_id", U32_MAX, what)
        validators = parse_validators(list_field(entry, "validators", 1, U16_MAX), schemes, f"{what}.validators")
        balances = parse_accounts(list_field(entry, "accounts", 0, U32_MAX), f"{what}.accounts")
        for address, _ in balances:
            require(shard_of(address, count) == index, f"{what}: account {address.hex()[:16]}.. belongs to shard "
                    f"{shard_of(address, count)} by the rule, not {index}")
        for validator in validators:
            require(shard_of(validator.address, count) == index,
                    f"{what}: validator {validator.name}'s address belongs to shard "
                    f"{shard_of(validator.address, count)} by the rule (its fees would live there), not {index}")
        parsed.append((chain_id, validators, balances))
    require(len({chain_id for chain_id, _, _ in parsed}) == count, "two shards share a chain id")
    keys = [v.public_key for _, validators, _ in parsed for v in validators]
    require(len(set(keys)) == len(keys), "a validator key is in two shards")
    require(sum(balance for _, _, balances in parsed for _, balance in balances) <= MAX_TOTAL_SUPPLY,
            f"the total supply of all shards exceeds {MAX_TOTAL_SUPPLY} (2^63 - 1)")

    infos = tuple(ShardInfo(index, chain_id, tuple(validators)) for index, (chain_id, validators, _) in
                  enumerate(parsed))
    encoding = _encoding(common, tx_scheme_ids, parsed)
    return ShardedGenesis(tuple(
        Genesis(chain_id=chain_id, **common, tx_scheme_ids=tx_scheme_ids, validators=tuple(validators),
                balances=tuple(balances), schemes=schemes, sharding=Sharding(index, infos, encoding))
        for index, (chain_id, validators, balances) in enumerate(parsed)))


def _encoding(common: dict[str, int], tx_scheme_ids: tuple[int, ...],
              shards: list[tuple[int, list[Validator], list[tuple[bytes, int]]]]) -> bytes:
    """The canonical bytes of a sharded genesis (docs/protocol.md, "Shards")."""
    parts = [_COMMON_STRUCT.pack(*(common[name] for name in _COMMON)),
             struct.pack("<B", len(tx_scheme_ids)), bytes(tx_scheme_ids),
             struct.pack("<B", len(SHARD_RULE)), SHARD_RULE.encode(), struct.pack("<H", len(shards))]
    for chain_id, validators, balances in shards:
        parts += [struct.pack("<IH", chain_id, len(validators))]
        for validator in validators:
            name = validator.name.encode()
            parts += [struct.pack("<BH", validator.scheme_id, len(name)), name,
                      struct.pack("<H", len(validator.public_key)), validator.public_key]
        parts.append(struct.pack("<I", len(balances)))
        for address, balance in balances:
            parts += [address, struct.pack("<Q", balance)]
    return b"".join(parts)


def sharded_document(common: dict[str, Any], tx_schemes: list[str], shards: list[dict[str, Any]]) -> dict[str, Any]:
    """A qmemo-genesis/2 document from its parts (`common`: the parameters of `_COMMON`;
    each shard {"chain_id", "validators", "accounts"} as in the file): what `qmemo genesis
    --shards` writes."""
    return {"format": SHARDED_GENESIS_FORMAT, **{name: common[name] for name in _COMMON},
            "tx_schemes": tx_schemes, "shard_rule": SHARD_RULE, "shards": shards}


__all__ = ["GENESIS_FORMAT", "SHARDED_GENESIS_FORMAT", "SHARD_RULE", "ShardInfo", "Sharding", "ShardedGenesis",
           "any_genesis_from_json", "parse_sharded_genesis", "shard_of", "sharded_document"]
