"""The report's sharded section, from a real sharded devnet run's summary.json and the C fixture."""

from pathlib import Path

from qmemo.analysis.devnet import load_devnet_run
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


def test_an_unsharded_run_has_no_shards_section():
    run = load_devnet_run(FIXTURES / "devnet-run")
    assert shards_section(load_results(FIXTURES / "c-baseline-quick"), [run]) is None


def test_the_busiest_shards_verify_load_is_set_against_memo():
    run = load_devnet_run(FIXTURES / "devnet-shards")
    text = shards_section(load_results(FIXTURES / "c-baseline-quick"), [run]).render()
    busiest = max(run.shards, key=lambda s: s.committed_tps * s.verifies_per_committed_tx)
    load = busiest.committed_tps * busiest.verifies_per_committed_tx
    assert f"(shard {busiest.shard})" in text and f"{load:,.1f}/s" in text


def test_a_sharded_run_gets_no_single_chain_headline_but_points_to_its_section(tmp_path):
    from qmemo.analysis.report import build_sections
    run = load_devnet_run(FIXTURES / "devnet-shards")
    sections = {s.title: s for s in build_sections(load_results(FIXTURES / "c-baseline-quick"), tmp_path, [run])}
    answer = sections["The answer"].render()
    assert "Shards end to end" in answer and "No unsharded devnet run was given" in answer
    assert "Shards end to end" in sections
