"""The node service: admission, verification pool, producer loop, sync, and storage.

Knows nothing of HTTP (that is qmemo.net). Builds on the pure chain core (qmemo.core);
`store.py` keeps the chain in SQLite.
"""
