"""Key files: round trip, permissions, validation, and secrets kept out of reprs."""

import os

import orjson
import pytest

from qmemo.crypto import get_scheme
from qmemo.crypto.keys import NamedKey, load_keys, save_keys
from qmemo.errors import KeyFileError


@pytest.fixture(scope="module")
def keys():
    return [NamedKey.from_keypair(f"k{i}", get_scheme(name).keypair())
            for i, name in enumerate(["Falcon-512", "ML-DSA-44", "Ed25519"])]


def test_saved_keys_load_back_identical(tmp_path, keys):
    path = tmp_path / "keys.json"
    save_keys(path, keys)
    assert load_keys(path) == keys


def test_key_file_is_private_to_its_owner(tmp_path, keys):
    path = tmp_path / "keys.json"
    save_keys(path, keys)
    assert os.stat(path).st_mode & 0o777 == 0o600


def test_secret_key_is_not_in_the_repr(keys):
    assert keys[0].secret_key.hex()[:32] not in repr(keys[0])
    assert "secret_key" not in repr(keys[0])


def test_missing_file_is_a_key_file_error(tmp_path):
    with pytest.raises(KeyFileError, match="cannot read"):
        load_keys(tmp_path / "absent.json")


def test_wrong_format_is_a_key_file_error(tmp_path):
    path = tmp_path / "k.json"
    path.write_bytes(orjson.dumps({"format": "other", "keys": []}))
    with pytest.raises(KeyFileError, match="format"):
        load_keys(path)


def test_key_of_the_wrong_length_is_a_key_file_error(tmp_path, keys):
    path = tmp_path / "k.json"
    save_keys(path, keys[:1])
    doc = orjson.loads(path.read_bytes())
    doc["keys"][0]["public_key"] = doc["keys"][0]["public_key"][:-2]
    path.write_bytes(orjson.dumps(doc))
    with pytest.raises(KeyFileError, match="896"):
        load_keys(path)


def test_unknown_scheme_in_a_key_file_is_a_key_file_error(tmp_path, keys):
    path = tmp_path / "k.json"
    save_keys(path, keys[:1])
    doc = orjson.loads(path.read_bytes())
    doc["keys"][0]["scheme"] = "RSA-2048"
    path.write_bytes(orjson.dumps(doc))
    with pytest.raises(KeyFileError, match="RSA-2048"):
        load_keys(path)
