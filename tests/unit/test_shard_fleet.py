"""A sharded devnet's generator fleet, its pure parts: which shards each process drives,
a part's shards saved and rebuilt by the parent, the live documents of a process's shards
and of the fleet's parts merged, and the dashboard's per-shard generator lag."""

from __future__ import annotations

import asyncio
import math
import time
from array import array
from pathlib import Path

import numpy as np
import orjson
import pytest
from rich.console import Console

from qmemo.cli import build_parser
from qmemo.commands.gen import gen_config, part_args
from qmemo.errors import ConfigError
from qmemo.frames import encode_frames
from qmemo.load import shards as shards_module
from qmemo.load.fleet import FleetPart, merge_live
from qmemo.load.follower import FollowState
from qmemo.load.latency import ACCEPTED, Timings
from qmemo.load.run import GenConfig
from qmemo.load.sender import Batch, SendProgress
from qmemo.load.shard_fleet import load_shards, save_shards, shard_shares
from qmemo.load.shard_parts import Moves, ShardPart, moves_of, transfers
from qmemo.load.shard_workload import ShardWorkload
from qmemo.monitor.shards_view import shard_generators
from qmemo.monitor.view import render
from tests.unit.shard_kit import ShardChain, account
from tests.unit.test_monitor_shards import sharded_pair


@pytest.mark.parametrize(("shards", "generators"), [(4, 4), (4, 2), (4, 3), (2, 1), (5, 2)])
def test_each_shard_is_driven_by_exactly_one_process_k_mod_n(shards: int, generators: int):
    shares = shard_shares(shards, generators)
    assert len(shares) == generators and all(shares)
    assert sorted(k for share in shares for k in share) == list(range(shards))
    assert all(k % generators == part for part, share in enumerate(shares) for k in share)


@pytest.mark.parametrize("generators", [0, 5])
def test_a_fleet_that_cannot_give_each_process_whole_shards_is_refused(generators: int):
    with pytest.raises(ConfigError, match="whole shards"):
        shard_shares(4, generators)


def a_shard(index: int, n: int = 6) -> ShardPart:
    """A shard's part as a run leaves it: some final, some credited, one never answered."""
    timings = Timings([0.1 * i for i in range(n)])
    for i in range(n - 1):
        timings.mark_sent_range(i, i + 1, 0.1 * i + 0.01, 0.1 * i)
        timings.status[i] = ACCEPTED
        timings.committed[i] = 0.1 * i + 1.5
    timings.reasons[n - 1] = "never sent"
    destinations = [index if i % 2 else 1 - index for i in range(n)]
    receipts = {i: bytes([index, i]) * 16 for i in range(n) if destinations[i] != index}
    work = ShardWorkload(index, 100 + index, [bytes([index, i]) * 32 for i in range(n)], [], None, destinations,
                         receipts, from_cache=True)
    credited = array("d", [math.nan]) * n
    for i in list(receipts)[:-1]:
        credited[i] = 3.0 + i
    moves = Moves([bytes([index]) * 20] * n, [bytes([9, index, i]) * 10 + b"\0\0" for i in range(n)], [1] * n, [2] * n)
    return ShardPart(index, [f"http://127.0.0.1:{8000 + index}"], work, timings, credited=credited, moves=moves)


def test_a_parts_shards_come_back_to_the_parent_as_they_were(tmp_path: Path):
    shards = [a_shard(1), a_shard(3)]
    save_shards(FleetPart(1, 2, tmp_path), shards, interrupted_at=4.5, cpu_s=1.25)
    loaded = load_shards(tmp_path)
    assert (loaded.index, loaded.interrupted_at, loaded.cpu_s) == (1, 4.5, 1.25)
    for got, want in zip(loaded.shards, shards, strict=True):
        assert (got.index, got.nodes, got.work.chain_id, got.work.ids, got.work.destinations,
                got.work.receipt_ids, got.work.from_cache) == \
            (want.index, want.nodes, want.work.chain_id, want.work.ids, want.work.destinations,
             want.work.receipt_ids, want.work.from_cache)
        for name in ("intended", "due", "sent", "accepted", "included", "committed"):
            assert list(getattr(got.timings, name)) == pytest.approx(list(getattr(want.timings, name)), nan_ok=True)
        assert got.timings.status == want.timings.status and got.timings.reasons == want.timings.reasons
        assert list(got.credited) == pytest.approx(list(want.credited), nan_ok=True)
        assert got.moves == want.moves
    # The invariants' inputs: the same transfers, from the saved moves as from the run's own.
    late = {(3, 5)}
    assert transfers(loaded.shards, late, set()) == transfers(shards, late, set())


def test_the_moves_are_what_the_signed_batches_say():
    chain = ShardChain(0)
    txs = [chain.transfer(account(0), account(1, 0 if i % 2 else 1), amount=1 + i, fee=1) for i in range(3)]
    work = ShardWorkload(0, 101, [b""] * 3, [Batch(0, 2, "a", encode_frames([tx.encoded for tx in txs[:2]])),
                                             Batch(2, 3, "b", encode_frames([txs[2].encoded]))],
                         None, [0, 0, 0], {}, False)
    moves = moves_of(work)
    assert moves == Moves([tx.sender for tx in txs], [tx.recipient for tx in txs], [1, 2, 3], [1, 1, 1])


