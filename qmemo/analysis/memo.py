"""MEMO's requirements: the chain parameters every qMEMO report is measured against.

These are requirements, not measurements. They come from the MEMO design as the
original research reports state it (../shared/reference/README.md):
2 s blocks, 10,000 TPS over 4 shards (conservative), 50,700 TPS over 256 shards
(target), 20% cross-shard transactions, 4,000-transaction blocks and 256-byte
transaction bodies. No measured number may ever live in this module.
"""

from __future__ import annotations

BLOCK_INTERVAL_S = 2.0          # MEMO's block interval
CONSERVATIVE_TPS = 10_000       # MEMO's conservative throughput...
CONSERVATIVE_SHARDS = 4         # ...over 4 shards: 2,500 verifications/s per shard
TARGET_TPS = 50_700             # MEMO's target throughput...
TARGET_SHARDS = 256             # ...over 256 shards: ~198 verifications/s per shard
CROSS_SHARD_SHARE = 0.20        # MEMO's assumed share of cross-shard transactions
CROSS_SHARD_SWEEP = (0.0, 0.20, 0.50, 0.80)  # the cross-shard shares the reports show
TX_PER_BLOCK = 4_000            # MEMO's block size in transactions
TX_BODY_BYTES = 256             # a transaction without its signature and public key

# Where the research models the conservative scenario's verify load with 20% cross-shard
# traffic (qmemo.analysis.headroom's required_verify_rate computes the same figure from the
# parameters above): the figure a sharded run's first screen is set against.
CONSERVATIVE_MODEL_SOURCE = ('the research\'s table 14, "MEMO Throughput Requirements vs Falcon-512 Capacity", '
                             'row "Conservative + 20% cross-shard" (../shared/reference/000_e860b85b1fa44f42.txt; '
                             'also 001_67731cf559c402a5.txt, "With Cross-Shard Overhead")')
