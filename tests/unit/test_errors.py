"""The error hierarchy: our own mistakes apart from a client's or a peer's, each error
with the status to answer, and errors kept as values without what raised them."""

from __future__ import annotations

import pytest

from qmemo.errors import ConfigError, InvalidTransaction, Misuse, NotFound, PeerError, PeerRefused, QmemoError


def test_misuse_is_our_bug_a_500_and_no_client_error():
    misuse = Misuse("no leaf 5 among 5", code="no_such_leaf")
    assert isinstance(misuse, QmemoError) and not isinstance(misuse, (NotFound, ConfigError))
    assert (misuse.http_status, misuse.to_json()) == (500, {"error": "no_such_leaf", "detail": "no leaf 5 among 5"})
    assert Misuse("anything").code == "internal_misuse"


def test_a_peer_refusal_keeps_our_code_and_carries_the_peers_apart():
    refused = PeerRefused("http://peer refused the block: not its turn", peer_code="wrong_producer", peer_status=422)
    assert isinstance(refused, PeerError)
    assert (refused.code, refused.http_status) == ("peer_refused", 502)
    assert (refused.peer_code, refused.peer_status) == ("wrong_producer", 422)


def _raise_from_inside() -> None:
    try:
        int("x")
    except ValueError:
        raise InvalidTransaction("nonce 5 skips ahead", code="nonce_gap") from None


def test_a_detached_error_keeps_its_answer_and_drops_what_raised_it():
    with pytest.raises(InvalidTransaction) as raised:
        _raise_from_inside()
    error = raised.value
    assert error.__traceback__ is not None and error.__context__ is not None
    assert error.detached() is error
    assert (error.__traceback__, error.__context__, error.__cause__) == (None, None, None)
    assert (error.code, error.detail, error.http_status) == ("nonce_gap", "nonce 5 skips ahead", 422)
