"""The chain core: pure rules and data of the qMEMO test chain (docs/protocol.md).

- `hashing`       blake3_512 and its named domains: every digest of the chain
- `transaction`   Transaction: fields, canonical encoding, JSON form, digests, address
- `merkle`        merkle_root, merkle_proof, verify_proof (BLAKE3-512, padded, count committed)
- `block`         BlockHeader, Block, make_block
- `genesis`       genesis_from_json, parse_genesis -> Genesis; the producer schedule and its fallback order
- `state`         Account, ChainState, apply_block (the state transition), the transaction rules
- `verify_cache`  SignatureVerifier (the interface) and VerifyCache (verified once, not twice)
- `mempool`       Mempool: admission rules, selection, eviction after a block
- `scheme_rules`  SchemeTable and SchemeRules: the schemes' ids, sizes and the one signature-length rule
- `codec`         strict JSON field readers and integer limits
- `finality`      quorum, final_height: a block is final once a majority of validators built on it
- `shards`        shard_of, the sharded genesis (qmemo-genesis/2): every shard's view and the map of all
- `receipts`      cross-shard receipts: bundles, ids, every receipt rule, a block's receipts section

Nothing here does I/O, reads a clock, draws randomness or imports a signature library:
time, keys, verifiers and scheme sizes come in as arguments. The node (qmemo.node)
supplies them; the store is qmemo/node/store.py. tests/unit/test_core_purity.py imports
each module in a fresh interpreter and checks what that loads, not only each file's imports.
"""
