"""The chain's verifiers, made once as a node starts: every scheme the genesis verifies is
held to its known answers first (qmemo.crypto.conformance: NonConformingVerifier, one line
naming the scheme, the verifier and the case), then the admission kernel gets the node's
verifier for each transaction scheme.

Why before anything else: a node that verifies with a verifier the standards' vectors
refute would accept what its peers refuse - a fork with one transaction - so it must not
start at all. Never verifies a transaction itself.
"""

from __future__ import annotations

from qmemo.core.genesis import Genesis
from qmemo.crypto.admit_kernel import AdmitKernel
from qmemo.crypto.conformance import require_conformance
from qmemo.errors import SetupError, UnknownScheme


def chain_schemes(genesis: Genesis) -> list[str]:
    """Every scheme the chain verifies, once each: its transactions' and its validators'."""
    ids = (*genesis.tx_scheme_ids, *(validator.scheme_id for validator in genesis.validators))
    return list(dict.fromkeys(genesis.scheme_name(scheme_id) for scheme_id in ids))


def admission_kernel(genesis: Genesis, verifier: str) -> AdmitKernel:
    """The admission kernel for this chain with the node's verifier, once every scheme of the
    chain passed its conformance self-test; every transaction scheme of the genesis needs a
    native verifier (the one path admits every batch): SetupError naming the scheme otherwise."""
    require_conformance(chain_schemes(genesis), verifier)
    try:
        return AdmitKernel(genesis.chain_id, [genesis.scheme_name(i) for i in genesis.tx_scheme_ids],
                           verifier=verifier)
    except UnknownScheme as exc:
        raise SetupError(f"the admission kernel cannot verify this chain's transactions: {exc}") from None
