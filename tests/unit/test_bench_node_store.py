"""`python -m qmemo.bench.node_store`'s looks inside the store (qmemo.bench.sqlite_probe):
`--pragma` reaches the store's connection and says what took, `--statements` times each
store call's statements, the blocks' writes only, and bad arguments are refused."""

from __future__ import annotations

import argparse
import sys

import pytest

from qmemo.bench import node_store
from qmemo.bench.sqlite_probe import StatementTimes, connection_class, pragma
from qmemo.node.store import ChainStore
from tests.unit.chain_kit import Devnet


@pytest.mark.parametrize(("text", "kept"), [
    ("cache_size=-262144", "cache_size=-262144"), ("WAL_AUTOCHECKPOINT=8000", "wal_autocheckpoint=8000"),
    ("temp_store=MEMORY", "temp_store=MEMORY"), ("mmap_size=268435456", "mmap_size=268435456")])
def test_a_pragma_is_a_setting_of_the_connection_and_an_integer_or_a_word(text, kept):
    assert pragma(text) == kept


@pytest.mark.parametrize(("text", "why"), [
    ("cache_size", "not NAME=VALUE"), ("cache_size=1;DROP", "not NAME=VALUE"),
    ("cache_size=1 OR 1", "not NAME=VALUE"), ("cache_sise=1", "cache_sise is not one of"),
    ("synchronous=OFF", "sets page_size, journal_mode and synchronous itself"),
    ("page_size=4096", "page_size is not one of"), ("user_version=1", "user_version is not one of")])
def test_a_pragma_that_is_not_one_or_that_would_change_the_store_is_refused(text, why):
    with pytest.raises(argparse.ArgumentTypeError, match=why):
        pragma(text)


def test_the_connection_takes_the_pragmas_and_times_only_the_call_named(tmp_path):
    net = Devnet()
    times = StatementTimes()
    took: dict[str, object] = {}
    connection = connection_class(["cache_size=-4000", "temp_store=NOSUCH"], times, took)
    with ChainStore(tmp_path / "chain.sqlite", net.genesis, connection=connection) as store:
        assert took == {"cache_size": -4000, "temp_store": 0}     # SQLite ignored the unknown word: shown
        assert store._db.execute("PRAGMA cache_size").fetchone()[0] == -4000
        assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"    # the store's own, after
        assert store._db.isolation_level is None
        store.append(net.apply(net.next_block([net.transfer(net.alice, net.bob, 3)])))
        assert not times.calls                     # no call named: nothing timed
        times.phase = "append"
        store.append(net.apply(net.next_block([net.transfer(net.alice, net.bob, 3)])))
        assert times.calls[("append", "COMMIT")] == times.calls[("append", "INSERT INTO blocks")] == 1
        assert not times.calls_last and not times.seconds_last
        before = dict(times.seconds)
        times.in_last = True
        store.append(net.apply(net.next_block([net.transfer(net.alice, net.bob, 3)])))
        assert times.calls_last[("append", "COMMIT")] == 1 and times.calls[("append", "COMMIT")] == 2
        assert times.seconds_last[("append", "COMMIT")] == \
            pytest.approx(times.seconds[("append", "COMMIT")] - before[("append", "COMMIT")])
        assert store.height == 3 and store.block(2) is not None


def test_store_costs_times_each_block_s_writes_and_the_last_quarter_is_its_last_blocks():
    times = StatementTimes()
    costs = node_store.store_costs(8, 5, "NORMAL", [], times)
    assert costs["keep_branch_us_per_tx"] > 0 and costs["append_us_per_tx"] > 0
    # 8 blocks: each call once per block, the last 2 in the last quarter
    assert times.calls[("keep_branch", "INSERT INTO block_encodings")] == 8
    assert times.calls[("append", "INSERT INTO blocks")] == 8
    assert times.calls_last[("keep_branch", "INSERT INTO block_encodings")] == 2
    assert times.calls_last[("append", "INSERT INTO blocks")] == 2
    assert {call for call, _ in times.calls} == {"keep_branch", "append"}      # the read-back: untimed
    assert times.phase is None


@pytest.mark.parametrize(("argv", "message"), [
    (["--blocks", "0"], "must be at least 1"), (["--txs", "0"], "must be at least 1"),
    (["--pragma", "synchronous=OFF"], "synchronous itself")])
def test_the_command_refuses_bad_arguments_with_a_line(monkeypatch, capsys, argv, message):
    monkeypatch.setattr(sys, "argv", ["node_store", *argv])
    with pytest.raises(SystemExit) as stopped:
        node_store.main()
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err
