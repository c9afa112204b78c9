"""`qmemo genesis`: a devnet's genesis file and keys, consistent with each other."""

from __future__ import annotations

import stat

from qmemo.cli import main
from qmemo.core.transaction import derive_address
from qmemo.crypto.keys import load_keys
from qmemo.crypto.verifier import load_genesis


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


def test_create_devnet_reports_every_key_as_it_is_made(tmp_path):
    from qmemo.devnet.files import DevnetSpec, create_devnet

    seen: list[tuple[int, int]] = []
    create_devnet(DevnetSpec(out=tmp_path, validators=2, accounts=5, scheme="Ed25519"),
                  on_keys=lambda done, total: seen.append((done, total)))
    assert seen == [(n, 7) for n in range(8)]


def _genesis_output(tmp_path, *, terminal: bool) -> str:
    """`qmemo genesis` in a child process, its stdout a pseudo-terminal or a pipe."""
    import os
    import subprocess
    import sys

    argv = [sys.executable, "-m", "qmemo.cli", "genesis", "--out", str(tmp_path / "devnet"), "--validators", "1",
            "--accounts", "40", "--scheme", "Ed25519"]
    env = {**os.environ, "COLUMNS": "100", "TERM": "xterm"}
    if not terminal:
        return subprocess.run(argv, capture_output=True, check=True, timeout=60, env=env).stdout.decode()
    leader, follower = os.openpty()
    with subprocess.Popen(argv, stdout=follower, stderr=subprocess.STDOUT, env=env) as child:
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:          # EIO: the child closed its end
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert child.wait(timeout=60) == 0
    os.close(leader)
    return b"".join(chunks).decode()


def test_genesis_shows_a_live_key_count_on_a_terminal_and_one_line_elsewhere(tmp_path):
    shown = _genesis_output(tmp_path / "tty", terminal=True)
    assert "generating Ed25519 keys" in shown and "41/41" in shown
    # the bar is wiped (transient): the last line is the closing one, after the erase
    assert shown.rstrip().splitlines()[-1].removeprefix("\x1b[1A\x1b[2K").startswith("devnet in ")
    logged = _genesis_output(tmp_path / "pipe", terminal=False)
    assert len(logged.splitlines()) == 1 and logged.startswith("devnet in ") and "generating" not in logged
