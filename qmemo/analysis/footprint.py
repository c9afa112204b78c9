"""On-chain footprint: what a signature scheme costs in bytes per transaction, per block, per year.

A transaction on chain is its body (MEMO: 256 bytes) plus its signature plus, unless
public keys are registered once per account, the signer's public key. Falcon's
(unpadded) signatures vary in length, so every figure comes at the measured mean
(what storage grows by on average) and at the measured maximum (what a block must be
able to hold).

Units are SI throughout, because the reports this project grew from mixed them up
(KiB called KB, MiB pushed through decimal Mbps): kB = 1,000 bytes, MB = 10^6, GB = 10^9,
and a link of 1 Mbps moves 10^6 bits per second. Propagation time is the serialisation
time of one block over one link: no latency, no relay hops, no compression.

Pure arithmetic: sizes come in as arguments (measured, from result files); nothing here
reads a file or holds a measured number.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from qmemo.analysis.memo import TX_BODY_BYTES, TX_PER_BLOCK
from qmemo.errors import ConfigError

BITS_PER_BYTE = 8
ANNUAL_TX_COUNTS = (1_000_000, 10_000_000, 100_000_000, 1_000_000_000)  # the growth table's annual volumes
BANDWIDTHS_MBPS = (10, 50, 100)                                         # the propagation table's link rates
REGISTRY_ACCOUNTS = 1_000_000  # the registry cost is shown per million accounts


@dataclass(frozen=True, slots=True)
class SchemeSizes:
    """The sizes one scheme puts on chain, as measured, and the file they came from."""

    scheme: str
    public_key_bytes: int
    signature_mean_bytes: float
    signature_max_bytes: int
    source: str
    max_is_declared: bool = False   # no length distribution measured: the library's maximum


@dataclass(frozen=True, slots=True)
class Footprint:
    """One scheme's footprint under one set of chain parameters (see `footprint`)."""

    sizes: SchemeSizes
    body_bytes: int
    tx_per_block: int
    auth_mean_bytes: float        # signature + public key, mean signature
    auth_max_bytes: int           # signature + public key, longest signature
    tx_mean_bytes: float          # body + signature + public key
    tx_max_bytes: int
    auth_share: float             # share of a transaction that is authentication data
    block_mean_bytes: float
    block_max_bytes: int
    tx_registered_mean_bytes: float  # body + signature: the key registered once per account


def _non_negative(**values: float) -> None:
    for name, value in values.items():
        if value < 0:
            raise ConfigError(f"{name} must not be negative, got {value}")


def tx_bytes(body_bytes: float, signature_bytes: float, public_key_bytes: float,
             key_in_tx: bool = True) -> float:
    """Bytes of one transaction on chain; without the public key when keys are registered."""
    _non_negative(body_bytes=body_bytes, signature_bytes=signature_bytes, public_key_bytes=public_key_bytes)
    return body_bytes + signature_bytes + (public_key_bytes if key_in_tx else 0)


def block_bytes(tx_per_block: int, tx_size_bytes: float) -> float:
    """Transaction bytes in a block (header and Merkle data are a few hundred bytes: left out)."""
    _non_negative(tx_per_block=tx_per_block, tx_size_bytes=tx_size_bytes)
    return tx_per_block * tx_size_bytes


def chain_growth_bytes(tx_count: int, tx_size_bytes: float) -> float:
    """Bytes the chain grows by over `tx_count` transactions."""
    _non_negative(tx_count=tx_count, tx_size_bytes=tx_size_bytes)
    return tx_count * tx_size_bytes


def propagation_time_s(size_bytes: float, bandwidth_mbps: float) -> float:
    """Seconds to push `size_bytes` through one link of `bandwidth_mbps` (10^6 bit/s)."""
    if not bandwidth_mbps > 0:
        raise ConfigError(f"bandwidth must be positive, got {bandwidth_mbps} Mbps")
    _non_negative(size_bytes=size_bytes)
    return size_bytes * BITS_PER_BYTE / (bandwidth_mbps * 1e6)


def registration_saving_bytes(tx_count: int, accounts: int, public_key_bytes: int) -> float:
    """Net bytes saved by registering each account's key once instead of carrying it per
    transaction: every transaction drops its key, every account stores it once.
    Negative when there are fewer transactions than accounts."""
    _non_negative(tx_count=tx_count, accounts=accounts, public_key_bytes=public_key_bytes)
    return (tx_count - accounts) * public_key_bytes


def footprint(sizes: SchemeSizes, body_bytes: int = TX_BODY_BYTES,
              tx_per_block: int = TX_PER_BLOCK) -> Footprint:
    pk = sizes.public_key_bytes
    tx_mean = tx_bytes(body_bytes, sizes.signature_mean_bytes, pk)
    tx_max = tx_bytes(body_bytes, sizes.signature_max_bytes, pk)
    return Footprint(
        sizes=sizes,
        body_bytes=body_bytes,
        tx_per_block=tx_per_block,
        auth_mean_bytes=sizes.signature_mean_bytes + pk,
        auth_max_bytes=sizes.signature_max_bytes + pk,
        tx_mean_bytes=tx_mean,
        tx_max_bytes=int(tx_max),
        auth_share=(sizes.signature_mean_bytes + pk) / tx_mean,
        block_mean_bytes=block_bytes(tx_per_block, tx_mean),
        block_max_bytes=int(block_bytes(tx_per_block, tx_max)),
        tx_registered_mean_bytes=tx_bytes(body_bytes, sizes.signature_mean_bytes, pk, key_in_tx=False),
    )


def footprints(all_sizes: Sequence[SchemeSizes], body_bytes: int = TX_BODY_BYTES,
               tx_per_block: int = TX_PER_BLOCK) -> list[Footprint]:
    return [footprint(s, body_bytes, tx_per_block) for s in all_sizes]
