"""The node's configuration: a TOML or JSON file, flags on top, refusals that name the problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from qmemo.errors import ConfigError
from qmemo.node.config import load_config

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


def test_json_config_file_is_read_too(tmp_path: Path):
    file = tmp_path / "node.json"
    file.write_text('{"genesis": "g.json", "key": "k.json", "data": "d", "finality_depth": 5}')
    assert load_config(file, {}).finality_depth == 5


@pytest.mark.parametrize("settings, message", [
    ({"genesis": "g.json"}, "required: data, key"),
    ({**REQUIRED, "no_such_setting": 1}, "unknown node setting(s): no_such_setting"),
    ({**REQUIRED, "verify_threads": -1}, "verify_threads must be 0 (verify on the event loop) or more"),
    ({**REQUIRED, "port": 70000}, "is not a TCP port"),
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
