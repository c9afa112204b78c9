"""fetch_crate.py - one source crate from crates.io's download endpoint, checked and unpacked.

    python3 fetch_crate.py NAME VERSION SHA256 DEPS_DIR      -> prints the unpacked folder

scripts/setup.sh takes C sources it builds (liboqs inside `oqs-sys`, BLAKE3's C code
inside `blake3`) from crates.io, the one registry we reach that ships them. A .crate is
a plain gzipped tar at a fixed address, so no cargo is needed: the file is downloaded
once into DEPS_DIR/crates/, its sha256 compared with the pinned one (the registry
index's `cksum` for that version), and it is unpacked into DEPS_DIR/src/NAME-VERSION/
(the same layout as cargo's registry sources). A second call with the same pin does
nothing but check the stamp.

QMEMO_CRATES_URL replaces the endpoint (default https://static.crates.io/crates), e.g.
a mirror; whatever serves the file, a sha256 other than the pinned one is refused.
Errors are one line on stderr and exit status 1; nothing half-written is kept.
Standard library only: it runs before any venv exists.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

DEFAULT_URL = "https://static.crates.io/crates"
TIMEOUT_S = 120
STAMP = ".qmemo-crate-sha256"


class FetchError(Exception):
    pass


def crate_url(base: str, name: str, version: str) -> str:
    # A version may hold '+' (build metadata): quoted, so no server reads it as a space.
    quoted = urllib.parse.quote(f"{name}-{version}.crate")
    return f"{base.rstrip('/')}/{name}/{quoted}"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def download(url: str, target: Path, want: str) -> None:
    """`url` into `target`, only if its sha256 is `want` (written beside, then renamed)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    part = target.with_name(target.name + ".part")
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as answer, part.open("wb") as out:
            shutil.copyfileobj(answer, out)
    except (urllib.error.URLError, OSError) as exc:
        part.unlink(missing_ok=True)
        raise FetchError(f"could not download {url}: {getattr(exc, 'reason', exc)}") from None
    got = sha256_of(part)
    if got != want:
        part.unlink()
        raise FetchError(f"{url}: sha256 {got} is not the pinned {want}; nothing kept")
    part.replace(target)


def unpack(crate: Path, folder: Path, top: str) -> None:
    """Unpack `crate` (every member under `top`/) into `folder`, refusing links and paths
    that would land outside it."""
    staging = Path(tempfile.mkdtemp(prefix=f".{top}.", dir=folder.parent))
    try:
        with tarfile.open(crate, "r:gz") as tar:
            members = tar.getmembers()
            for member in members:
                parts = Path(member.name).parts
                if member.name.startswith("/") or ".." in parts or not parts or parts[0] != top:
                    raise FetchError(f"{crate.name}: member {member.name!r} lies outside {top}/; not unpacked")
                if not (member.isfile() or member.isdir()):
                    raise FetchError(f"{crate.name}: member {member.name!r} is not a plain file; not unpacked")
            tar.extractall(staging, members=members)
        shutil.rmtree(folder, ignore_errors=True)
        (staging / top).replace(folder)
    except (tarfile.TarError, OSError) as exc:
        raise FetchError(f"could not unpack {crate}: {exc}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def fetch(name: str, version: str, want: str, deps: Path, base: str) -> Path:
    top = f"{name}-{version}"
    folder = deps / "src" / top
    stamp = folder / STAMP
    if stamp.is_file() and stamp.read_text().strip() == want:
        return folder
    crate = deps / "crates" / f"{top}.crate"
    if not crate.is_file() or sha256_of(crate) != want:
        download(crate_url(base, name, version), crate, want)
    folder.parent.mkdir(parents=True, exist_ok=True)
    unpack(crate, folder, top)
    stamp.write_text(want + "\n")
    return folder


def main(argv: list[str]) -> int:
    if len(argv) != 4 or len(argv[2]) != 64:
        print("usage: fetch_crate.py NAME VERSION SHA256 DEPS_DIR", file=sys.stderr)
        return 2
    name, version, want, deps = argv
    try:
        folder = fetch(name, version, want.lower(), Path(deps).resolve(),
                       os.environ.get("QMEMO_CRATES_URL") or DEFAULT_URL)
    except FetchError as exc:
        print(f"fetch_crate: {name} {version}: {exc}", file=sys.stderr)
        return 1
    print(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
