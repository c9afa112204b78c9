"""liboqs's known-answer tests as the fast verifiers' tests read them (test_falcon_vt.py,
test_mldsa_vt.py): kat_sig's output for one scheme, checked against liboqs's kats.json
before any entry is used."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess

from tests.conftest import REPO_ROOT

LIBOQS = REPO_ROOT / ".deps" / "liboqs"


def kat_entries(name: str) -> list[dict[str, bytes]]:
    """kat_sig's 100 entries for `name` (pk, msg, sm), after checking its output against kats.json."""
    output = subprocess.run([str(LIBOQS / "bin" / "kat_sig"), name, "--all"], capture_output=True, check=True).stdout
    kats = json.loads((LIBOQS / "share" / "liboqs" / "kats.json").read_text())
    assert hashlib.sha256(output.replace(b"\r\n", b"\n")).hexdigest() == kats[name]["all"]
    entries = []
    for block in output.decode().split("\n\n"):
        fields = dict(re.findall(r"^(\w+) = (\S*)$", block, re.M))
        if "sm" in fields:
            entries.append({k: bytes.fromhex(v) for k, v in fields.items() if k in ("pk", "msg", "sm")})
    return entries
