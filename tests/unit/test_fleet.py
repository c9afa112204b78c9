"""A --generators fleet's pure parts: the account and schedule split, the merge of the
parts' timings and counters, the live documents merged, the part's options, the
dashboard's per-part row."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Console

from qmemo.cli import build_parser
from qmemo.commands.gen import gen_config, part_args
from qmemo.errors import ConfigError
from qmemo.load.fleet import (interleave, interleave_items, merge_blocks, merge_live, parse_part, schedule_lag_p99_ms,
                              share, sum_counters)
from qmemo.load.latency import ACCEPTED, DUPLICATE, FAILED, REJECTED, Timings, summarize
from qmemo.load.live_status import status
from qmemo.load.node_record import BlockSeen
from qmemo.load.run import RunCounters
from qmemo.load.summary import DoorAnswers
from qmemo.load.workload import Account, PlanShape, assign
from qmemo.monitor.view import Baseline, Snapshot, render


def accounts(n: int) -> list[Account]:
    return [Account(bytes([i]), b"", bytes([i]) * 4, i * 10) for i in range(n)]


@pytest.mark.parametrize("n, parts", [(10, 3), (9, 3), (7, 2), (5, 5), (4, 1)])
def test_the_parts_accounts_are_disjoint_and_cover_every_account(n: int, parts: int):
    everyone = accounts(n)
    shares = [share(everyone, k, parts) for k in range(parts)]
    addresses = [a.address for s in shares for a in s]
    assert len(addresses) == len(set(addresses)) == n          # each account in exactly one part
    assert all(everyone.index(a) % parts == k for k, s in enumerate(shares) for a in s)   # k, k+N, ...
    assert [len(s) for s in shares] == [len(range(k, n, parts)) for k in range(parts)]


def test_within_its_share_each_sender_goes_to_one_node():
    mine = share(accounts(12), 1, 2)
    senders, targets = assign(PlanShape(60, 5, ("a", "b", "c"), "round-robin", 1), mine)
    node_of: dict[int, set[str]] = {}
    for i, (account, _) in enumerate(senders):
        node_of.setdefault(account, set()).add(targets[i // 5])
    assert all(len(nodes) == 1 for nodes in node_of.values()) and len(node_of) == len(mine)
    nonces = [nonce for account, nonce in senders if account == 0]
    assert nonces == list(range(mine[0].next_nonce, mine[0].next_nonce + len(nonces)))


def filled(n: int, seed: int = 7) -> Timings:
    """A plan of n transactions at 100 TPS with every outcome: sent, answered, included, final."""
    rng = random.Random(seed)
    timings = Timings([i * 0.01 for i in range(n)])
    for i in range(n):
        if i % 17 == 16:
            continue                                   # unsent
        timings.mark_sent(i, timings.intended[i] + rng.random() * 0.05, timings.intended[i] + 0.001)
        outcome = (ACCEPTED, ACCEPTED, ACCEPTED, DUPLICATE, REJECTED, FAILED)[i % 6]
        timings.mark_answer(i, timings.sent[i] + 0.002, outcome, "fee_too_low" if outcome == REJECTED else None)
        if outcome in (ACCEPTED, DUPLICATE) and i % 11:
            timings.mark_included(i, timings.sent[i] + rng.random())
            if i % 13:
                timings.mark_committed(i, timings.included[i] + 0.5)
    return timings


def part_of(whole: Timings, k: int, count: int) -> Timings:
    """What part k of count measured: its share of the whole's transactions, its own indices."""
    part = Timings(share(whole.intended, k, count))
    for name in ("due", "sent", "accepted", "included", "committed"):
        getattr(part, name)[:] = type(getattr(whole, name))("d", share(getattr(whole, name), k, count))
    part.status[:] = bytes(share(whole.status, k, count))
    part.reasons = {i // count: r for i, r in whole.reasons.items() if i % count == k}
    return part


@pytest.mark.parametrize("n, count", [(1000, 2), (1001, 3)])
def test_merging_the_parts_timings_gives_the_summary_of_one_timings_of_all(n: int, count: int):
    whole = filled(n)
    parts = [(k, part_of(whole, k, count)) for k in range(count)]
    merged = interleave(list(reversed(parts)), count)          # in any order
    for name in ("intended", "due", "sent", "accepted", "included", "committed"):
        assert [x for x in getattr(merged, name) if not math.isnan(x)] == \
            [x for x in getattr(whole, name) if not math.isnan(x)], name
    assert merged.status == whole.status and merged.reasons == whole.reasons
    one, both = summarize(whole, warmup_s=1.0), summarize(merged, warmup_s=1.0)
    assert both == one                                         # counts, every latency, schedule lag, TPS
    assert both.counts.committed > 0 and both.counts.rejected and both.counts.unsent and both.counts.lost
    assert both.schedule_lag.count > 0


def test_parts_that_are_not_one_plans_shares_are_refused():
    whole = filled(10)
    with pytest.raises(ValueError):
        interleave([(0, part_of(whole, 0, 2)), (1, part_of(filled(12), 1, 2))], 2)
    with pytest.raises(ValueError):
        interleave([(0, part_of(whole, 0, 2))], 2)


def test_the_parts_ids_and_flags_interleave_back_into_plan_order():
    ids = [bytes([i]) for i in range(7)]
    assert interleave_items([(1, share(ids, 1, 3)), (0, share(ids, 0, 3)), (2, share(ids, 2, 3))], 3) == ids


def counters(scale: int, blocks: int) -> RunCounters:
    return RunCounters({"evicted": scale}, 10 * scale, blocks, scale, {"http://a": scale}, 2 * scale, 20 * scale,
                       3 * scale, 30 * scale, scale, 1.5 * scale, 100 * scale,
                       DoorAnswers(scale, 2 * scale, 3 * scale, 4 * scale, 5 * scale))


def test_the_fleets_counters_are_the_parts_summed():
    total = sum_counters([counters(1, 40), counters(2, 42), replace(counters(0, 41), lost_reasons={"held": 4})])
    assert total == RunCounters({"evicted": 3, "held": 4}, 30, 42, 3, {"http://a": 3}, 6, 60, 9, 90, 3, 4.5, 300,
                                DoorAnswers(3, 6, 9, 12, 15))


def test_the_blocks_seen_count_every_parts_transactions_once_per_height():
    blocks = merge_blocks([[BlockSeen(2, 10, 4, 400), BlockSeen(1, 5, 2, 200)], [BlockSeen(2, 10, 6, 600)]])
    assert blocks == (BlockSeen(1, 5, 2, 200), BlockSeen(2, 10, 10, 1000))


def live(sent: int, lag_ms: float | None, p99_ms: float, failures: int = 0) -> dict:
    return {"running": True, "elapsed_s": sent / 100, "planned": 1000, "offered": sent, "sent": sent,
            "answered": sent, "accepted": sent, "in_flight": 1, "included": sent // 2, "committed": sent // 4,
            "blocks_seen": sent // 100, "failovers": 0, "resend_txs": 0, "target_tps": 100.0,
            "node_failures": {"http://a": failures}, "p50_ms": p99_ms / 2, "p99_ms": p99_ms,
            "schedule_lag_p99_ms": lag_ms}


def test_the_live_documents_are_summed_with_the_worst_lag_and_each_part_listed():
    merged = merge_live([live(300, 4.0, 900.0, 1), live(200, 120.0, 700.0, 2), None])
    assert merged["running"] is True and merged["sent"] == 500 and merged["committed"] == 125
    assert merged["planned"] == 2000 and merged["target_tps"] == 200.0 and merged["in_flight"] == 2
    assert merged["elapsed_s"] == 3.0 and merged["blocks_seen"] == 3
    assert merged["node_failures"] == {"http://a": 3}
    assert merged["p99_ms"] == 900.0 and merged["schedule_lag_p99_ms"] == 120.0
    assert [(g["part"], g["sent"], g["schedule_lag_p99_ms"]) for g in merged["generators"]] == \
        [(0, 300, 4.0), (1, 200, 120.0), (2, None, None)]
    assert merge_live([None, {"running": False}]) == {"running": False}


def test_the_live_status_says_the_send_lag_of_the_last_window():
    timings = Timings([i * 0.01 for i in range(3000)])               # 100 TPS for 30 s
    for i in range(2000):
        timings.mark_sent(i, timings.intended[i] + (0.2 if i >= 1000 else 0.001))
    doc = status(elapsed_s=20.0, duration_s=30.0, timings=timings, sent=2000, answered=2000, in_flight=0,
                 included=0, committed=0, blocks_seen=0, failovers=0, node_failures={}, recent_latencies_s=[])
    assert doc["schedule_lag_p99_ms"] == pytest.approx(200.0)       # the last 10 s lagged; the first did not
    early = status(elapsed_s=9.0, duration_s=30.0, timings=timings, sent=900, answered=900, in_flight=0,
                   included=0, committed=0, blocks_seen=0, failovers=0, node_failures={}, recent_latencies_s=[])
    assert early["schedule_lag_p99_ms"] == pytest.approx(1.0)
    assert schedule_lag_p99_ms(timings, 0.0, 10.0) == pytest.approx(1.0)
    assert schedule_lag_p99_ms(timings, 25.0, 30.0) is None          # nothing sent there


def test_the_dashboard_shows_each_generators_send_lag():
    def text(generator: dict) -> str:
        console = Console(width=160, record=True, color_system=None)
        console.print(render(Snapshot(1.0, [], Baseline(None, "none"), generator=generator)))
        return console.export_text()

    assert "generators: 2, send lag p99 per part" in text(merge_live([live(300, 4.0, 900.0),
                                                                      live(200, 120.0, 700.0)]))
    assert "4 / 120 ms" in text(merge_live([live(300, 4.0, 900.0), live(200, 120.0, 700.0)]))
    assert "generators:" not in text(live(300, 4.0, 900.0))         # one process: no per-part row


def parse(*argv: str):
    return build_parser().parse_args(["gen", *argv])


def test_a_part_runs_with_its_parents_plan_sending_and_measurement():
    parent = parse("--devnet", "d", "--nodes", "http://a:1,http://b:2", "--tps", "1500.5", "--duration", "7",
                   "--schedule", "0:100,3:200", "--ramp", "--batch", "50", "--target", "random",
                   "--max-in-flight", "9", "--connections", "5", "--resend-for", "3", "--warmup", "1.5",
                   "--commit-timeout", "4", "--seed", "3", "--no-cache", "--generators", "2", "--out", "o")
    config = gen_config(parent)
    part = gen_config(parse(*part_args(parent, config), "--part", "1/2", "--out", "o/parts/part-1"))
    assert part == replace(config, out=Path("o/parts/part-1"))
    cached = parse("--devnet", "d", "--poisson", "--generators", "3", "--out", "o")
    config = gen_config(cached)
    assert gen_config(parse(*part_args(cached, config), "--out", "o")) == config
    assert config.cache_dir == Path("d/workloads") and config.poisson


def test_a_part_names_k_of_n():
    with pytest.raises(ConfigError, match="at least 1"):
        parse("--generators", "0").run(parse("--generators", "0"))
    assert parse_part("1/3") == (1, 3)
    for bad in ("3/3", "-1/2", "1", "a/b"):
        with pytest.raises(ConfigError):
            parse_part(bad)
