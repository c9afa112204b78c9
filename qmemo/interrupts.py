"""Ctrl-C, SIGTERM and SIGHUP as one clean stop, for commands that start other processes.

A command such as `qmemo soak` or `qmemo scenario run` starts nodes and a generator and
stops them by PID in a `finally`. Python's default SIGTERM and SIGHUP end the process at
once, without running it, and would leave those children running (nodes, a signing
generator: docs/soak.md, "Signals"). After `interrupt_on_signals()` all three raise
KeyboardInterrupt: `finally` cleans up, the CLI exits 130.

One handler and one state for the whole process, not handlers swapped in and out: a
second signal landing while handlers are being swapped would escape half-way (SIGTERM
between two `signal.signal` calls skips the cleanup and leaves SIGINT ignored for good).
The state says what a signal does:
- normal: raise KeyboardInterrupt, and from then on ignore the others (the cleanup that
  the first one starts must not be cut short by a second Ctrl-C);
- `deferred()`: note it, and raise at the end of the block - a Ctrl-C landing inside
  `subprocess.Popen` would otherwise leave a child started but unknown to the cleanup;
- `shielded()`: ignore it (the cleanup itself).
A signal that was ignored before (SIGHUP under `nohup`, SIGINT in a background job) stays
ignored, in this process and in the children it starts: caught signals are reset to the
default by exec, ignored ones are not.

Process-wide: call from the main thread of a command, never from library code that may
run inside a node or a test's event loop.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_NORMAL, _DEFERRING, _SHIELDED = "normal", "deferring", "shielded"
_state = _NORMAL
_noted: list[int] = []


def _handler(signum: int, frame: FrameType | None) -> None:
    global _state
    if _state == _DEFERRING:
        _noted.append(signum)
    elif _state == _NORMAL:
        _state = _SHIELDED
        raise KeyboardInterrupt(signal.Signals(signum).name)


def interrupt_on_signals() -> Callable[[], None]:
    """SIGINT, SIGTERM and SIGHUP (those not ignored already) raise KeyboardInterrupt, once;
    returns what puts the old handlers back."""
    global _state
    _state = _NORMAL
    _noted.clear()
    previous = {sig: signal.signal(sig, _handler) for sig in HANDLED
                if signal.getsignal(sig) is not signal.SIG_IGN}

    def restore() -> None:
        global _state
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _state = _NORMAL
    return restore


@contextmanager
def deferred() -> Iterator[None]:
    """A signal inside is acted on at the end of the block (the first, as KeyboardInterrupt)."""
    global _state
    if _state != _NORMAL:       # already stopping: the signal is ignored anyway
        yield
        return
    _state = _DEFERRING
    try:
        yield
    finally:
        _state = _NORMAL
        if _noted:
            signum = _noted[0]
            _noted.clear()
            _state = _SHIELDED
            raise KeyboardInterrupt(signal.Signals(signum).name)


@contextmanager
def shielded() -> Iterator[None]:
    """Signals ignored inside (the cleanup); as they were before, after."""
    global _state
    before, _state = _state, _SHIELDED
    try:
        yield
    finally:
        _state = before
