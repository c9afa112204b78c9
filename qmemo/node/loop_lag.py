"""Event-loop lag: how late a timer that should fire every `interval_s` actually fires.

A node that blocks its loop (a long block validation, a JSON body parsed in one go)
answers every request late and relays late. The probe sleeps `interval_s`, measures how
much longer the sleep took, and files the excess in a `Distribution` (p50/p99/max of
the last ~minute in /metrics). Cheap: one wakeup every 50 ms.
"""

from __future__ import annotations

import asyncio
import time

from qmemo.node.metrics import Distribution

PROBE_INTERVAL_S = 0.05


async def probe_loop_lag(distribution: Distribution, interval_s: float = PROBE_INTERVAL_S) -> None:
    """Run until cancelled, observing the loop's lag (seconds) every `interval_s`."""
    clock = time.perf_counter
    while True:
        started = clock()
        await asyncio.sleep(interval_s)
        distribution.observe(max(0.0, clock() - started - interval_s))
