"""Write the node's conformance case files, qmemo/crypto/conformance/<scheme>.json.

    .venv/bin/python scripts/make_conformance.py [--wycheproof DIR] [--wycheproof-commit SHA] [--family F]

ML-DSA-44/65/87: a few cases of Wycheproof's mldsa_<n>_verify_test.json (C2SP/wycheproof,
testvectors_v1/; DIR defaults to tests/vectors/wycheproof, .json or .json.gz), copied with their verdicts:
the baseline, the valid signature that calls use_hint(1, 0) and its invalid twin, z at
the bound's edge (valid just below, invalid at gamma1 - beta) and two with z over it that
liboqs 0.13's AVX2 verify as shipped accepts (Z_OVER_BOUND; checked against that code
through bench_c/build/mldsa-conformance where its archive is built, else said to be
unchecked). Only cases without a context string: a node signs and verifies with the
empty one.

Falcon-512/1024 and their padded variants: every edge case of
qmemo.crypto.conformance.falcon_edges, built here from fresh liboqs keys and signatures,
with the round-3 specification's verdicts (so each run writes new keys: the verdicts,
not the bytes, are what stays the same).

Each file names its sources (file, commit, sha256) so that a reader can trace a case to
where its verdict comes from. Run again after the vectors or the edge cases change, and
commit the result.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from qmemo.crypto.conformance import CASE_SCHEMA, case_file_name  # noqa: E402
from qmemo.crypto.conformance import falcon_edges  # noqa: E402
from qmemo.crypto.liboqs import liboqs_version  # noqa: E402
from tests.integration import mldsa_shipped  # noqa: E402

OUT = ROOT / "qmemo" / "crypto" / "conformance"
FALCON_MESSAGE = b"qMEMO conformance self-test: a Falcon edge case"
# The Wycheproof cases kept, by their comment (the same comments in all three files).
WYCHEPROOF_KEPT = ("baseline", "signature that calls use_hint(1, 0)", "invalid signature that calls use_hint(1, 0)",
                   "z_max below the limit", "index 0 is exactly gamma1 - tau*eta")
# Cases with a z coefficient over gamma1 - beta (flag InfinityNormViolation), by tcId of the
# pinned files: ones that liboqs 0.13's AVX2 verify as shipped accepts, because it skips
# only the z bound, so each alone catches a verifier that lacks it. Many of Wycheproof's z
# cases fail the challenge check as well (ML-DSA-65's tcId 138 "index 0 is exactly ...",
# ML-DSA-87's tcId 77, the first "violate index" one) and catch nothing; two per set, so
# the file does not rest on one case.
Z_OVER_BOUND = {44: (81, 82), 65: (84, 85), 87: (79, 80)}
DEFAULT_WYCHEPROOF_COMMIT = "dac1dd4729fd1f8dd9e1e9f3dce51d783da6c166"


def write(scheme: str, sources: dict[str, str], keys: dict[str, bytes], cases: list[dict]) -> Path:
    document = {"schema": CASE_SCHEMA, "scheme": scheme, "generated_by": "scripts/make_conformance.py",
                "sources": sources, "public_keys": {k: v.hex() for k, v in keys.items()}, "cases": cases}
    path = OUT / case_file_name(scheme)
    path.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    return path


def mldsa_cases(directory: Path, commit: str) -> None:
    for level in (44, 65, 87):
        file = directory / f"mldsa_{level}_verify_test.json"
        if not file.is_file():      # the suite keeps them gzip-compressed (tests/vectors/wycheproof/README.md)
            file = file.with_name(file.name + ".gz")
        raw = gzip.decompress(file.read_bytes()) if file.suffix == ".gz" else file.read_bytes()
        document = json.loads(raw)
        source = (f"Wycheproof testvectors_v1/{file.name.removesuffix('.gz')} (C2SP/wycheproof {commit[:12]}, "
                  f"sha256 {hashlib.sha256(raw).hexdigest()[:16]}..)")
        keys: dict[str, bytes] = {}
        cases: list[dict] = []
        z_cases: list[tuple[bytes, bytes, bytes]] = []
        for group in document["testGroups"]:
            if group["type"] != "MlDsaVerify":
                continue
            for test in group["tests"]:
                comment, z_over = test["comment"], test["tcId"] in Z_OVER_BOUND[level]
                if "ctx" in test or not (comment in WYCHEPROOF_KEPT or z_over):
                    continue
                if z_over and ("InfinityNormViolation" not in test["flags"] or test["result"] != "invalid"):
                    raise SystemExit(f"{file}: tcId {test['tcId']} is not an invalid z-over-the-bound case")
                key = bytes.fromhex(group["publicKey"])
                key_id = next((k for k, v in keys.items() if v == key), f"k{len(keys)}")
                keys[key_id] = key
                cases.append({"name": f"tcId {test['tcId']}: {comment}", "public_key": key_id, "message": test["msg"],
                              "signature": test["sig"], "valid": test["result"] == "valid", "source": "wycheproof"})
                if z_over:
                    z_cases.append((key, bytes.fromhex(test["msg"]), bytes.fromhex(test["sig"])))
        if len(cases) != len(WYCHEPROOF_KEPT) + len(Z_OVER_BOUND[level]):
            raise SystemExit(f"{file}: found {len(cases)} of the cases kept, not "
                             f"{len(WYCHEPROOF_KEPT) + len(Z_OVER_BOUND[level])}")
        require_shipped_accepts(f"ML-DSA-{level}", z_cases)
        print(write(f"ML-DSA-{level}", {"wycheproof": source}, keys, cases))


def require_shipped_accepts(name: str, z_cases: list[tuple[bytes, bytes, bytes]]) -> None:
    """Stop unless liboqs 0.13's AVX2 verify as shipped accepts each z case (and the installed
    liboqs and the conforming objects refuse it); where that code is not built, say so."""
    reason = mldsa_shipped.missing_reason()
    if reason is not None:
        print(f"{name}: z cases not checked against the as-shipped code ({reason})", file=sys.stderr)
        return
    rows = mldsa_shipped.verdicts(name, [(pk, msg, sig) for pk, msg, sig in z_cases])
    if rows != [(0, 0, 1)] * len(z_cases):
        raise SystemExit(f"{name}: (liboqs, conforming, shipped) verdicts of the z cases are {rows}, "
                         "not (0, 0, 1) each: choose z cases the as-shipped code accepts (Z_OVER_BOUND)")


def falcon_cases() -> None:
    for name in falcon_edges.VARIANTS:
        edges = falcon_edges.edge_cases(name, falcon_edges.liboqs_signer(name, FALCON_MESSAGE))
        source = (f"qmemo/crypto/conformance/falcon_edges.py on a liboqs {liboqs_version()} {name} key and "
                  "signature; verdict from the Falcon round-3 specification v1.2 (§3.10 Algorithm 16, "
                  "§3.11 Algorithms 17-18)")
        keys: dict[str, bytes] = {}
        cases = []
        for edge in edges:
            key_id = next((k for k, v in keys.items() if v == edge.public_key), f"k{len(keys)}")
            keys[key_id] = edge.public_key
            cases.append({"name": edge.kind, "public_key": key_id, "message": edge.message.hex(),
                          "signature": edge.signature.hex(), "valid": edge.valid, "source": "falcon_edges",
                          "rule": edge.rule})
        print(write(name, {"falcon_edges": source}, keys, cases))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--wycheproof", type=Path, default=ROOT / "tests" / "vectors" / "wycheproof",
                        help="the folder holding mldsa_{44,65,87}_verify_test.json (or .json.gz)")
    parser.add_argument("--wycheproof-commit", default=DEFAULT_WYCHEPROOF_COMMIT,
                        help="the C2SP/wycheproof commit those files are from")
    parser.add_argument("--family", choices=("ML-DSA", "Falcon"), action="append",
                        help="write only this family's files (repeatable; default: both)")
    args = parser.parse_args()
    families = args.family or ["ML-DSA", "Falcon"]
    if "ML-DSA" in families:
        mldsa_cases(args.wycheproof, args.wycheproof_commit)
    if "Falcon" in families:
        falcon_cases()
    return 0


if __name__ == "__main__":
    sys.exit(main())
