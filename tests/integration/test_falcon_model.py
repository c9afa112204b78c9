"""The Falcon specification model (qmemo.crypto.conformance.falcon_model) held to an outside
source, and the node's Falcon case files held to the model.

The model gives the Falcon edge cases their verdicts, so a model that is wrong would make
case files that are wrong in the same way, and every verifier held to them would look
right. Here the model must accept all 100 signatures of NIST's round-3 Falcon-512 KAT
(falcon512-KAT.rsp, rebuilt by qmemo.crypto.vector_files from liboqs's kat_sig and refused
unless its sha256 is the published one) and refuse each of their bit flips; and every
case of the four case files a node checks itself against at start
(qmemo/crypto/conformance/<variant>.json) must have the model's verdict. Milliseconds
each, after kat_sig's second.
"""

from __future__ import annotations

import pytest

from qmemo.crypto import conformance, vector_sources
from qmemo.crypto.conformance import falcon_edges, falcon_model

NIST_KAT = "nist falcon512-KAT"


@pytest.fixture(scope="module")
def nist_falcon512_cases() -> tuple[vector_sources.VectorCase, ...]:
    source = next(s for s in vector_sources.sources_of("Falcon-512") if s.label == NIST_KAT)
    return vector_sources.cases_of(source)


def model_verdict(case, name: str) -> falcon_model.Verdict:
    logn, padded = falcon_edges.VARIANTS[name]
    return falcon_model.verify(case.public_key, case.message, case.signature, logn, padded=padded)


def test_the_model_accepts_every_signature_of_nists_falcon512_kat(nist_falcon512_cases):
    assert len(nist_falcon512_cases) == 100
    refused = [f"{c.case_id}: {v.reason}" for c in nist_falcon512_cases
               if not (v := model_verdict(c, "Falcon-512")).valid]
    assert not refused, "the model refuses NIST's own signatures:\n" + "\n".join(refused)


def test_the_model_refuses_every_bit_flip_of_nists_falcon512_kat(nist_falcon512_cases):
    flips = vector_sources.flipped(nist_falcon512_cases)
    assert len(flips) == 300
    accepted = [f"{c.case_id} ({c.comment})" for c in flips if model_verdict(c, "Falcon-512").valid]
    assert not accepted, "the model accepts:\n" + "\n".join(accepted)


@pytest.mark.parametrize("name", sorted(falcon_edges.VARIANTS))
def test_every_case_of_the_node_case_file_has_the_models_verdict(name):
    case_file = conformance.cases_for(name)
    assert case_file is not None and case_file.cases, f"no case file for {name}"
    assert any(c.valid for c in case_file.cases) and any(not c.valid for c in case_file.cases)
    wrong = [f"{c.name}: the file says {'valid' if c.valid else 'invalid'}, the model {v.reason}"
             for c in case_file.cases if (v := model_verdict(c, name)).valid != c.valid]
    assert not wrong, f"{conformance.case_file_name(name)} disagrees with the model:\n" + "\n".join(wrong)
