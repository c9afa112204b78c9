"""The signature-length rule, held to one case table by Python and by C.

tests/vectors/signature_lengths.json (written by tests/vectors/make_vectors.py) lists,
for every registered scheme, public-key and signature lengths and the verdict on length
grounds alone. The same cases go through the Python rule (`SchemeRules`, which the core,
the registry's verify and the batch verifier's input all use) and through the native
batch verifier (qmemo_batch.c), whose per-item verdict says whether the length rule
refused an item before liboqs was called: the table's verdict is what both are checked
against, as BLAKE3's test_vectors.json is read by each of its languages.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from qmemo.core.scheme_rules import SchemeRules
from qmemo.crypto.batch import Verdict, batch_verdicts
from qmemo.crypto.schemes import get_scheme, scheme_names
from qmemo.crypto.verifier import scheme_table
from qmemo.errors import CryptoError

TABLE_PATH = Path(__file__).parents[1] / "vectors" / "signature_lengths.json"
TABLE = orjson.loads(TABLE_PATH.read_bytes())
CASES = TABLE["cases"]
LIBOQS_CASES = [case for case in CASES if TABLE["schemes"][case["scheme"]]["family"] != "classical"]
MESSAGE = bytes(range(256))


def case_id(case: dict) -> str:
    return f"{case['scheme']}: {case['description']}"


def test_table_is_what_the_script_writes():
    from tests.vectors.make_vectors import build_lengths, render

    assert render(build_lengths()) == TABLE_PATH.read_bytes()


def test_table_covers_every_scheme_family_and_both_length_kinds():
    assert list(TABLE["schemes"]) == scheme_names()
    assert {entry["family"] for entry in TABLE["schemes"].values()} == \
        {"Falcon", "ML-DSA", "SLH-DSA", "MAYO", "classical"}
    assert {entry["signature_length"] for entry in TABLE["schemes"].values()} == {"fixed", "variable"}
    for name in scheme_names():
        verdicts = {case["accept"] for case in CASES if case["scheme"] == name}
        assert verdicts == {True, False}, f"{name} needs cases on both sides of the rule"


@pytest.mark.parametrize("name", scheme_names())
def test_registry_states_what_the_table_says(name):
    info, entry = get_scheme(name).info, TABLE["schemes"][name]
    assert (info.family, info.public_key_bytes, info.max_signature_bytes) == \
        (entry["family"], entry["public_key_bytes"], entry["max_signature_bytes"])
    assert info.fixed_signature_length == (entry["signature_length"] == "fixed")


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_python_rule_gives_the_tables_verdict(case):
    rules = get_scheme(case["scheme"]).rules
    assert rules.lengths_ok(case["public_key_bytes"], case["signature_bytes"]) is case["accept"]
    # The core's table holds the same rule (it is built from the registry's SchemeInfo).
    core_rules = scheme_table().by_name(case["scheme"])
    assert core_rules == rules == SchemeRules.of(get_scheme(case["scheme"]).info)
    if case["public_key_bytes"] == rules.public_key_bytes:
        assert core_rules.signature_length_ok(case["signature_bytes"]) is case["accept"]


@pytest.fixture(scope="module")
def real_signatures() -> dict[str, tuple[bytes, bytes]]:
    """(public key, signature of MESSAGE) per liboqs scheme, made once."""
    signed = {}
    for name in dict.fromkeys(case["scheme"] for case in LIBOQS_CASES):
        scheme = get_scheme(name)
        pair = scheme.keypair()
        signed[name] = (pair.public_key, scheme.sign(pair.secret_key, MESSAGE))
    return signed


def _resized(data: bytes, length: int) -> bytes:
    """`data` cut or zero-extended to `length` bytes (a real value, tampered only in length)."""
    return data[:length] + bytes(max(0, length - len(data)))


@pytest.mark.parametrize("case", LIBOQS_CASES, ids=case_id)
def test_native_batch_verifier_gives_the_tables_verdict(case, real_signatures):
    scheme = get_scheme(case["scheme"])
    real_key, real_signature = real_signatures[case["scheme"]]
    key = _resized(real_key, case["public_key_bytes"])
    signature = _resized(real_signature, case["signature_bytes"])
    [verdict] = batch_verdicts(scheme._sig, scheme.rules, [(key, MESSAGE, signature)])
    # BAD_LENGTH is set only on the path that refuses an item before liboqs is called.
    assert (verdict is not Verdict.BAD_LENGTH) is case["accept"], verdict
    if (key, signature) == (real_key, real_signature):
        assert verdict is Verdict.VALID


def test_native_batch_verifier_checks_real_signatures_beside_refused_ones(real_signatures):
    scheme = get_scheme("Falcon-padded-512")
    key, signature = real_signatures["Falcon-padded-512"]
    items = [(key, MESSAGE, signature), (key, MESSAGE, signature[:-1]), (key, MESSAGE[1:], signature)]
    assert batch_verdicts(scheme._sig, scheme.rules, items) == \
        [Verdict.VALID, Verdict.BAD_LENGTH, Verdict.BAD_SIGNATURE]


@pytest.mark.parametrize("change", [{"public_key_bytes": 896}, {"max_signature_bytes": 753},
                                    {"fixed_signature_length": True, "max_signature_bytes": 0}])
def test_native_batch_verifier_refuses_a_rule_that_does_not_fit_liboqs(change, real_signatures):
    scheme = get_scheme("Falcon-512")
    key, signature = real_signatures["Falcon-512"]
    fields = {"name": "Falcon-512", "scheme_id": 1, "public_key_bytes": 897, "max_signature_bytes": 752,
              "fixed_signature_length": False, **change}
    with pytest.raises(CryptoError):
        batch_verdicts(scheme._sig, SchemeRules(**fields), [(key, MESSAGE, signature)])
