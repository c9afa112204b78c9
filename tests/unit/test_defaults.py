"""Each default is written once (qmemo.core.defaults) and every reader takes it from there:
the commands, the devnet files, the scenario manifest, the node's settings and devnet.sh."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from qmemo.commands import genesis as genesis_command
from qmemo.commands import soak as soak_command
from qmemo.core.defaults import CHAIN, DEVNET, POOL, shell_assignments
from qmemo.core.mempool import MempoolLimits
from qmemo.core.pool import HeldLimits
from qmemo.devnet.files import DevnetSpec
from qmemo.node.config import NodeConfig
from qmemo.node.ledger import PoolLimits
from qmemo.scenario.manifest import _parse_chain

ROOT = Path(__file__).resolve().parents[2]


def _defaults(register) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    register(parser)
    return parser.parse_args(["--out", "x", *(["--rate", "1"] if register is soak_command.register else [])])


def test_genesis_command_and_devnet_spec_take_the_chain_defaults() -> None:
    args = _defaults(genesis_command.register)
    spec = DevnetSpec(out=Path("x"))
    for values in (args, spec):
        assert (values.validators, values.accounts, values.scheme, values.chain_id, values.balance) == \
            (CHAIN.validators, CHAIN.accounts, CHAIN.scheme, CHAIN.chain_id, CHAIN.balance)
        assert (values.block_interval_ms, values.max_clock_drift_ms, values.max_block_transactions, values.min_fee) == \
            (CHAIN.block_interval_ms, CHAIN.max_clock_drift_ms, CHAIN.max_block_transactions, CHAIN.min_fee)


def test_soak_and_the_scenario_manifest_take_the_chain_defaults() -> None:
    args = _defaults(soak_command.register)
    assert (args.validators, args.accounts, args.block_interval_ms, args.block_txs) == \
        (CHAIN.validators, CHAIN.accounts, CHAIN.block_interval_ms, CHAIN.max_block_transactions)
    chain = _parse_chain({})
    assert (chain.scheme, chain.accounts, chain.block_interval_ms, chain.max_block_transactions) == \
        (CHAIN.scheme, DEVNET.accounts, CHAIN.block_interval_ms, CHAIN.max_block_transactions)


def test_the_clock_drift_of_a_short_interval_stays_under_half_of_it() -> None:
    assert CHAIN.clock_drift_ms(2000) == CHAIN.max_clock_drift_ms
    assert CHAIN.clock_drift_ms(500) == 250


def test_node_settings_and_both_pools_take_the_pool_defaults() -> None:
    config = NodeConfig(genesis=Path("g"), key=Path("k"), data=Path("d"))
    assert (config.mempool_max_txs, config.mempool_max_bytes, config.mempool_max_per_sender) == \
        (POOL.max_txs, POOL.max_bytes, POOL.max_per_sender)
    assert (config.mempool_held_window, config.mempool_held_max_txs, config.mempool_held_per_sender,
            config.mempool_held_ttl_s) == (POOL.held_window, POOL.held_max_txs, POOL.held_per_sender, POOL.held_ttl_s)
    assert PoolLimits() == PoolLimits(POOL.max_txs, POOL.max_bytes, POOL.max_per_sender, POOL.held_window,
                                      POOL.held_max_txs, POOL.held_per_sender, POOL.held_ttl_s)
    assert MempoolLimits() == MempoolLimits(POOL.max_txs, POOL.max_bytes, POOL.max_per_sender)
    assert HeldLimits() == HeldLimits(POOL.held_window, POOL.held_max_txs, POOL.held_per_sender, POOL.held_ttl_s)


def test_devnet_sh_reads_its_defaults_from_python_without_the_environment() -> None:
    """The module runs on the bare interpreter (devnet.sh calls it before setup.sh), and
    devnet.sh's help shows the values it printed."""
    printed = subprocess.run([sys.executable, "-I", "-S", str(ROOT / "qmemo/core/defaults.py")], capture_output=True,
                             text=True, check=True, cwd="/").stdout
    assert printed == shell_assignments()
    assert f"DEFAULT_BLOCK_TXS={CHAIN.max_block_transactions}\n" in printed
    help_text = subprocess.run(["bash", str(ROOT / "devnet.sh"), "--help"], capture_output=True, text=True,
                               check=True).stdout
    assert f"(default {CHAIN.max_block_transactions}, MEMO's;" in help_text
    assert f"funded accounts in a new devnet (default {DEVNET.accounts})" in help_text
    assert f"number of nodes/validators (per shard; default {CHAIN.validators})" in help_text
