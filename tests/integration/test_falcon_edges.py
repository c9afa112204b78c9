"""Falcon's edge cases held to the round-3 specification, through every Falcon verifier.

Each case is built at test time from a liboqs key and signature
(qmemo.crypto.conformance.falcon_edges) and carries the verdict the specification gives
it (falcon_model, a verify written from the spec's text, agrees with every case as it is
built). Every verifier the registry offers - the fast one under each PQClean
implementation this CPU runs, and liboqs's - must give that verdict, one call at a time
and in a batch. Falcon-padded-1024's cases (slower to build: its norm cases rarely fit
the padded length) are checked from the node's case file, by test_conformance.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from qmemo.crypto.conformance import falcon_edges, falcon_model
from qmemo.crypto.falcon_vt import implementation, select_implementation
from qmemo.crypto.schemes import VERIFIERS, get_scheme
from qmemo.errors import CryptoError

pytestmark = pytest.mark.slow

BUILT = ("Falcon-512", "Falcon-padded-512", "Falcon-1024")
MESSAGE = b"a Falcon edge case, built at test time"


@pytest.fixture(scope="module")
def cases() -> dict[str, list[falcon_edges.EdgeCase]]:
    return {name: falcon_edges.edge_cases(name, falcon_edges.liboqs_signer(name, MESSAGE)) for name in BUILT}


@pytest.fixture(params=["clean", "avx2"])
def impl(request):
    """The fast verifier's PQClean implementation for the test, then the default again."""
    default = implementation()
    try:
        select_implementation(request.param)
    except CryptoError:
        pytest.skip(f"this CPU cannot run the {request.param} code")
    yield request.param
    select_implementation(default)


def disagreements(scheme, cases) -> list[str]:
    items = [(c.public_key, c.message, c.signature) for c in cases]
    batch, _ = scheme.verify_many(items)
    out = []
    for case, batched in zip(cases, batch, strict=True):
        single = scheme.verify(case.public_key, case.message, case.signature)
        if single != case.valid or bool(batched) != case.valid:
            out.append(f"{case.kind}: the spec says {case.valid} ({case.rule}), verify {single}, verify_many {batched}")
    return out


@pytest.mark.parametrize("name", BUILT)
@pytest.mark.parametrize("verifier", VERIFIERS)
def test_every_falcon_verifier_gives_the_specification_verdict_on_every_edge_case(cases, name, verifier, impl):
    assert disagreements(get_scheme(name, verifier), cases[name]) == []


@pytest.mark.parametrize("name", BUILT)
def test_every_edge_kind_is_built(cases, name):
    kinds = {c.kind for c in cases[name]}
    common = {"valid", "minus_zero", "unused_bits_set", "magnitude_over_2047", "header_other_degree",
              "header_uncompressed_format", "header_top_bit_set", "nonce_39_bytes", "ends_inside_nonce", "no_s2",
              "truncated_last_byte", "norm_at_bound", "norm_one_past_bound"}
    padded = {"padded_unpadded_length", "padded_one_byte_long", "padded_nonzero_last_byte"}
    variable = {"trailing_zero_byte", "trailing_nonzero_byte", "zero_padded_to_sbytelen", "nonzero_padded_to_sbytelen"}
    assert kinds == common | (padded if falcon_edges.VARIANTS[name][1] else variable)


@pytest.mark.parametrize("name", BUILT)
def test_the_norm_cases_sit_exactly_at_the_bound_and_one_past_it(cases, name):
    logn, padded = falcon_edges.VARIANTS[name]
    by_kind = {c.kind: c for c in cases[name]}
    for kind, norm in (("norm_at_bound", falcon_model.NORM_BOUND[logn]),
                       ("norm_one_past_bound", falcon_model.NORM_BOUND[logn] + 1)):
        case = by_kind[kind]
        verdict = falcon_model.verify(case.public_key, case.message, case.signature, logn, padded=padded)
        assert verdict.squared_norm == norm and verdict.valid is case.valid
    assert falcon_model.NORM_BOUND[9] == 34034726       # floor(beta^2) of Falcon-512, the spec's Table 3.3


def test_minus_zero_differs_from_the_valid_signature_in_one_sign_bit_only(cases):
    by_kind = {c.kind: c for c in cases["Falcon-512"]}
    valid, minus = by_kind["valid"].signature, by_kind["minus_zero"].signature
    diff = [i for i in range(len(valid)) if valid[i] != minus[i]]
    assert len(valid) == len(minus) and len(diff) == 1 and bin(valid[diff[0]] ^ minus[diff[0]]).count("1") == 1


def test_the_model_accepts_liboqs_signatures_and_refuses_one_flipped_bit():
    scheme = get_scheme("Falcon-512", "liboqs")
    for i in range(4):
        pair = scheme.keypair()
        message = bytes([i]) * 32
        signature = scheme.sign(pair.secret_key, message)
        assert falcon_model.verify(pair.public_key, message, signature, 9, padded=False).valid
        flipped = signature[:50] + bytes([signature[50] ^ 4]) + signature[51:]
        assert not falcon_model.verify(pair.public_key, message, flipped, 9, padded=False).valid


def test_the_model_reads_what_liboqs_writes():
    scheme = get_scheme("Falcon-512", "liboqs")
    pair = scheme.keypair()
    f, g = falcon_model.secret_basis(pair.secret_key, 9)
    h = falcon_model.decode_public_key(pair.public_key, 9)
    # h = g / f mod q: f*h = g
    assert np.array_equal(falcon_model.centred(falcon_model.ring_multiply(f, h)), g)
    _, s2 = falcon_model.parse_signature(scheme.sign(pair.secret_key, b"m"), 9)
    assert len(s2) == 512 and np.abs(s2).max() <= 2047
