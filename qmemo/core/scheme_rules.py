"""What the chain's rules need to know about each signature scheme, as plain data.

The core never loads a signature library. It learns each scheme's wire id, name and
sizes from a `SchemeTable` handed to it (the node builds one from the registry's
`SchemeInfo` with `qmemo.crypto.verifier.scheme_table()`, so `SchemeInfo` stays the one
source of truth). The table answers two questions: is this scheme id known, and do
a public key and a signature have lengths the scheme can produce.

Pure: no I/O, no imports beyond the standard library and qmemo.errors.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Protocol

from qmemo.errors import ConfigError


class SchemeInfoLike(Protocol):
    """The fields of `qmemo.crypto.schemes.SchemeInfo` the table reads."""

    name: str
    scheme_id: int
    public_key_bytes: int
    max_signature_bytes: int
    fixed_signature_length: bool


@dataclass(frozen=True, slots=True)
class SchemeRules:
    """One scheme's identity and size rules."""

    name: str
    scheme_id: int
    public_key_bytes: int
    max_signature_bytes: int
    fixed_signature_length: bool   # True: a signature is exactly max_signature_bytes long

    def signature_length_ok(self, length: int) -> bool:
        """Could this scheme produce a signature of `length` bytes?"""
        if self.fixed_signature_length:
            return length == self.max_signature_bytes
        return 0 < length <= self.max_signature_bytes


@dataclass(frozen=True, slots=True)
class SchemeTable:
    """The schemes a chain knows, by wire id and by name."""

    by_id: Mapping[int, SchemeRules]

    @classmethod
    def from_infos(cls, infos: Iterable[SchemeInfoLike]) -> SchemeTable:
        rules = {
            info.scheme_id: SchemeRules(info.name, info.scheme_id, info.public_key_bytes,
                                        info.max_signature_bytes, info.fixed_signature_length)
            for info in infos
        }
        return cls(MappingProxyType(rules))

    def get(self, scheme_id: int) -> SchemeRules | None:
        return self.by_id.get(scheme_id)

    def by_name(self, name: str) -> SchemeRules:
        """The scheme registered as `name` (exact spelling), or ConfigError."""
        for rules in self.by_id.values():
            if rules.name == name:
                return rules
        known = ", ".join(rules.name for rules in self.by_id.values())
        raise ConfigError(f"unknown signature scheme {name!r}; known: {known}", code="unknown_scheme")
