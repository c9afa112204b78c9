"""The defaults of a new chain, a devnet and a node's pool, and devnet.sh's named runs: each written here once.

`qmemo genesis`, `qmemo soak`, qmemo.devnet.files (and so `qmemo bench node`), the scenario
manifest, devnet.sh, the node's settings (qmemo.node.config) and the reference pool
(qmemo.core.mempool, qmemo.core.pool) take their defaults from these three objects, so a
default is changed here and nowhere else. `./devnet.sh --scenario NAME` starts one of
DEVNET_SCENARIOS, its figures read from here (`--scenario NAME`), and any flag given
beside it wins.

Only the standard library, and nothing from qmemo: devnet.sh reads the values before
the project's environment exists (`python3 qmemo/core/defaults.py`, the shell
assignments `shell_assignments` prints; `--scenario NAME` and `--list-scenarios`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ChainDefaults:
    """A new chain's genesis when no flag or manifest key says otherwise."""

    chain_id: int = 1
    validators: int = 3
    accounts: int = 1000                # `qmemo genesis` and `qmemo soak`; a devnet's own: DevnetDefaults
    balance: int = 10**12               # each funded account's
    scheme: str = "Falcon-512"          # the accounts', the validators' and the one transaction scheme
    block_interval_ms: int = 2000       # MEMO's
    max_clock_drift_ms: int = 500
    max_block_transactions: int = 4000  # MEMO's; with 2 s blocks the chain carries at most 2,000 TPS
    # The smallest positive fee. Any fee above zero means a key nobody funded can send
    # nothing at all (not even to the held queue), and every transaction costs its sender
    # something; 1 is what the load generator pays.
    min_fee: int = 1

    def clock_drift_ms(self, block_interval_ms: int) -> int:
        """The clock drift a devnet with this interval allows: the default, but below half
        the interval, since it must stay under a producer's turn (the producer timeout)."""
        return min(self.max_clock_drift_ms, block_interval_ms // 2)


@dataclass(frozen=True, slots=True)
class DevnetDefaults:
    """What devnet.sh and a scenario manifest start when not told otherwise."""

    accounts: int = 1200    # funded accounts (the bare `qmemo genesis` makes ChainDefaults.accounts)


@dataclass(frozen=True, slots=True)
class PoolDefaults:
    """A node's pool caps (qmemo.node.config's mempool_* settings, and the reference pool's)."""

    max_txs: int = 50_000                  # pending transactions: 12 full 4,000-transaction blocks
    max_bytes: int = 128 * 1024 * 1024     # their bytes: ~70,000 Falcon-512 transactions of 1.9 KB
    max_per_sender: int = 256              # pending per sender
    held_window: int = 64                  # nonces a sender may send past its next pending one
    held_max_txs: int = 20_000             # held transactions, all senders together
    held_per_sender: int = 64              # held per sender
    held_ttl_s: float = 30.0               # how long a held transaction waits for its gap


@dataclass(frozen=True, slots=True)
class DevnetScenario:
    """A named devnet run: `./devnet.sh --scenario NAME` starts these settings, and a flag
    given beside the name (before it or after) replaces that one setting."""

    name: str
    about: str              # one line for --list-scenarios and the docs
    shards: int
    validators: int         # per shard
    cross_shard_pct: float
    tps: float              # offered, over all shards
    duration_s: int

    def shell_assignments(self) -> str:
        """The settings as devnet.sh's variables (NAME=value lines), which its flags then override."""
        values = {"SHARDS": self.shards, "NODES": self.validators, "CROSS_SHARD": _plain(self.cross_shard_pct),
                  "TPS": _plain(self.tps), "DURATION": self.duration_s}
        return "".join(f"{name}={value}\n" for name, value in values.items())

    def line(self) -> str:
        return (f"{self.name}: {self.shards} shards x {self.validators} validators, {self.cross_shard_pct:g}% "
                f"cross-shard, {self.tps:,.0f} TPS offered for {self.duration_s} s - {self.about}")


def _plain(value: float) -> str:
    """A number as devnet.sh's flags take it: 10000 and 12.5, never 1e+04."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


# MEMO's conservative scenario as the research states it (../shared/reference/000_e860b85b1fa44f42.txt,
# table 14, "Conservative + 20% cross-shard"; qmemo.analysis.memo holds the same requirement,
# and tests/unit/test_devnet_scenarios.py holds the two together).
DEVNET_SCENARIOS = (
    DevnetScenario("memo-conservative", "MEMO's conservative scenario, modelled at 3,000 verifies/s per shard",
                   shards=4, validators=3, cross_shard_pct=20, tps=10_000, duration_s=60),
)


class UnknownScenario(LookupError):
    """A scenario name DEVNET_SCENARIOS does not hold; its message lists the names it does."""


def scenario(name: str) -> DevnetScenario:
    for candidate in DEVNET_SCENARIOS:
        if candidate.name == name:
            return candidate
    raise UnknownScenario(f"unknown scenario '{name}'; the scenarios: "
                          + ", ".join(s.name for s in DEVNET_SCENARIOS) + " (--list-scenarios)")


CHAIN = ChainDefaults()
DEVNET = DevnetDefaults()
POOL = PoolDefaults()


def shell_assignments() -> str:
    """devnet.sh's defaults as `NAME=value` lines (its variable names)."""
    values = {"NODES": CHAIN.validators, "SCHEME": CHAIN.scheme, "ACCOUNTS": DEVNET.accounts,
              "BLOCK_TXS": CHAIN.max_block_transactions, "BLOCK_MS": CHAIN.block_interval_ms,
              "MAX_CLOCK_DRIFT_MS": CHAIN.max_clock_drift_ms}
    return "".join(f"DEFAULT_{name}={value}\n" for name, value in values.items())


def main(argv: list[str]) -> int:
    """devnet.sh's three questions: the defaults (no argument), a scenario's settings
    (`--scenario NAME`; exit 2 with one line naming the scenarios for an unknown one) and
    the scenarios, one a line (`--list-scenarios`)."""
    if argv[:1] == ["--scenario"] and len(argv) == 2:
        try:
            sys.stdout.write(scenario(argv[1]).shell_assignments())
        except UnknownScenario as exc:
            sys.stderr.write(f"{exc.args[0]}\n")
            return 2
    elif argv == ["--list-scenarios"]:
        sys.stdout.write("".join(f"{s.line()}\n" for s in DEVNET_SCENARIOS))
    elif not argv:
        sys.stdout.write(shell_assignments())
    else:
        sys.stderr.write("usage: defaults.py [--scenario NAME | --list-scenarios]\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
