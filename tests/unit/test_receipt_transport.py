"""How receipts leave a source node: a held pull wakes when a block is made durable, answers
at the first final block with a bundle for the asker, and otherwise at its deadline with
the heights that went by; no timer looks at the final height meanwhile.

The outbox's bundles are stubbed (`answer`): what is under test is the waiting, against a
chain whose final and served heights the test moves."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from qmemo.errors import DecodeError
from qmemo.node.receipt_transport import FinalWatch, ReceiptOutbox


class Outbox(ReceiptOutbox):
    """An outbox whose final blocks carry the bundles the test lists, by height."""

    def __init__(self, chain: SimpleNamespace, bundles: dict[int, bytes], shards: int = 4) -> None:
        super().__init__(SimpleNamespace(sharding=SimpleNamespace(count=shards)), chain, None, 0, None)
        self.bundles = bundles
        self.unprovable: set[int] = set()     # final, finality not shown by the headers held yet
        self.answers = 0

    async def answer(self, shard: int, from_height: int, limit: int) -> tuple[int, list[bytes]]:
        self.answers += 1
        covered, out = from_height - 1, []
        for height in range(from_height, min(from_height + limit - 1, self.watch.height) + 1):
            if height in self.unprovable:
                break
            if height in self.bundles:
                out.append(self.bundles[height])
            covered = height
        return covered, out


def chain_at(height: int) -> SimpleNamespace:
    return SimpleNamespace(final_height=height, served_height=height + 1)


def make_final(outbox: Outbox, height: int) -> None:
    outbox.chain.final_height, outbox.chain.served_height = height, height + 1
    outbox.watch.moved()


async def test_a_held_pull_answers_at_the_first_final_block_with_a_bundle_for_the_asker():
    outbox = Outbox(chain_at(4), {7: b"bundle-7", 8: b"bundle-8"})
    pull = asyncio.create_task(outbox.answer_when_final(1, 5, 20, wait_s=5.0))
    for height in (5, 6):             # final, nothing for shard 1: the pull stays held
        make_final(outbox, height)
        await asyncio.sleep(0)
        assert not pull.done()
    make_final(outbox, 7)
    assert await asyncio.wait_for(pull, 1.0) == (7, [b"bundle-7"])


async def test_a_held_pull_with_nothing_for_the_asker_answers_the_heights_covered_at_its_deadline():
    outbox = Outbox(chain_at(4), {})
    pull = asyncio.create_task(outbox.answer_when_final(1, 5, 20, wait_s=0.2))
    make_final(outbox, 6)
    assert await asyncio.wait_for(pull, 2.0) == (6, [])


async def test_heights_already_final_are_answered_at_once_and_a_pull_never_goes_past_its_limit():
    outbox = Outbox(chain_at(30), {3: b"b3", 12: b"b12"})
    assert await outbox.answer_when_final(1, 1, 5, wait_s=5.0) == (5, [b"b3"])
    assert await asyncio.wait_for(outbox.answer_when_final(1, 6, 5, wait_s=5.0), 1.0) == (10, [])


async def test_a_final_block_whose_finality_cannot_be_shown_yet_ends_the_hold():
    outbox = Outbox(chain_at(5), {})
    outbox.unprovable = {5}
    assert await asyncio.wait_for(outbox.answer_when_final(1, 5, 20, wait_s=5.0), 1.0) == (4, [])


async def test_stopping_ends_every_held_pull_at_once():
    outbox = Outbox(chain_at(4), {})
    pull = asyncio.create_task(outbox.answer_when_final(1, 5, 20, wait_s=30.0))
    await asyncio.sleep(0)
    outbox.watch.close()
    assert await asyncio.wait_for(pull, 1.0) == (4, [])
    assert await outbox.answer_when_final(1, 5, 20, wait_s=30.0) == (4, [])


async def test_a_shard_the_genesis_does_not_have_is_refused_and_a_zero_limit_only_names_the_chain():
    outbox = Outbox(chain_at(4), {})
    with pytest.raises(DecodeError) as refused:
        await outbox.serve(4, 1, 20, 0.0)
    assert refused.value.code == "out_of_range"
    assert await outbox.serve(1, 1, 0, 10.0) == (0, [])
    assert outbox.answers == 0


async def test_a_watch_waiter_sleeps_until_moved_and_no_timer_wakes_it_before_its_deadline():
    chain = chain_at(1)
    watch = FinalWatch(chain)
    loop = asyncio.get_running_loop()
    waiting = asyncio.create_task(watch.wait_for(3, loop.time() + 30.0))
    await asyncio.sleep(0.05)
    assert not waiting.done() and len(watch._waiters) == 1      # one future, no polling loop
    chain.final_height, chain.served_height = 2, 3
    watch.moved()
    await asyncio.sleep(0)
    assert not waiting.done()                                    # moved, but not far enough
    chain.final_height = 3
    watch.moved()
    assert await asyncio.wait_for(waiting, 1.0) is True
    assert await watch.wait_for(4, loop.time() + 0.05) is False  # the deadline
