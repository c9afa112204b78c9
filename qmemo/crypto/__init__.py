"""Signatures and hashing: the only package that touches liboqs or the classical libraries.

BLAKE3-512 hashing lives in the pure core (`qmemo.core.hashing`, re-exported here);
`schemes` loads liboqs on first use through `liboqs.load_oqs()`, which refuses to let
liboqs-python download it.
"""

from qmemo.core.hashing import DIGEST_BYTES, Domain, blake3_512
from qmemo.crypto.schemes import (
    KeyPair,
    SchemeInfo,
    SignatureScheme,
    canonical_name,
    get_scheme,
    scheme_by_id,
    scheme_id_of,
    scheme_names,
)

__all__ = [
    "DIGEST_BYTES", "Domain", "KeyPair", "SchemeInfo", "SignatureScheme", "blake3_512",
    "canonical_name", "get_scheme", "scheme_by_id", "scheme_id_of", "scheme_names",
]
