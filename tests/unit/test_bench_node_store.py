"""`python -m qmemo.bench.node_store`: every block through the journal and the store with the
raw writes of the same bytes beside it, the first and last windows, the look-ups, the JSON
document; its looks inside SQLite (qmemo.bench.sqlite_probe): `--pragma` reaches the store's
connection and says what took, `--statements` times each store call's statements, the
blocks' writes only; bad arguments are refused."""

from __future__ import annotations

import argparse
import sqlite3

import orjson
import pytest

from qmemo.bench import node_store
from qmemo.bench.sqlite_probe import StatementTimes, connection_class, pragma
from qmemo.node.store import ChainStore
from tests.unit.chain_kit import Devnet


@pytest.mark.parametrize(("text", "kept"), [
    ("cache_size=-262144", "cache_size=-262144"), ("CACHE_SIZE=8000", "cache_size=8000"),
    ("temp_store=MEMORY", "temp_store=MEMORY"), ("journal_size_limit=1048576", "journal_size_limit=1048576")])
def test_a_pragma_is_a_setting_of_the_connection_and_an_integer_or_a_word(text, kept):
    assert pragma(text) == kept


@pytest.mark.parametrize(("text", "why"), [
    ("cache_size", "not NAME=VALUE"), ("cache_size=1;DROP", "not NAME=VALUE"),
    ("cache_size=1 OR 1", "not NAME=VALUE"), ("cache_sise=1", "cache_sise is not one of"),
    ("synchronous=OFF", "sets page_size, journal_mode, synchronous, mmap_size and cache_spill itself"),
    ("mmap_size=0", "mmap_size is not one of"), ("wal_autocheckpoint=8000", "wal_autocheckpoint is not one of"),
    ("page_size=4096", "page_size is not one of"), ("user_version=1", "user_version is not one of"),
    ("cache_spill=100", "cache_spill is not one of"), ("cache_size=MEMORY", "takes an integer"),
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
        assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "truncate"    # the store's own, after
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


@pytest.mark.parametrize("setting", ["cache_size=-4000", "journal_size_limit=1048576", "temp_store=FILE"])
def test_what_a_setting_reads_back_when_set_is_what_the_open_store_has(tmp_path, setting):
    # read back when the connection opens, before the store sets its own pragmas: it must
    # still be the value in force after
    took: dict[str, object] = {}
    name = setting.partition("=")[0]
    with ChainStore(tmp_path / "chain.sqlite", Devnet().genesis,
                    connection=connection_class([pragma(setting)], None, took)) as store:
        default = sqlite3.connect(tmp_path / "default.sqlite").execute(f"PRAGMA {name}").fetchone()[0]
        assert took[name] == store._db.execute(f"PRAGMA {name}").fetchone()[0] != default


def test_without_either_look_the_store_has_sqlite_s_own_connection(monkeypatch, tmp_path):
    classes = []

    class Spy(ChainStore):
        def __init__(self, *args, connection, **kwargs):
            classes.append(connection)
            super().__init__(*args, connection=connection, **kwargs)

    monkeypatch.setattr(node_store, "ChainStore", Spy)
    node_store.run(1, 2, "NORMAL", workdir=tmp_path)
    node_store.run(1, 2, "NORMAL", pragmas=("cache_size=-4000",), workdir=tmp_path)
    assert classes[0] is sqlite3.Connection
    assert classes[1] is not sqlite3.Connection and issubclass(classes[1], sqlite3.Connection)


def test_each_block_is_journaled_kept_and_appended_and_its_bytes_written_bare_beside(tmp_path):
    times = StatementTimes()
    measured, looks = node_store.run(8, 5, "NORMAL", request_txs=2, accounts=3, window=2, times=times,
                                     workdir=tmp_path)
    assert {name: len(values) for name, values in measured.seconds.items()} == \
        dict.fromkeys(("journal", "keep_branch", "append", "raw_block", "raw_journal"), 8)
    assert all(value > 0 for values in measured.seconds.values() for value in values)
    # each call once per block, the last 2 in the last window
    assert times.calls[("keep_branch", "INSERT OR REPLACE")] == 8
    assert times.calls[("append", "INSERT INTO blocks")] == times.calls[("append", "INSERT INTO block_tx_keys")] == 8
    assert times.calls_last[("keep_branch", "INSERT OR REPLACE")] == 2
    assert {call for call, _ in times.calls} == {"keep_branch", "append"}      # the look-ups: untimed
    assert times.phase is None
    assert set(looks) == {"place_newest_us", "place_oldest_us", "place_unknown_us", "read_bytes_ms", "read_ids_ms"}
    assert list(tmp_path.iterdir()) == []       # the chain and the raw files are gone


def test_the_summary_compares_the_first_and_last_windows_and_the_raw_writes():
    measured = node_store.BlockTimes()
    for name in node_store.STEPS:
        measured.seconds[name] = [1.0, 1.0, 1.0, 2.0]
    for name in node_store.REFERENCES:
        measured.seconds[name] = [0.5] * 4
    summary = node_store.summarize(measured, txs=1_000_000, window=1)
    assert summary["store_total"] == {"first_us_per_tx": 3.0, "last_us_per_tx": 6.0, "all_us_per_tx": 3.75}
    assert summary["raw_total"]["all_us_per_tx"] == 1.0
    assert summary["last_over_first"] == 2.0 and summary["store_over_reference"] == 3.75
    assert [node_store.window_blocks(blocks, 30) for blocks in (1, 3, 8, 100, 150, 1000)] == [1, 1, 2, 25, 30, 30]


def test_the_command_saves_its_document_and_prints_the_settings_read_back_and_a_line_per_statement(
        tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(node_store.tempfile, "tempdir", str(tmp_path))
    out = tmp_path / "bench.json"
    node_store.main(["--blocks", "2", "--txs", "3", "--request-txs", "2", "--statements",
                     "--pragma", "cache_size=-4000", "--out", str(out)])
    lines = capsys.readouterr().out.splitlines()
    assert "cache_size=-4000 (reads -4000)" in lines[0] and lines[-1] == f"saved {out}"
    assert any(line.startswith("  append COMMIT: ") and line.endswith("over the last 1 (2 calls)") for line in lines)
    document = orjson.loads(out.read_bytes())
    assert document["schema"] == "qmemo-store-bench/1" and document["parameters"]["blocks"] == 2
    assert {"cpu_model", "packages", "python"} <= set(document["machine"])
    assert set(document["load_average_1m"]) == {"before", "after"}
    assert len(document["per_block_s"]["append"]) == 2 and "last_over_first" in document["summary"]


def test_a_store_that_fails_is_one_line_and_exit_2(monkeypatch, capsys):
    def fail(*args, **kwargs):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(node_store, "run", fail)
    with pytest.raises(SystemExit) as stopped:
        node_store.main(["--blocks", "1"])
    assert stopped.value.code == 2 and capsys.readouterr().err == "node_store: disk I/O error\n"


@pytest.mark.parametrize(("argv", "message"), [
    (["--blocks", "0"], "must be at least 1"), (["--txs", "0"], "must be at least 1"),
    (["--request-txs", "0"], "must be at least 1"), (["--accounts", "-1"], "--accounts at least 0"),
    (["--pragma", "synchronous=OFF"], "synchronous"),
    (["--pragma", "cache_size=1", "--pragma", "CACHE_SIZE=2"], "one value per setting")])
def test_the_command_refuses_bad_arguments_with_a_line(capsys, argv, message):
    with pytest.raises(SystemExit) as stopped:
        node_store.main(argv)
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err
