"""The report's sharded section, from a real sharded devnet run's summary.json and the C fixture."""

from pathlib import Path

from qmemo.analysis.devnet import load_devnet_run
from qmemo.analysis.report_memo import devnet_capacities
from qmemo.analysis.report_shards import shards_section
from qmemo.analysis.results import load_results

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def test_a_sharded_run_gets_its_shards_invariants_and_memo_rows():
    run = load_devnet_run(FIXTURES / "devnet-shards")
    section = shards_section(load_results(FIXTURES / "c-baseline-quick"), [run])
    text = section.render()
    assert [s.shard for s in run.shards] == [0, 1] and run.invariants.hold
    assert "supply conserved **yes**" in text and "credited exactly once **yes**" in text
    for scenario in ("conservative, 0% cross-shard", "conservative, 20% cross-shard", "target, 0% cross-shard",
                     "target, 20% cross-shard"):
        assert scenario in text
    assert "2,500.0" in text and "3,000.0" in text         # 10,000 / 4 x (1 + share)
    assert "qmemo/analysis/memo.py" in text and "statistical.json" in text and "devnet-shards/summary.json" in text


def test_an_unsharded_run_has_no_shards_section_and_keeps_its_capacity():
    run = load_devnet_run(FIXTURES / "devnet-run")
    assert shards_section(load_results(FIXTURES / "c-baseline-quick"), [run]) is None
    assert "node end to end" in devnet_capacities([run])[0].label


def test_a_sharded_runs_node_capacity_is_its_busiest_shards_verify_load():
    run = load_devnet_run(FIXTURES / "devnet-shards")
    capacity = devnet_capacities([run])[0]
    busiest = max(s.committed_tps * s.verifies_per_committed_tx for s in run.shards)
    assert "shard node end to end" in capacity.label and capacity.verify_rate == busiest