def sharded_live(shards: list[int], sent: int, lag: float, credited: int) -> dict:
    return {"running": True, "elapsed_s": 3.0, "planned": 100, "offered": 50, "sent": sent, "committed": sent - 5,
            "p99_ms": 900.0 + lag, "schedule_lag_p99_ms": lag, "shards": shards,
            "cross_shard": {"planned": 20, "credited": credited, "p50_ms": 400.0, "p99_ms": 800.0 + lag}}


def test_a_sharded_fleets_live_documents_sum_their_credits_and_name_each_parts_shards():
    merged = merge_live([sharded_live([0, 2], 40, 3.0, 7), sharded_live([1, 3], 45, 250.0, 9)])
    assert merged["sent"] == 85 and merged["schedule_lag_p99_ms"] == 250.0
    assert merged["cross_shard"] == {"planned": 40, "credited": 16, "p50_ms": 400.0, "p99_ms": 1050.0}
    assert [(g["part"], g["shards"], g["schedule_lag_p99_ms"]) for g in merged["generators"]] == \
        [(0, [0, 2], 3.0), (1, [1, 3], 250.0)]
    one_chain = merge_live([{"running": True, "sent": 3}])
    assert "cross_shard" not in one_chain and "shards" not in one_chain["generators"][0]


def test_the_shards_table_shows_the_generator_of_each_shard_and_its_send_lag():
    snapshot = sharded_pair()
    generator = {**snapshot.generator, **merge_live([sharded_live([0], 40, 3.0, 7), sharded_live([1], 45, 250.0, 9)])}
    assert shard_generators(generator) == {0: ("part 0", 3.0), 1: ("part 1", 250.0)}
    console = Console(width=200, record=True, color_system=None)
    console.print(render(type(snapshot)(snapshot.time_s, snapshot.polls, snapshot.baseline,
                                        previous=snapshot.previous, generator=generator)))
    lines = console.export_text().splitlines()
    assert "part 1" in next(line for line in lines if line.startswith("│ 1 ")) and \
        "250 ms" in next(line for line in lines if line.startswith("│ 1 "))
    # One process for every shard: its lag on each of them.
    assert shard_generators({"running": True, "shards": [0, 1], "schedule_lag_p99_ms": 12.0}) == \
        {0: ("one", 12.0), 1: ("one", 12.0)}


def test_a_sharded_part_runs_with_its_parents_plan_and_cross_shard_share():
    parse = lambda *argv: build_parser().parse_args(["gen", *argv])  # noqa: E731
    parent = parse("--devnet", "d", "--nodes", "http://a:1,http://b:2", "--tps", "400", "--duration", "5",
                   "--cross-shard", "30", "--out", "o")
    config = gen_config(parent)
    child = parse(*part_args(parent, config), "--cross-shard", "30.0", "--part", "1/2", "--out", "o/parts/part-1")
    assert gen_config(child) == gen_config(parse(*part_args(parent, config), "--out", "o/parts/part-1"))
    assert child.cross_shard == 30.0 and child.part == "1/2" and child.generators is None


def test_a_processs_live_status_sums_its_shards_each_on_its_own_schedule(tmp_path: Path, monkeypatch):
    parts = [a_shard(0), a_shard(1)]
    for part in parts:
        part.state = FollowState(next_height=1, committed_seen=5, blocks_seen=3)
        part.progress = SendProgress(sent=5)
        part.state.recent.append((1.9, np.array([1.5, 1.6])))
    config = GenConfig(genesis=tmp_path / "g", accounts=tmp_path / "a", nodes=[], out=tmp_path, tps=10.0,
                       duration_s=0.6, live=tmp_path / "live.json")
    written: list[dict] = []
    real_replace = Path.replace

    def keep(self: Path, target: Path) -> Path:      # each document as it is written
        written.append(orjson.loads(self.read_bytes()))
        return real_replace(self, target)

    monkeypatch.setattr(Path, "replace", keep)

    async def once() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(shards_module._write_status(config, parts, time.perf_counter() - 2.0, stop))
        await asyncio.sleep(0.05)
        stop.set()
        await task

    asyncio.run(once())
    document = written[0]
    # Both shards' schedules are 0.0 .. 0.5 s: at 2 s every one of the 12 is due.
    assert document["offered"] == 12 and document["sent"] == 10 and document["committed"] == 10
    assert document["shards"] == [0, 1] and "generators" not in document and document["blocks_seen"] == 6
    assert document["p99_ms"] == pytest.approx(1600.0) and document["schedule_lag_p99_ms"] == pytest.approx(10.0)
    assert document["cross_shard"]["planned"] == 6 and document["cross_shard"]["credited"] == 4
    assert orjson.loads((tmp_path / "live.json").read_bytes()) == {"running": False}
