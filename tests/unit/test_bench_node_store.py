"""`python -m qmemo.bench.node_store`'s two looks inside the store: `--pragma` reaches the
store's connection, and `--statements` times the statements of the blocks' writes only."""

from __future__ import annotations

import argparse

import pytest

from qmemo.bench.node_store import StatementTimes, connection_class, pragma, store_costs
from qmemo.node.store import ChainStore
from tests.unit.chain_kit import Devnet


@pytest.mark.parametrize("text", ["cache_size=-262144", "wal_autocheckpoint=8000", "temp_store=MEMORY"])
def test_a_pragma_is_a_name_and_an_integer_or_a_word(text):
    assert pragma(text) == text


@pytest.mark.parametrize(("text", "why"), [
    ("cache_size", "not NAME=VALUE"), ("cache_size=1; DROP TABLE blocks", "not NAME=VALUE"),
    ("Cache_Size=1", "not NAME=VALUE"), ("synchronous=OFF", "sets synchronous itself"),
    ("page_size=4096", "sets page_size itself"), ("journal_mode=DELETE", "sets journal_mode itself")])
def test_a_pragma_that_is_not_one_or_that_the_store_sets_is_refused(text, why):
    with pytest.raises(argparse.ArgumentTypeError, match=why):
        pragma(text)


def test_the_connection_takes_the_pragmas_and_times_statements_only_while_on(tmp_path):
    net = Devnet()
    times = StatementTimes()
    with ChainStore(tmp_path / "chain.sqlite", net.genesis,
                    connection=connection_class(["cache_size=-4000"], times)) as store:
        assert store._db.execute("PRAGMA cache_size").fetchone()[0] == -4000
        assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"    # the store's own, after
        store.append(net.apply(net.next_block([net.transfer(net.alice, net.bob, 3)])))
        assert not times.all                       # off: nothing timed
        times.on = True
        store.append(net.apply(net.next_block([net.transfer(net.alice, net.bob, 3)])))
        assert {"COMMIT", "INSERT INTO tx_keys", "INSERT INTO blocks"} <= set(times.all)
        assert not times.last
        times.in_last = True
        store.append(net.apply(net.next_block([net.transfer(net.alice, net.bob, 3)])))
        assert set(times.last) <= set(times.all) and "COMMIT" in times.last
        assert all(times.all[name] >= times.last[name] for name in times.last)
        assert store.height == 3 and store.block(2) is not None


def test_store_costs_times_the_writes_of_every_block_and_not_the_reads(tmp_path):
    times = StatementTimes()
    costs = store_costs(2, 5, "NORMAL", ["cache_size=-4000"], times)
    assert costs["keep_branch_us_per_tx"] > 0 and costs["append_us_per_tx"] > 0
    assert "INSERT INTO block_encodings" in times.all and "COMMIT" in times.last
    assert not any(name.startswith("SELECT e.encoded") for name in times.all)     # the read-back, untimed
    assert times.on is False
