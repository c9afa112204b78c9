"""The node's clock: chain time in milliseconds since the Unix epoch, as an input.

Block timestamps, the producer's turns, the "not from the future" check and the tip's
age all read `NodeConfig.clock`, never the wall clock themselves (consensus-specs passes
the slot in the same way): a test hands a node a clock it drives, and need not sleep
until a producer window opens. This module holds the one default that reads the wall.
"""

from __future__ import annotations

import time
from collections.abc import Callable

Clock = Callable[[], int]


def wall_clock_ms() -> int:
    """Now, in whole milliseconds since the Unix epoch (the default `NodeConfig.clock`)."""
    return time.time_ns() // 1_000_000
