"""`qmemo genesis`: a devnet's genesis file and keys, consistent with each other."""

from __future__ import annotations

import stat

from qmemo.cli import main
from qmemo.core.transaction import derive_address
from qmemo.crypto.keys import load_keys
from qmemo.node.store import load_genesis


def test_genesis_command_writes_a_loadable_devnet(tmp_path, capsys):
    out = tmp_path / "devnet"
    assert main(["genesis", "--out", str(out), "--validators", "3", "--accounts", "4", "--chain-id", "9",
                 "--balance", "500", "--genesis-time-ms", "1000"]) == 0
    genesis = load_genesis(out / "genesis.json")
    assert (genesis.chain_id, genesis.genesis_time_ms, genesis.block_interval_ms) == (9, 1000, 2000)
    assert genesis.producer_timeout_ms == 2000 and genesis.max_block_transactions == 4000
    validators = [load_keys(out / f"validator-{i}.keys.json") for i in range(3)]
    assert [v.public_key for v in genesis.validators] == [keys[0].public_key for keys in validators]
    assert [v.name for v in genesis.validators] == ["validator-0", "validator-1", "validator-2"]
    accounts = load_keys(out / "accounts.keys.json")
    assert [derive_address(1, key.public_key) for key in accounts] == [a for a, _ in genesis.balances]
    assert {balance for _, balance in genesis.balances} == {500}
    assert {key.scheme for key in accounts} == {"Falcon-512"} and genesis.tx_scheme_ids == (1,)
    assert stat.S_IMODE((out / "accounts.keys.json").stat().st_mode) == 0o600
    assert "3 Falcon-512 validators, 4 Falcon-512 accounts" in capsys.readouterr().out


def test_genesis_command_mixes_schemes(tmp_path):
    out = tmp_path / "devnet"
    assert main(["genesis", "--out", str(out), "--validators", "1", "--accounts", "2", "--scheme", "ed25519",
                 "--validator-scheme", "Falcon-512", "--tx-schemes", "Ed25519,ML-DSA-44"]) == 0
    genesis = load_genesis(out / "genesis.json")
    assert genesis.validators[0].scheme_id == 1 and genesis.tx_scheme_ids == (100, 10)


def test_genesis_command_keeps_an_existing_devnet_unless_forced(tmp_path, capsys):
    out = tmp_path / "devnet"
    args = ["genesis", "--out", str(out), "--validators", "1", "--accounts", "1", "--scheme", "Ed25519"]
    assert main(args) == 0
    before = (out / "genesis.json").read_bytes()
    assert main(args) == 1
    assert "--force" in capsys.readouterr().err
    assert (out / "genesis.json").read_bytes() == before
    assert main(args + ["--force"]) == 0


def test_genesis_command_refuses_an_account_scheme_transactions_may_not_use(tmp_path):
    assert main(["genesis", "--out", str(tmp_path), "--accounts", "1", "--scheme", "Ed25519",
                 "--tx-schemes", "Falcon-512"]) == 1
    assert not (tmp_path / "genesis.json").exists()
