"""This machine's and this liboqs build's fingerprint: which C baselines a devnet here may use.

A C baseline measured on another CPU, or against another liboqs build (other flags,
another version, a rebuilt shim), is not this machine's ceiling: setting the devnet
against it would print a confident and wrong "% of C". `qmemo bench c` stores the
fingerprint of the run in its summary.json; readers compare it with `current()`.

Why Python and not the C binary's own system block: the check runs on every
`./devnet.sh` start, before anything is built, and must take milliseconds. It reads
/proc/cpuinfo, os.cpu_count() and the liboqs files; it never loads liboqs (hashing the
shared library's bytes identifies the build without running its code).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from qmemo.bench.c_summary import Fingerprint

CPUINFO = Path("/proc/cpuinfo")


def _cpuinfo_first(prefixes: tuple[str, ...]) -> str:
    """The value of the first /proc/cpuinfo line starting with one of `prefixes` ("" if none)."""
    try:
        for line in CPUINFO.read_text().splitlines():
            if line.startswith(prefixes) and ":" in line:
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def _sha256(data: bytes, chars: int = 16) -> str:
    return hashlib.sha256(data).hexdigest()[:chars]


def liboqs_build(prefix: Path) -> tuple[str, str]:
    """(version, build description) of the liboqs installed at `prefix`.

    The setup's build-info.json gives the version and flags; the library's own bytes
    tell one build from another with the same flags (a rebuild with another compiler, or
    a user-supplied liboqs that has no build-info at all).
    """
    info_file = prefix / "share" / "liboqs" / "build-info.json"
    info = json.loads(info_file.read_text()) if info_file.is_file() else {}
    library = next((p for p in (prefix / "lib" / "liboqs.so", prefix / "lib64" / "liboqs.so") if p.is_file()), None)
    library_sha = _sha256(library.read_bytes()) if library else "missing"
    flags = " ".join(str(info[k]) for k in ("cmake_flags", "c_flags_release") if info.get(k)) or "unknown flags"
    name = f"{info['build_name']}; " if info.get("build_name") else ""
    return str(info.get("liboqs_version", "unknown")), f"{name}{flags}; liboqs.so sha256 {library_sha}"


def build_name(fingerprint: Fingerprint | None) -> str | None:
    """The setup's name of the liboqs build a fingerprint records ("liboqs 0.13.0 + qMEMO
    ML-DSA conformance patch <id>", the first part liboqs_build writes), or None."""
    first = fingerprint.liboqs_build.split("; ", 1)[0] if fingerprint else ""
    return first if first.startswith("liboqs ") else None


def current(liboqs_prefix: Path | None = None) -> Fingerprint:
    """The fingerprint of this machine and the liboqs qMEMO uses (QMEMO_LIBOQS_PREFIX or .deps)."""
    if liboqs_prefix is None:
        from qmemo.crypto.liboqs import liboqs_prefix as configured_prefix

        liboqs_prefix = configured_prefix()
    version, build = liboqs_build(liboqs_prefix)
    cpu_model = _cpuinfo_first(("model name", "Model", "cpu model")) or "unknown"
    flags_sha = _sha256(_cpuinfo_first(("flags", "Features")).encode())
    cpus = os.cpu_count() or 0
    identity = json.dumps([cpu_model, cpus, flags_sha, version, build]).encode()
    return Fingerprint(id=_sha256(identity, 12), cpu_model=cpu_model, logical_cpus=cpus,
                       cpu_flags_sha256=flags_sha, liboqs_version=version, liboqs_build=build)
