"""Locate and load liboqs: the one place in qMEMO that imports liboqs-python (`oqs`).

Why this module exists: when liboqs-python cannot find a liboqs shared library it
tries to `git clone` and build one. On our machines that cannot work (no network but
package registries) and must never be attempted. So before `oqs` is imported we point
OQS_INSTALL_PATH at the liboqs that scripts/setup.sh built, check that the library is
really there, and otherwise raise `LiboqsNotFound` naming the command to run.

It also keeps a second, private ctypes handle on the same library for the hot
sign/verify calls (see schemes.py): liboqs-python copies every argument into fresh
buffers, our handle passes `bytes` straight through. Both handles are the same
dlopen()ed library, so there is one liboqs in the process.

Never import `oqs` anywhere else.
"""

from __future__ import annotations

import ctypes
import logging
import os
import warnings
from functools import cache
from pathlib import Path
from types import ModuleType

from qmemo.errors import LiboqsNotFound

from qmemo.paths import HOME, LIBOQS_DIR, NO_HOME, REPO_ROOT  # the checkout's folders, defined once
DEFAULT_PREFIX = LIBOQS_DIR
SETUP_COMMAND = "scripts/setup.sh"


def liboqs_prefix() -> Path:
    """Where liboqs is installed: $QMEMO_LIBOQS_PREFIX, else the setup's .deps/liboqs."""
    override = os.environ.get("QMEMO_LIBOQS_PREFIX")
    if override:
        return Path(override)
    if HOME is None:  # installed from a wheel, and no QMEMO_HOME: say so, not "run the setup here"
        raise LiboqsNotFound(NO_HOME)
    return DEFAULT_PREFIX


def liboqs_library_path(prefix: Path | None = None) -> Path:
    """The liboqs shared library under `prefix`, or LiboqsNotFound with the fix."""
    prefix = prefix or liboqs_prefix()
    for libdir in ("lib", "lib64"):
        candidate = prefix / libdir / "liboqs.so"
        if candidate.is_file():
            return candidate
    raise LiboqsNotFound(
        f"liboqs is not installed at {prefix} (no lib/liboqs.so). "
        f"Run `{SETUP_COMMAND}` from {REPO_ROOT} to build it (a few minutes, once), "
        "or set QMEMO_LIBOQS_PREFIX to an existing liboqs install. "
        "qMEMO never lets liboqs-python download liboqs."
    )


@cache
def load_oqs() -> ModuleType:
    """Import liboqs-python against our liboqs; the result is cached for the process."""
    library = liboqs_library_path()
    # liboqs-python reads OQS_INSTALL_PATH at import; it must name a folder that holds
    # the library, so it never falls back to its download-and-build path.
    os.environ["OQS_INSTALL_PATH"] = str(library.parent.parent)
    # liboqs-python attaches a handler that writes INFO lines to *stdout* at import,
    # which would corrupt our JSON outputs: silence it during import, then drop it.
    oqs_logger = logging.getLogger("oqs.oqs")
    oqs_logger.disabled = True
    with warnings.catch_warnings():
        # liboqs-python 0.16 warns that liboqs 0.13 is a different minor version: that
        # is the known, deliberate pairing (see scripts/liboqs/oqs_compat.c).
        warnings.filterwarnings("ignore", message=r"liboqs version .* differs")
        try:
            import oqs  # noqa: PLC0415 - the one deliberate import of liboqs-python
        except AttributeError as exc:  # a liboqs without OQS_SIG_supports_ctx_str
            raise LiboqsNotFound(
                f"the liboqs at {library} lacks a symbol liboqs-python needs ({exc}); "
                f"rebuild it with `{SETUP_COMMAND}`"
            ) from exc
    for handler in list(oqs_logger.handlers):
        oqs_logger.removeHandler(handler)
    oqs_logger.setLevel(logging.WARNING)
    oqs_logger.disabled = False
    loaded = Path(oqs.oqs.native()._name).resolve()
    if loaded != library.resolve():
        # liboqs-python prefers ctypes.util.find_library's answer: a system-wide liboqs
        # would silently replace ours, and our numbers would describe another build.
        raise LiboqsNotFound(
            f"liboqs-python loaded {loaded} instead of {library}; "
            "remove the other liboqs from the library path or set QMEMO_LIBOQS_PREFIX to it"
        )
    return oqs


@cache
def native() -> ctypes.CDLL:
    """Our own ctypes handle on liboqs (same library as liboqs-python's) for hot calls."""
    oqs = load_oqs()
    lib = ctypes.CDLL(oqs.oqs.native()._name)
    lib.OQS_SIG_new.restype = ctypes.c_void_p
    lib.OQS_SIG_new.argtypes = [ctypes.c_char_p]
    lib.OQS_SIG_sign.restype = ctypes.c_int
    lib.OQS_SIG_sign.argtypes = [
        ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_size_t),
        ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p,
    ]
    lib.OQS_SIG_verify.restype = ctypes.c_int
    lib.OQS_SIG_verify.argtypes = [
        ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t,
        ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p,
    ]
    lib.OQS_version.restype = ctypes.c_char_p
    lib.OQS_CPU_has_extension.restype = ctypes.c_int
    lib.OQS_CPU_has_extension.argtypes = [ctypes.c_int]
    return lib


def liboqs_version() -> str:
    return native().OQS_version().decode()


# OQS_CPU_EXT values from liboqs 0.13's common.h (enum OQS_CPU_EXT): the CPU features
# its run-time dispatch checks before choosing the AVX2 Falcon / ML-DSA code.
_OQS_CPU_EXT = {"AVX2": 4, "BMI2": 7, "POPCNT": 10}


def cpu_extensions() -> dict[str, bool]:
    """Which of the CPU features liboqs dispatches on this machine offers."""
    lib = native()
    return {name: bool(lib.OQS_CPU_has_extension(value)) for name, value in _OQS_CPU_EXT.items()}


def build_info() -> dict[str, object]:
    """What the setup recorded about this liboqs build (empty for a user-supplied one)."""
    import json  # noqa: PLC0415 - only needed here

    info_file = liboqs_library_path().parent.parent / "share" / "liboqs" / "build-info.json"
    return json.loads(info_file.read_text()) if info_file.is_file() else {}
