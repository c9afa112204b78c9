"""The footprint model against hand-computed cases (the arithmetic is in each comment).

The sizes here are round synthetic numbers, chosen so the arithmetic is easy to check,
not any scheme's real sizes.
"""

from __future__ import annotations

import pytest

from qmemo.analysis.footprint import (
    SchemeSizes,
    block_bytes,
    chain_growth_bytes,
    footprint,
    propagation_time_s,
    registration_saving_bytes,
    tx_bytes,
)
from qmemo.errors import ConfigError

SIZES = SchemeSizes("synthetic", public_key_bytes=1_000, signature_mean_bytes=600.0,
                    signature_max_bytes=700, source="fixture.json")


def test_tx_carries_body_signature_and_key():
    # 256 + 600 + 1,000 = 1,856
    assert tx_bytes(256, 600, 1_000) == 1_856


def test_registered_key_leaves_the_key_out_of_the_tx():
    # 256 + 600 = 856
    assert tx_bytes(256, 600, 1_000, key_in_tx=False) == 856


def test_block_is_tx_count_times_tx_size():
    # 4,000 x 1,856 = 7,424,000 bytes
    assert block_bytes(4_000, 1_856) == 7_424_000


@pytest.mark.parametrize("count, expected", [
    (1_000_000, 1_856_000_000),          # 1.856 GB
    (1_000_000_000, 1_856_000_000_000),  # 1,856 GB
])
def test_chain_growth_is_count_times_tx_size(count, expected):
    assert chain_growth_bytes(count, 1_856) == expected


@pytest.mark.parametrize("mbps, expected_s", [
    (10, 5.9392),    # 7,424,000 B x 8 = 59,392,000 bit / 10,000,000 bit/s
    (50, 1.18784),   # 59,392,000 / 50,000,000
    (100, 0.59392),  # 59,392,000 / 100,000,000
])
def test_propagation_time_is_bits_over_bandwidth(mbps, expected_s):
    assert propagation_time_s(7_424_000, mbps) == pytest.approx(expected_s)


def test_propagation_refuses_zero_bandwidth():
    with pytest.raises(ConfigError):
        propagation_time_s(1_000, 0)


def test_registration_saving_is_keys_dropped_minus_keys_registered():
    # (1,000,000,000 tx - 1,000,000 accounts) x 1,000 B = 999,000,000,000 B
    assert registration_saving_bytes(1_000_000_000, 1_000_000, 1_000) == 999_000_000_000
    # fewer transactions than accounts: registering costs more than it saves
    assert registration_saving_bytes(10, 20, 1_000) == -10_000


def test_negative_sizes_are_refused():
    with pytest.raises(ConfigError):
        tx_bytes(256, -1, 1_000)
    with pytest.raises(ConfigError):
        chain_growth_bytes(-5, 1_856)


def test_footprint_at_memo_defaults():
    fp = footprint(SIZES)
    assert fp.body_bytes == 256 and fp.tx_per_block == 4_000
    assert fp.auth_mean_bytes == 1_600            # 600 + 1,000
    assert fp.auth_max_bytes == 1_700             # 700 + 1,000
    assert fp.tx_mean_bytes == 1_856              # 256 + 1,600
    assert fp.tx_max_bytes == 1_956               # 256 + 1,700
    assert fp.auth_share == pytest.approx(1_600 / 1_856)
    assert fp.block_mean_bytes == 7_424_000       # 4,000 x 1,856
    assert fp.block_max_bytes == 7_824_000        # 4,000 x 1,956
    assert fp.tx_registered_mean_bytes == 856     # 256 + 600


def test_footprint_takes_other_chain_parameters():
    fp = footprint(SIZES, body_bytes=100, tx_per_block=10)
    # 10 x (100 + 600 + 1,000) = 17,000
    assert fp.block_mean_bytes == 17_000
