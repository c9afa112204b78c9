"""The registry behind the pure core: its signature verifier and its scheme table.

`qmemo.core` never imports a signature library: it is handed a `SignatureVerifier`
and a `SchemeTable`. This module builds both from `qmemo.crypto.schemes`, so the
sizes the chain's rules enforce are exactly the registry's `SchemeInfo`; and reads a
genesis file against that table (`load_genesis`: the core parses, this module brings
the bytes and the table), for the node, the generator and every tool alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from qmemo.core.genesis import Genesis, genesis_from_json
from qmemo.core.scheme_rules import SchemeTable
from qmemo.core.shards import ShardedGenesis, any_genesis_from_json
from qmemo.crypto.schemes import DEFAULT_VERIFIER, backend_of, get_scheme, scheme_by_id, scheme_names
from qmemo.errors import ConfigError, UnknownScheme


class RegistryVerifier:
    """`qmemo.core.verify_cache.SignatureVerifier` over the scheme registry.

    Never raises: an unknown scheme id or malformed input is an invalid signature.
    Thread-safe (the schemes are). `verifier` is the registry's Falcon verifier choice
    ("fast" or "liboqs", `qmemo.crypto.schemes.VERIFIERS`).
    """

    def __init__(self, verifier: str = DEFAULT_VERIFIER) -> None:
        backend_of("Falcon-512", verifier)   # an unknown verifier fails here, not per transaction
        self.verifier = verifier
        self._verify_by_id: dict[int, Callable[[bytes, bytes, bytes], bool]] = {}

    def verify(self, scheme_id: int, public_key: bytes, message: bytes, signature: bytes) -> bool:
        verify = self._verify_by_id.get(scheme_id)
        if verify is None:
            try:
                verify = self._verify_by_id.setdefault(scheme_id, scheme_by_id(scheme_id, self.verifier).verify)
            except UnknownScheme:
                return False
        return verify(public_key, message, signature)


def scheme_table(names: Iterable[str] | None = None) -> SchemeTable:
    """The rules of the named schemes (default: every registered scheme)."""
    return SchemeTable.from_infos(get_scheme(name).info for name in (scheme_names() if names is None else names))


def load_genesis(path: Path) -> Genesis:
    """Read and check a genesis file against the scheme registry; ConfigError otherwise."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read genesis file {path}: {exc.strerror}", code="bad_genesis") from None
    return genesis_from_json(raw, scheme_table(), str(path))


def load_any_genesis(path: Path) -> Genesis | ShardedGenesis:
    """Read a genesis file of either format: a chain's (qmemo-genesis/1) or the shards' (/2)."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read genesis file {path}: {exc.strerror}", code="bad_genesis") from None
    return any_genesis_from_json(raw, scheme_table(), str(path))


def load_shard_genesis(path: Path, public_key: bytes, shard: int | None = None) -> Genesis:
    """The genesis a node runs: a chain's, or in a sharded genesis the view of `shard` -
    by default the shard whose validator holds `public_key`. ConfigError if neither says."""
    genesis = load_any_genesis(path)
    if isinstance(genesis, Genesis):
        if shard not in (None, 0):
            raise ConfigError(f"{path} is not sharded: it has no shard {shard}", code="bad_genesis")
        return genesis
    own = genesis.shard_of_validator(public_key)
    if shard is None:
        if own is None:
            raise ConfigError(f"{path} names {genesis.count} shards and this key validates none of them: give the "
                              "shard to observe (--shard)", code="bad_genesis")
        return genesis.view(own)
    if own is not None and own != shard:
        raise ConfigError(f"this key is a validator of shard {own}, not of shard {shard}", code="bad_genesis")
    return genesis.view(shard)


def signer(scheme: str, secret_key: bytes) -> Callable[[bytes], bytes]:
    """`sign(message) -> signature` with one key: what block and transaction signing take."""
    sign = get_scheme(scheme).sign
    return lambda message: sign(secret_key, message)
