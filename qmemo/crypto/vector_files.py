"""The third-party vector files, read only as they were published.

Vector files live in tests/vectors/<source>/, each folder's README.md giving every file's
repository, commit, path and sha256: this module reads that table and refuses a file
whose content has another sha256. Known-answer files are made at run time by liboqs's
kat_sig (it replays the KATs' deterministic randomness) and refused unless their
sha256 is the published one, so what is checked is the published file, byte for byte.

It hands out checked bytes only: reading them into cases is qmemo.crypto.vector_sources's
job, running the cases qmemo.crypto.vectors's. It never rewrites a file it reads.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import subprocess
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from qmemo.errors import SetupError
from qmemo.paths import REPO_ROOT

VECTORS_DIR = REPO_ROOT / "tests" / "vectors"

# kat_sig signs every KAT entry before printing it; SPHINCS+-SHA2-128s signs slowly (about
# 0.2 s per signature here), so only its first entry is made, checked against kats.json's
# hash of that entry alone ("single").
KAT_FIRST_ENTRY_ONLY = frozenset({"SPHINCS+-SHA2-128s-simple"})

# The NIST round-3 Falcon-512 KAT file is kat_sig's Falcon-512 output between this header
# line and one final newline (tests/vectors/nist_kat/README.md).
NIST_FALCON512_HEADER = b"# Falcon-512\n\n"


# --- the files and their manifest ---------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ManifestEntry:
    """One row of a vector folder's README.md table."""

    file: str
    repository: str
    commit: str
    path: str
    sha256: str                  # of the content (a .gz file: of its decompressed bytes)


_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|([^|]*)\|([^|]*)\|([^|]*)\|\s*`?([0-9a-f]{64})`?\s*\|", re.M)


@cache
def manifest(folder: str) -> dict[str, ManifestEntry]:
    """The file table of tests/vectors/<folder>/README.md: file -> its entry."""
    readme = VECTORS_DIR / folder / "README.md"
    try:
        text = readme.read_text()
    except OSError as exc:
        raise SetupError(f"no vector manifest at {readme} ({exc.strerror}): the tests/vectors files "
                         "ship with a qMEMO checkout, not with a wheel", code="vector_file") from None
    return {m[1]: ManifestEntry(m[1], m[2].strip(), m[3].strip().strip("`"), m[4].strip().strip("`"), m[5])
            for m in _ROW.finditer(text)}


def read_vector_file(folder: str, name: str) -> bytes:
    """A vector file's content (decompressed if .gz), checked against its README's sha256."""
    entry = manifest(folder).get(name)
    if entry is None:
        raise SetupError(f"tests/vectors/{folder}/README.md lists no {name}", code="vector_file")
    path = VECTORS_DIR / folder / name
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SetupError(f"cannot read {path}: {exc.strerror}", code="vector_file") from None
    data = gzip.decompress(raw) if name.endswith(".gz") else raw
    return checked_sha256(data, entry.sha256, f"tests/vectors/{folder}/{name}")


def checked_sha256(data: bytes, want: str, what: str) -> bytes:
    got = hashlib.sha256(data).hexdigest()
    if got != want:
        raise SetupError(f"{what} has sha256 {got}, not the published {want}", code="vector_file")
    return data


def file_origin(folder: str, name: str) -> str:
    """A listed file's repository, commit (12 digits) and path, as its README gives them."""
    entry = manifest(folder)[name]
    return f"{entry.repository} {entry.commit[:12]} {entry.path}"


# --- known-answer tests (liboqs's kat_sig) --------------------------------------------------

def kat_sig_path() -> Path:
    from qmemo.crypto.liboqs import liboqs_library_path

    return liboqs_library_path().parent.parent / "bin" / "kat_sig"


@cache
def kat_output(name: str) -> bytes:
    """kat_sig's output for `name`, checked against liboqs's kats.json (\\r\\n read as \\n, as liboqs does)."""
    first_only = name in KAT_FIRST_ENTRY_ONLY
    tool = kat_sig_path()
    if not tool.is_file():
        raise SetupError(f"no kat_sig at {tool}: scripts/setup.sh builds it with liboqs", code="vector_file")
    args = [str(tool), name] + ([] if first_only else ["--all"])
    try:
        done = subprocess.run(args, capture_output=True, check=False, timeout=120)
    except subprocess.TimeoutExpired:
        raise SetupError(f"kat_sig {name} did not finish in 120 s", code="vector_file") from None
    if done.returncode != 0:
        raise SetupError(f"kat_sig {name} failed ({done.returncode}): {done.stderr.decode(errors='replace')[:200]}",
                         code="vector_file")
    output = done.stdout.replace(b"\r\n", b"\n")
    kats = json.loads((tool.parent.parent / "share" / "liboqs" / "kats.json").read_text())
    return checked_sha256(output, kats[name]["single" if first_only else "all"], f"kat_sig {name}")


def prefetch_kats(names: Iterable[str]) -> None:
    """Make the KAT outputs of `names` two at a time (kat_sig is single-threaded)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(lambda name: _quietly(kat_output, name), names))


def _quietly(function: Callable[[str], object], name: str) -> None:
    try:
        function(name)
    except SetupError:
        pass   # reported by the source that needs it


def nist_falcon512_kat() -> bytes:
    """NIST's falcon512-KAT.rsp, made from kat_sig's output and checked against its published sha256."""
    entry = manifest("nist_kat")["falcon512-KAT.rsp"]
    made = NIST_FALCON512_HEADER + kat_output("Falcon-512") + b"\n"
    return checked_sha256(made, entry.sha256, "falcon512-KAT.rsp as kat_sig makes it")
