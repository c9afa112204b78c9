"""SIGTERM and SIGHUP as Ctrl-C, for commands that start other processes and must stop them.

A command such as `qmemo soak` or `qmemo scenario run` starts nodes and a generator and
stops them by PID in a `finally`. Python's default SIGTERM and SIGHUP end the process at
once, without running it, and leave those children running (found when `kill <soak pid>`
left three nodes and a signing generator behind). `terminate_as_interrupt()` makes both
raise KeyboardInterrupt, so they take the Ctrl-C path: `finally` cleans up, the CLI exits 130.
`shielded()` holds all three off while the cleanup itself runs: a second Ctrl-C must not
cut short the one thing that stops the children. `deferred()` holds them back while a
child is started and recorded, then acts on them: a Ctrl-C landing inside
`subprocess.Popen` would otherwise leave a child started but unknown to the cleanup
(a test sending SIGTERM as the soak started its generator met it in three tries of six).

Changes process-wide signal handlers: call from the main thread of a command, never from
library code that may run inside a node or a test's event loop.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

TERMINATING = (signal.SIGTERM, signal.SIGHUP)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def terminate_as_interrupt() -> Callable[[], None]:
    """Make SIGTERM and SIGHUP raise KeyboardInterrupt; returns what puts the old handlers back."""
    previous = {sig: signal.signal(sig, _interrupt) for sig in TERMINATING}

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return restore


@contextmanager
def deferred() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP noted inside and raised again at its end, to the handlers
    in place before: none is lost, none lands half-way through. Caught, not ignored or
    blocked, so a child started inside inherits neither (exec resets caught signals)."""
    noted: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: noted.append(signum))
                for sig in (signal.SIGINT, *TERMINATING)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for sig in dict.fromkeys(noted):
            signal.raise_signal(sig)


@contextmanager
def shielded() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP ignored inside (the cleanup), restored after."""
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, *TERMINATING)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
