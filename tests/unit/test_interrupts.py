"""One clean stop on Ctrl-C, SIGTERM or SIGHUP: the first signal interrupts, a second one
cannot cut the cleanup short, a signal inside `deferred()` waits for the end of the
block, and a signal ignored before (nohup) stays ignored, in children too."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from qmemo.interrupts import deferred, interrupt_on_signals, shielded


@pytest.fixture
def installed():
    # A suite started under nohup ignores SIGHUP, and an ignored signal stays ignored (the
    # last test): the tests here need all three caught, so they start from the defaults.
    ignored = [sig for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP) if signal.getsignal(sig) is signal.SIG_IGN]
    for sig in ignored:
        signal.signal(sig, signal.SIG_DFL)
    restore = interrupt_on_signals()
    yield
    restore()
    for sig in ignored:
        signal.signal(sig, signal.SIG_IGN)


def test_the_first_signal_interrupts_and_a_second_one_is_ignored(installed):
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
        signal.raise_signal(signal.SIGTERM)
    signal.raise_signal(signal.SIGINT)          # the cleanup is under way: nothing happens
    signal.raise_signal(signal.SIGHUP)


def test_a_signal_inside_deferred_is_raised_at_its_end_after_the_block_ran(installed):
    ran = []
    with pytest.raises(KeyboardInterrupt, match="SIGHUP"):
        with deferred():
            signal.raise_signal(signal.SIGHUP)
            ran.append("after the signal")      # e.g. the child is recorded
    assert ran == ["after the signal"]
    signal.raise_signal(signal.SIGTERM)         # stopping now: ignored


def test_shielded_ignores_signals_and_gives_them_back_after(installed):
    with shielded():
        signal.raise_signal(signal.SIGTERM)
        signal.raise_signal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signal.SIGINT)


def test_restore_puts_the_old_handlers_back():
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    interrupt_on_signals()()
    assert {sig: signal.getsignal(sig) for sig in before} == before


PROBE = """
import signal, subprocess, sys
from qmemo.interrupts import deferred, interrupt_on_signals
signal.signal(signal.SIGHUP, signal.SIG_IGN)        # as nohup leaves it
restore = interrupt_on_signals()
signal.raise_signal(signal.SIGHUP)                  # still ignored: no KeyboardInterrupt
with deferred():
    child = subprocess.run([sys.executable, "-c", "import signal; print(int(signal.getsignal(signal.SIGHUP)))"],
                           capture_output=True, text=True, check=True).stdout.strip()
print("alive", child)
"""


def test_a_signal_ignored_before_stays_ignored_here_and_in_children():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["alive", str(int(signal.SIG_IGN))]
