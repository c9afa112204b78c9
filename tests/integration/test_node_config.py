"""The node's configuration: a TOML or JSON file, flags on top, refusals that name the problem."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from qmemo.errors import ConfigError
from qmemo.node.config import SETTING, NodeConfig, file_settings, load_config
from tests.conftest import VENV_BIN, run_command

REQUIRED = {"genesis": "g.json", "key": "k.json", "data": "d"}


def test_file_settings_apply_and_flags_override_them(tmp_path: Path):
    file = tmp_path / "node.toml"
    file.write_text('genesis = "devnet/genesis.json"\nkey = "devnet/validator-0.keys.json"\ndata = "data"\n'
                    'port = 8100\npeers = "http://127.0.0.1:8101/, http://127.0.0.1:8102"\n'
                    'verify-threads = 3\nmempool_max_txs = 10\n')
    config = load_config(file, {"port": 9000, "host": None})
    assert config.port == 9000                               # the flag wins
    assert config.host == "127.0.0.1"                        # an unset flag leaves the default
    assert config.verify_threads == 3 and config.mempool_max_txs == 10
    assert config.peers == ("http://127.0.0.1:8101", "http://127.0.0.1:8102")
    assert config.genesis == Path("devnet/genesis.json") and config.url == "http://127.0.0.1:9000"


def test_a_node_bound_to_every_interface_advertises_the_url_its_peers_reach(tmp_path: Path):
    bound = load_config(None, {**REQUIRED, "host": "0.0.0.0", "port": 8000})
    assert bound.url == "http://0.0.0.0:8000"                # no advertise: the bind address, as before
    advertised = load_config(None, {**REQUIRED, "host": "0.0.0.0", "advertise": "http://203.0.113.7:8000/"})
    assert advertised.url == "http://203.0.113.7:8000" and advertised.host == "0.0.0.0"


def test_json_config_file_is_read_too(tmp_path: Path):
    file = tmp_path / "node.json"
    file.write_text('{"genesis": "g.json", "key": "k.json", "data": "d", "finality_depth": 5}')
    assert load_config(file, {}).finality_depth == 5


@pytest.mark.parametrize("settings, message", [
    ({"genesis": "g.json"}, "required: data, key"),
    ({**REQUIRED, "no_such_setting": 1}, "unknown node setting(s): no_such_setting"),
    ({**REQUIRED, "verify_threads": -1}, "verify_threads must be 0 (verify on the event loop) or more"),
    ({**REQUIRED, "port": 70000}, "port must be a TCP port, a whole number from 0 to 65535, got 70000"),
    ({**REQUIRED, "peers": "https://127.0.0.1:8001"}, "peers must be base URLs of the form http://host:port"),
    ({**REQUIRED, "peers": "127.0.0.1:8001"}, "peers must be base URLs of the form http://host:port"),
    ({**REQUIRED, "shard_peers": ["http://h:8001/prefix"]}, "shard_peers must be base URLs of the form http://host:port"),
])
def test_unusable_settings_are_refused_by_name(settings, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_config(None, settings)


def test_unreadable_config_file_is_a_config_error(tmp_path: Path):
    bad = tmp_path / "bad.toml"
    bad.write_text("port = = 1")
    with pytest.raises(ConfigError, match="does not parse"):
        load_config(bad, {})
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.toml", {})


# --- typed settings: a file's wrong type, unknown key or out-of-range value is one line -----------

FILE_HEAD = 'genesis = "g.json"\nkey = "k.json"\ndata = "d"\n'


@pytest.mark.parametrize("line, message", [
    ('port = "8001"', 'port must be a TCP port, a whole number from 0 to 65535, got "8001" (a string)'),
    ("port = 8000.5", "port must be a TCP port, a whole number from 0 to 65535, got 8000.5"),
    ('max_batch_txs = "1000"', 'max_batch_txs must be a whole number >= 1, got "1000" (a string)'),
    ("max_batch_txs = 0", "max_batch_txs must be a whole number >= 1, got 0"),
    ("verify_threads = true", "verify_threads must be 0 (verify on the event loop) or more, got true (a boolean)"),
    ("mempool_held_ttl_s = 0", "mempool_held_ttl_s must be a number above 0, got 0"),
    ("sync_interval_s = nan", "sync_interval_s must be a number above 0, got nan"),
    ("relay_flush_s = -0.1", "relay_flush_s must be a number >= 0, got -0.1"),
    ("finality_depth = -1", "finality_depth must be a whole number >= 0, got -1"),
    ('log_level = "LOUD"', 'log_level must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL, got "LOUD" (a string)'),
    ('log_format = "xml"', 'log_format must be one of text, json, got "xml" (a string)'),
    ("host = 127", "host must be a string, got 127"),
    ("peers = 5", "peers must be a list of strings (or one comma-separated string), got 5"),
    ('peers = ["http://127.0.0.1:8001", 2]',
     'peers must be a list of strings (or one comma-separated string), got ["http://127.0.0.1:8001",2] (a list)'),
    ("genesis = 1", "genesis must be a file or folder path (a string), got 1"),
    ("no_such_setting = 1", "unknown node setting(s): no_such_setting"),
])
def test_a_bad_setting_in_a_file_is_one_line_naming_the_file_key_and_value(tmp_path: Path, line, message):
    file = tmp_path / "node.toml"
    head = FILE_HEAD if not line.startswith("genesis") else 'key = "k.json"\ndata = "d"\n'
    file.write_text(head + line + "\n")
    with pytest.raises(ConfigError) as refused:
        load_config(file, {})
    assert str(refused.value).startswith(f"{file}: ")
    assert message in str(refused.value)
    assert "\n" not in str(refused.value)


def test_a_flag_overriding_a_bad_file_value_is_not_refused(tmp_path: Path):
    file = tmp_path / "node.toml"
    file.write_text(FILE_HEAD + 'port = "8001"\n')
    assert load_config(file, {"port": 8001}).port == 8001


def test_values_are_converted_to_the_field_type(tmp_path: Path):
    file = tmp_path / "node.json"
    file.write_text('{"genesis": "g.json", "key": "k.json", "data": "d", "peer_timeout_s": 3, '
                    '"peers": ["http://a:1/"], "log_level": "debug", "name": null, '
                    '"log_format": "JSON"}')
    config = load_config(file, {})
    assert config.peer_timeout_s == 3.0 and isinstance(config.peer_timeout_s, float)
    assert config.peers == ("http://a:1",) and config.log_level == "DEBUG" and config.name is None
    assert config.log_format == "json"  # choices are case-insensitive, kept in their documented spelling
    assert isinstance(config.genesis, Path)


def test_the_cli_refuses_a_bad_file_in_one_line_without_a_traceback(tmp_path: Path):
    file = tmp_path / "node.toml"
    file.write_text(FILE_HEAD + 'port = "8001"\n')
    result = run_command([str(VENV_BIN / "qmemo"), "node", "--config", str(file)], timeout=60)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "port must be" in lines[0] and '"8001"' in lines[0]


def test_printed_defaults_load_back_as_the_defaults(tmp_path: Path):
    result = run_command([str(VENV_BIN / "qmemo"), "node", "--print-config"], timeout=60)
    assert result.returncode == 0, result.stderr
    file = tmp_path / "node.toml"
    file.write_text(result.stdout)
    expected = NodeConfig(genesis=Path("devnet/genesis.json"), key=Path("devnet/validator-0.keys.json"),
                          data=Path("devnet/data/node-0"))
    assert load_config(file, {}) == expected
    for name in file_settings():  # every setting is in the file, set or (machine-dependent) commented
        assert f"\n{name} = " in result.stdout or f"\n# {name} = " in result.stdout


def test_every_setting_type_has_a_check_and_its_default_passes_it():
    """A new field either gets a checked type or stays out of files (no SETTING metadata)."""
    required = {"genesis": "g.json", "key": "k.json", "data": "d"}
    for name, field_ in file_settings().items():
        assert field_.metadata[SETTING].help, f"{name} has no help line for --print-config"
        if name in required:
            continue
        default = field_.default_factory() if field_.default is dataclasses.MISSING else field_.default
        assert getattr(load_config(None, {**required, name: default}), name) == default
