"""What the chain's rules need to know about each signature scheme, as plain data.

The core never loads a signature library. It learns each scheme's wire id, name and
sizes from a `SchemeTable` handed to it (the node builds one from the registry's
`SchemeInfo` with `qmemo.crypto.verifier.scheme_table()`, so `SchemeInfo` stays the one
source of truth). The table answers two questions: is this scheme id known, and do
a public key and a signature have lengths the scheme can produce.

The length rule lives here and nowhere else in Python: the core's transaction checks,
every `SignatureScheme.verify` in the registry and the native batch verifier (which
receives it as data: key length, shortest and longest signature) all apply
`SchemeRules`. Whether a scheme's signatures have one fixed length is stated per scheme
by the registry, never guessed from a name. tests/vectors/signature_lengths.json holds
the cases both the Python rule and the C guard must decide alike.

Pure: no I/O, no imports beyond the standard library and qmemo.errors.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
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
    # The shortest signature: the only length of a fixed-length scheme, else one byte. A
    # field, not a property, because every verify reads it. Why a fixed-length scheme
    # admits one length only: padded Falcon's verify in liboqs 0.13 also accepts the
    # signature with its trailing zero padding cut off, so without this one signature
    # would have several valid encodings (and transaction ids).
    min_signature_bytes: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "min_signature_bytes", self.max_signature_bytes if self.fixed_signature_length else 1)

    @classmethod
    def of(cls, info: SchemeInfoLike) -> SchemeRules:
        """The rules of one registry entry (`qmemo.crypto.schemes.SchemeInfo`)."""
        return cls(info.name, info.scheme_id, info.public_key_bytes, info.max_signature_bytes,
                   info.fixed_signature_length)

    def signature_length_ok(self, length: int) -> bool:
        """Could this scheme produce a signature of `length` bytes?"""
        return self.min_signature_bytes <= length <= self.max_signature_bytes

    def lengths_ok(self, public_key_length: int, signature_length: int) -> bool:
        """The whole length rule: a key of exactly the scheme's size, a signature it can produce.

        Checked before any signature library is called: liboqs trusts its caller for the
        public key's length and would read past a short one.
        """
        return (public_key_length == self.public_key_bytes  # then signature_length_ok, inlined: every verify runs it
                and self.min_signature_bytes <= signature_length <= self.max_signature_bytes)


@dataclass(frozen=True, slots=True)
class SchemeTable:
    """The schemes a chain knows, by wire id and by name."""

    by_id: Mapping[int, SchemeRules]

    @classmethod
    def from_infos(cls, infos: Iterable[SchemeInfoLike]) -> SchemeTable:
        return cls(MappingProxyType({info.scheme_id: SchemeRules.of(info) for info in infos}))

    def get(self, scheme_id: int) -> SchemeRules | None:
        return self.by_id.get(scheme_id)

    def by_name(self, name: str) -> SchemeRules:
        """The scheme registered as `name` (exact spelling), or ConfigError."""
        for rules in self.by_id.values():
            if rules.name == name:
                return rules
        known = ", ".join(rules.name for rules in self.by_id.values())
        raise ConfigError(f"unknown signature scheme {name!r}; known: {known}", code="unknown_scheme")
