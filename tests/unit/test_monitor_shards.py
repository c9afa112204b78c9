"""The dashboard's shards table, rendered to a fixed-width console and read back as text."""

from dataclasses import replace

from rich.console import Console

from qmemo.api_schema import ReceiptFigures, ShardFigures, StageFigure
from qmemo.monitor.shards_view import shard_rows
from qmemo.monitor.view import Baseline, NodePoll, Snapshot, render
from tests.unit.api_documents import metrics_snapshot


def shard_metrics(node: str, shard: int, *, committed: int, credited: int, verified: int):
    metrics = metrics_snapshot(node, committed=committed)
    stages = metrics.stages
    by_stage = dict(stages.by_stage)
    by_stage["verify"] = StageFigure(1.0, 0.1, 5.0, verified)
    receipts = ReceiptFigures(10, 10, 10, 0, {}, 0, credited, 0)
    return replace(metrics, shard=ShardFigures(shard, 2), receipts=receipts,
                   stages=replace(stages, by_stage=by_stage))


def sharded_pair() -> Snapshot:
    base = Baseline(None, "none")
    before = Snapshot(100.0, [NodePoll(f"http://{k}{i}", 100.0, shard_metrics(f"shard-{k}-node-{i}", k, committed=0,
                                                                                 credited=0, verified=0))
                              for k in range(2) for i in range(2)], base)
    # In 2 s: shard 0 commits 2,000 and credits 400; its nodes verify 2,400 each (1.2 per tx).
    now = [NodePoll(f"http://{k}{i}", 102.0, shard_metrics(f"shard-{k}-node-{i}", k, committed=2_000 * (k + 1),
                                                             credited=400, verified=2_400 + 2_000 * k))
           for k in range(2) for i in range(2)]
    now[3] = NodePoll("http://11", 102.0, None, "ClientConnectorError")
    return Snapshot(102.0, now, base, previous=before, generator={"cross_shard": {"planned": 900, "credited": 800,
                                                                                   "p50_ms": 7100.0, "p99_ms": 9300.0}})


def test_nodes_are_grouped_by_shard_with_measured_and_modelled_verifies_per_tx():
    rows = shard_rows(sharded_pair())
    assert [(r.shard, r.nodes, r.up) for r in rows] == [(0, 2, 2), (1, 2, 1)]
    assert rows[0].committed_tps == 1_000 and rows[0].credited_per_s == 200
    assert rows[0].verifies_per_tx == 1.2 and rows[0].modelled_per_tx == 1.2
    assert rows[1].committed_tps == 2_000 and round(rows[1].verifies_per_tx, 2) == 1.1


def test_the_shards_table_shows_each_shard_the_total_and_the_generators_cross_shard_latency():
    console = Console(width=160, record=True, color_system=None)
    console.print(render(sharded_pair()))
    text = console.export_text()
    shard_0 = next(line for line in text.splitlines() if line.startswith("│ 0 "))
    assert "2 of 2" in shard_0 and "1,000" in shard_0 and "20%" in shard_0 and "1.20" in shard_0
    total = next(line for line in text.splitlines() if line.startswith("│ all"))
    assert "3 of 4" in total and "3,000" in total
    assert "800 of 900 credited" in text and "7,100 / 9,300 ms" in text


def test_an_unsharded_devnet_has_no_shards_table():
    snapshot = Snapshot(1.0, [NodePoll("http://a", 1.0, metrics_snapshot())], Baseline(None, "none"))
    console = Console(width=160, record=True, color_system=None)
    console.print(render(snapshot))
    assert "shards (" not in console.export_text()
