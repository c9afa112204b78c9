"""Key files: how validator and account keys are saved and loaded.

Format (documented in docs/protocol.md, "Key files"): one JSON object,

    {"format": "qmemo-keys/1",
     "keys": [{"name": "validator-0", "scheme": "Falcon-512",
               "public_key": "<hex>", "secret_key": "<hex>"}, ...]}

Hex because key files are small and read by people and tools (jq); the files are
written with mode 0600 since they hold secret keys. Loading checks every key's
length against its scheme and raises `KeyFileError` naming the file and entry.
Secret keys never appear in a repr, a log line or an error message.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from qmemo.crypto.schemes import KeyPair, canonical_name
from qmemo.errors import KeyFileError, UnknownScheme

KEY_FILE_FORMAT = "qmemo-keys/1"


@dataclass(frozen=True, slots=True)
class NamedKey:
    """A keypair with the name it is known by (a validator's or an account's)."""

    name: str
    scheme: str
    public_key: bytes
    secret_key: bytes = field(repr=False)

    @classmethod
    def from_keypair(cls, name: str, pair: KeyPair) -> NamedKey:
        return cls(name, pair.scheme, pair.public_key, pair.secret_key)


def save_keys(path: Path, keys: list[NamedKey]) -> None:
    """Write `keys` to `path` (mode 0600), atomically: a reader never sees half a file."""
    document = {
        "format": KEY_FILE_FORMAT,
        "keys": [
            {"name": k.name, "scheme": k.scheme, "public_key": k.public_key.hex(),
             "secret_key": k.secret_key.hex()}
            for k in keys
        ],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    # mkstemp: a new file, mode 0600, never an existing one or a symlink's target.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(orjson.dumps(document, option=orjson.OPT_INDENT_2))
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_keys(path: Path) -> list[NamedKey]:
    """Read a key file, checking its format and every key's length."""
    from qmemo.crypto.schemes import get_scheme

    try:
        document = orjson.loads(Path(path).read_bytes())
    except OSError as exc:
        raise KeyFileError(f"cannot read key file {path}: {exc.strerror}") from None
    except orjson.JSONDecodeError as exc:
        raise KeyFileError(f"key file {path} is not JSON: {exc}") from None
    if not isinstance(document, dict) or document.get("format") != KEY_FILE_FORMAT:
        raise KeyFileError(f"key file {path} is not in format {KEY_FILE_FORMAT!r}")
    entries = document.get("keys")
    if not isinstance(entries, list):
        raise KeyFileError(f"key file {path} has no 'keys' list")
    keys = []
    for index, entry in enumerate(entries):
        where = f"key file {path}, entry {index}"
        try:
            name, scheme = str(entry["name"]), canonical_name(str(entry["scheme"]))
            public_key = bytes.fromhex(entry["public_key"])
            secret_key = bytes.fromhex(entry["secret_key"])
        except (KeyError, TypeError, ValueError):
            raise KeyFileError(f"{where}: needs name, scheme, public_key and secret_key (hex)") from None
        except UnknownScheme as exc:
            raise KeyFileError(f"{where}: {exc}") from None
        info = get_scheme(scheme).info
        if len(public_key) != info.public_key_bytes or len(secret_key) != info.secret_key_bytes:
            raise KeyFileError(
                f"{where} ({name}): {scheme} keys are {info.public_key_bytes}/{info.secret_key_bytes} "
                f"bytes (public/secret), found {len(public_key)}/{len(secret_key)}"
            )
        keys.append(NamedKey(name, scheme, public_key, secret_key))
    return keys
