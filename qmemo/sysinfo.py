"""The machine and software a Python-side measurement ran on, for every result file.

Benchmarks and load runs save their figures with this block so that a number can be
traced to the machine, versions and build that produced it (the C suite writes its
own, richer, block from bench_c/src/sysinfo.c).
"""

from __future__ import annotations

import os
import platform
import socket
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

_PACKAGES = ("qmemo", "liboqs-python", "blake3", "aiohttp", "orjson", "coincurve", "PyNaCl", "hdrhistogram")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_info() -> dict[str, Any]:
    """CPU, cores, OS, Python and package versions, liboqs build (if loadable), time, load average."""
    info: dict[str, Any] = {
        "hostname": socket.gethostname(),
        "cpu_model": cpu_model(),
        "logical_cpus": os.cpu_count(),
        "machine": platform.machine(),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "packages": {},
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        # Other work on the machine moves every figure: a result says how busy it was.
        "loadavg": list(os.getloadavg()),
    }
    for package in _PACKAGES:
        try:
            info["packages"][package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    try:
        from qmemo.crypto.liboqs import build_info, cpu_extensions, liboqs_version

        info["liboqs"] = {"version": liboqs_version(), "cpu": cpu_extensions(), "build": build_info()}
    except Exception as exc:  # noqa: BLE001 - a result file must still be written without liboqs
        info["liboqs"] = {"error": str(exc)}
    return info
