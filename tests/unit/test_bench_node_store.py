"""`python -m qmemo.bench.node_store`'s looks inside the store (qmemo.bench.sqlite_probe):
`--pragma` reaches the store's connection and says what took, `--statements` times each
store call's statements, the blocks' writes only, and bad arguments are refused."""

from __future__ import annotations

import argparse
import sqlite3
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
    ("page_size=4096", "page_size is not one of"), ("user_version=1", "user_version is not one of"),
    ("cache_spill=100", "cache_spill is not one of"),
    ("wal_autocheckpoint=OFF", "takes an integer, not 'OFF'"), ("cache_size=MEMORY", "takes an integer"),
    ("temp_store=MEMROY", "takes DEFAULT, FILE, MEMORY, 0, 1 or 2")])
def test_a_pragma_that_is_not_one_or_that_would_change_the_store_is_refused(text, why):
    with pytest.raises(argparse.ArgumentTypeError, match=why):
        pragma(text)


def test_the_connection_takes_the_pragmas_and_times_only_the_call_named(tmp_path):
    net = Devnet()
    times = StatementTimes()
    took: dict[str, object] = {}
    connection = connection_class(["cache_size=-4000", "temp_store=MEMORY"], times, took)
    with ChainStore(tmp_path / "chain.sqlite", net.genesis, connection=connection) as store:
        assert took == {"cache_size": -4000, "temp_store": 2}      # what SQLite reads back: MEMORY is 2
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


@pytest.mark.parametrize("setting", ["cache_size=-4000", "mmap_size=1048576", "wal_autocheckpoint=0",
                                     "journal_size_limit=1048576", "temp_store=FILE"])
def test_what_a_setting_reads_back_when_set_is_what_the_open_store_has(tmp_path, setting):
    # read back when the connection opens, before the store sets its own pragmas: it must
    # still be the value in force after (cache_spill was not: it is not offered)
    took: dict[str, object] = {}
    name = setting.partition("=")[0]
    with ChainStore(tmp_path / "chain.sqlite", Devnet().genesis,
                    connection=connection_class([pragma(setting)], None, took)) as store:
        default = sqlite3.connect(tmp_path / "default.sqlite").execute(f"PRAGMA {name}").fetchone()[0]
        assert took[name] == store._db.execute(f"PRAGMA {name}").fetchone()[0] != default


def test_without_either_look_the_store_has_sqlite_s_own_connection(monkeypatch):
    classes = []

    class Spy(ChainStore):
        def __init__(self, *args, connection, **kwargs):
            classes.append(connection)
            super().__init__(*args, connection=connection, **kwargs)

    monkeypatch.setattr(node_store, "ChainStore", Spy)
    node_store.store_costs(1, 2, "NORMAL")
    node_store.store_costs(1, 2, "NORMAL", ["cache_size=-4000"])
    assert classes[0] is sqlite3.Connection
    assert classes[1] is not sqlite3.Connection and issubclass(classes[1], sqlite3.Connection)


def test_store_costs_times_each_block_s_writes_and_the_last_quarter_is_its_last_blocks():
    assert [node_store.last_quarter(blocks) for blocks in (1, 3, 4, 8, 100)] == [1, 1, 1, 2, 25]
    times = StatementTimes()
    costs = node_store.store_costs(8, 5, "NORMAL", [], times)
    assert costs["keep_branch_us_per_tx"] > 0 and costs["append_us_per_tx"] > 0
    assert costs["keep_branch_us_per_tx_last"] > 0 and costs["append_us_per_tx_last"] > 0
    # 8 blocks: each call once per block, the last 2 in the last quarter
    assert times.calls[("keep_branch", "INSERT INTO block_encodings")] == 8
    assert times.calls[("append", "INSERT INTO blocks")] == 8
    assert times.calls_last[("keep_branch", "INSERT INTO block_encodings")] == 2
    assert times.calls_last[("append", "INSERT INTO blocks")] == 2
    assert {call for call, _ in times.calls} == {"keep_branch", "append"}      # the read-back: untimed
    assert times.phase is None


def test_the_command_prints_the_settings_read_back_and_a_line_per_statement(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["node_store", "--blocks", "1", "--txs", "2", "--statements",
                                      "--pragma", "cache_size=-4000"])
    node_store.main()
    out = capsys.readouterr().out.splitlines()
    assert "cache_size=-4000 (reads -4000), 2 transactions a block" in out[0]
    assert any(line.startswith("  append COMMIT: ") and line.endswith("over the last 1 (1 calls)") for line in out)


def test_a_store_that_fails_is_one_line_and_exit_2(monkeypatch, capsys):
    def fail(*args, **kwargs):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(node_store, "store_costs", fail)
    monkeypatch.setattr(sys, "argv", ["node_store", "--blocks", "1"])
    with pytest.raises(SystemExit) as stopped:
        node_store.main()
    assert stopped.value.code == 2 and capsys.readouterr().err == "node_store: disk I/O error\n"


@pytest.mark.parametrize(("argv", "message"), [
    (["--blocks", "0"], "must be at least 1"), (["--txs", "0"], "must be at least 1"),
    (["--pragma", "synchronous=OFF"], "synchronous itself"),
    (["--pragma", "cache_size=1", "--pragma", "CACHE_SIZE=2"], "one value per setting")])
def test_the_command_refuses_bad_arguments_with_a_line(monkeypatch, capsys, argv, message):
    monkeypatch.setattr(sys, "argv", ["node_store", *argv])
    with pytest.raises(SystemExit) as stopped:
        node_store.main()
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err
