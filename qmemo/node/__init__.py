"""The node service, one room per job: `service` (lifecycle and the public API),
`admission`, `intake` (blocks; the chain lock), `producer`, `sync`, `peers` (relay),
`persistence` (flusher, clean-stop files), `reporting` (status and metrics values),
`queries` (transaction status with its proof, block reads),
`store` (SQLite), `chain` (undoable recent blocks, fork choice), `verify_pool`; a shard's
node also `receipts` (the receipts it pools and checks) and `receipt_transport` (the
bundles it serves, the pulls from the other shards).

Knows nothing of HTTP (that is qmemo.net). Builds on the pure chain core (qmemo.core).
"""
