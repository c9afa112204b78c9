"""The genesis file: parsing, checks, its hash; and the producer schedule with fallback."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from qmemo.core.genesis import fallback_order, genesis_from_json, next_turn_ms, parse_genesis, scheduled_producer
from qmemo.crypto.verifier import load_genesis
from qmemo.core.state import ChainState
from qmemo.errors import ConfigError
from tests.unit.chain_kit import GENESIS_TIME_MS, INITIAL_BALANCE, default_genesis, genesis_document, schemes


def parse(**overrides: object):
    return parse_genesis(genesis_document(**overrides), schemes())


def test_genesis_parses_and_writes_back_the_same_document():
    genesis = default_genesis()
    assert genesis.to_json() == genesis_document()
    assert [v.name for v in genesis.validators] == ["validator-0", "validator-1", "validator-2"]
    assert [v.index for v in genesis.validators] == [0, 1, 2]


def test_initial_state_holds_the_prefunded_balances_at_height_zero():
    genesis = default_genesis()
    state = ChainState.from_genesis(genesis)
    assert (state.height, state.tip_hash, state.tip_timestamp_ms) == (0, genesis.hash, GENESIS_TIME_MS)
    assert sorted(a.balance for a in state.accounts.values()) == [INITIAL_BALANCE] * 3


@pytest.mark.parametrize("field, value", [("chain_id", 8), ("genesis_time_ms", 1), ("block_interval_ms", 1000),
                                          ("producer_timeout_ms", 3000), ("max_clock_drift_ms", 400),
                                          ("max_block_transactions", 10), ("min_fee", 2),
                                          ("tx_schemes", ["Falcon-512"])])
def test_every_parameter_changes_the_genesis_hash(field, value):
    assert parse(**{field: value}).hash != default_genesis().hash


def test_validator_order_and_balances_change_the_genesis_hash():
    document = genesis_document()
    assert parse(validators=document["validators"][::-1]).hash != default_genesis().hash
    accounts = [dict(document["accounts"][0], balance=1)] + document["accounts"][1:]
    assert parse(accounts=accounts).hash != default_genesis().hash


@pytest.mark.parametrize("overrides, match", [
    ({"format": "qmemo-genesis/2"}, "format"),
    ({"block_interval_ms": 0}, "block_interval_ms"),
    ({"producer_timeout_ms": 0}, "producer_timeout_ms"),
    ({"max_clock_drift_ms": 2000}, "max_clock_drift_ms"),
    ({"max_block_transactions": 0}, "max_block_transactions"),
    ({"tx_schemes": []}, "tx_schemes"),
    ({"tx_schemes": ["Falcon-512", "Falcon-512"]}, "twice"),
    ({"tx_schemes": ["Falcon-9"]}, "unknown signature scheme"),
    ({"validators": []}, "validators"),
    ({"chain_id": -1}, "chain_id"),
    ({"extra": 1}, "unknown keys"),
    ({"min_fee": -1}, "min_fee"),
])
def test_bad_genesis_parameters_are_refused(overrides, match):
    with pytest.raises(ConfigError, match=match):
        parse(**overrides)


def test_genesis_without_min_fee_is_refused_with_how_to_fix_it():
    document = genesis_document()
    del document["min_fee"]
    with pytest.raises(ConfigError, match='no "min_fee".*qmemo genesis'):
        parse_genesis(document, schemes())


def test_validator_key_of_the_wrong_length_is_refused():
    validators = genesis_document()["validators"]
    validators[1] = dict(validators[1], public_key=validators[1]["public_key"][:-2])
    with pytest.raises(ConfigError, match="897 bytes"):
        parse(validators=validators)


def test_validators_sharing_a_name_or_key_are_refused():
    validators = genesis_document()["validators"]
    with pytest.raises(ConfigError, match="name"):
        parse(validators=[validators[0], dict(validators[1], name="validator-0")])
    with pytest.raises(ConfigError, match="key"):
        parse(validators=[validators[0], dict(validators[0], name="other")])


def test_account_listed_twice_is_refused():
    accounts = genesis_document()["accounts"]
    with pytest.raises(ConfigError, match="twice"):
        parse(accounts=accounts + accounts[:1])


def test_total_supply_beyond_2_63_is_refused():
    accounts = genesis_document()["accounts"]
    with pytest.raises(ConfigError, match="total supply"):
        parse(accounts=[dict(a, balance=(1 << 62)) for a in accounts])


# --- the producer schedule --------------------------------------------------------------------

genesis = default_genesis()
PARENT = 10_000
INTERVAL, TIMEOUT = genesis.block_interval_ms, genesis.producer_timeout_ms


def test_primary_producer_rotates_round_robin_by_height():
    assert [scheduled_producer(genesis, h, PARENT, PARENT + INTERVAL) for h in range(1, 7)] == [0, 1, 2, 0, 1, 2]


def test_no_one_is_scheduled_before_the_slot_opens():
    assert scheduled_producer(genesis, 1, PARENT, PARENT + INTERVAL - 1) is None


def test_turn_passes_along_the_fallback_order_every_timeout_and_wraps():
    # Block 2: primary is validator 1, then 2, then 0, then 1 again.
    assert fallback_order(genesis, 2) == [1, 2, 0]
    starts = [PARENT + INTERVAL + k * TIMEOUT for k in range(4)]
    assert [scheduled_producer(genesis, 2, PARENT, t) for t in starts] == [1, 2, 0, 1]
    assert [scheduled_producer(genesis, 2, PARENT, t - 1) for t in starts[1:]] == [1, 2, 0]


@given(st.integers(0, 2), st.integers(1, 50), st.integers(0, 10**6), st.integers(0, 10**6))
def test_next_turn_is_the_first_moment_the_validator_is_scheduled(validator, height, parent, offset):
    not_before = parent + offset
    turn = next_turn_ms(genesis, validator, height, parent, not_before)
    assert turn >= not_before
    assert scheduled_producer(genesis, height, parent, turn) == validator
    # Nothing earlier (down to not_before) was its turn: check the window edge before it.
    if turn > not_before:
        assert scheduled_producer(genesis, height, parent, turn - 1) != validator


def test_single_validator_is_always_scheduled():
    solo = replace(genesis, validators=genesis.validators[:1])
    assert {scheduled_producer(solo, 5, PARENT, PARENT + INTERVAL + t) for t in range(0, 10_000, 700)} == {0}


def test_a_genesis_files_bytes_parse_in_the_core_and_what_is_not_json_is_named():
    raw = orjson.dumps(genesis_document())
    assert genesis_from_json(raw, schemes()) == default_genesis()
    with pytest.raises(ConfigError, match=r"genesis file g\.json is not JSON") as refused:
        genesis_from_json(b"{not json", schemes(), "g.json")
    assert refused.value.code == "bad_genesis"


def test_load_genesis_reads_and_checks_a_file(tmp_path):
    path = tmp_path / "genesis.json"
    path.write_bytes(orjson.dumps(genesis_document()))
    assert load_genesis(path) == default_genesis()
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="not JSON"):
        load_genesis(path)
    with pytest.raises(ConfigError, match="cannot read"):
        load_genesis(tmp_path / "missing.json")


def test_the_generator_reads_a_genesis_without_loading_the_nodes_store():
    # The generator and the tools read genesis files too: file reading is crypto.verifier's,
    # parsing the core's, and neither pulls in the node's SQLite store.
    code = "import sys, qmemo.load.run, qmemo.crypto.verifier; print(' '.join(sys.modules))"
    loaded = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split())
    assert "qmemo.load.run" in loaded and not loaded & {"qmemo.node.store", "sqlite3", "_sqlite3"}
