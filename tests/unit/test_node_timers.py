"""The node's held-transaction expiry wakes once a second while a transaction is held, and
once a time to live while none is: a transaction held after a check cannot expire before
the next one, so it is still evicted within a second of its time to live."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from qmemo.node.service import EXPIRY_INTERVAL_S, Node

TTL_S = 30.0


class Ledger:
    """A pool of held transactions, each its time held; `sizes()[1]` counts them."""

    def __init__(self) -> None:
        self.held: list[float] = []

    def sizes(self) -> tuple[int, int]:
        return 0, len(self.held)


async def run_expiry(monkeypatch: pytest.MonkeyPatch, ledger: Ledger, holds: dict[float, float],
                     until_s: float) -> list[tuple[float, int]]:
    """The expiry loop on a fake clock: `holds` {time: held_at} adds a held transaction at `time`;
    each check evicts those held TTL_S or longer. Returns (time, evicted) per check."""
    now, checks = [0.0], []

    def expire_held() -> None:
        expired = [t for t in ledger.held if now[0] - t >= TTL_S]
        ledger.held = [t for t in ledger.held if now[0] - t < TTL_S]
        checks.append((now[0], len(expired)))

    async def sleep(seconds: float) -> None:
        for at in sorted(holds):
            if now[0] < at <= now[0] + seconds:
                ledger.held.append(holds[at])
        now[0] += seconds
        if now[0] > until_s:
            raise asyncio.CancelledError

    node = SimpleNamespace(ledger=ledger, limits=SimpleNamespace(held_ttl_s=TTL_S),
                           admission=SimpleNamespace(expire_held=expire_held))
    with monkeypatch.context() as patched:
        patched.setattr(asyncio, "sleep", sleep)
        with pytest.raises(asyncio.CancelledError):
            await Node._expiry_loop(node)
    return checks


async def test_nothing_held_checks_once_a_time_to_live(monkeypatch):
    checks = await run_expiry(monkeypatch, Ledger(), {}, 100)
    assert [t for t, _ in checks] == [30, 60, 90]


async def test_a_transaction_held_between_checks_is_evicted_within_a_second_of_its_time_to_live(monkeypatch):
    for held_at in (0.5, 12.0, 29.9):
        checks = await run_expiry(monkeypatch, Ledger(), {held_at: held_at}, 100)
        evicted_at = next(t for t, n in checks if n)
        assert held_at + TTL_S <= evicted_at < held_at + TTL_S + EXPIRY_INTERVAL_S + 1e-9, (held_at, checks)
        after = [t for t, _ in checks if t > evicted_at]
        assert after[0] - evicted_at == TTL_S         # none held again: back to a time to live
