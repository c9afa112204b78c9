"""The dashboard's stage-cost panel, rendered to a fixed-width console and read back as text."""

from __future__ import annotations

from dataclasses import replace

from rich.console import Console

from qmemo.monitor.stages_view import BAR_WIDTH, cells, per_tx_costs, stage_bar
from qmemo.monitor.view import Baseline, NodePoll, Snapshot, render
from qmemo.node.stages import OTHER, STAGES
from tests.unit.api_documents import metrics_snapshot


def node_metrics(name: str, stages: dict[str, float] | None):
    """A node's /metrics with each stage's µs per transaction (None: nothing admitted in its window)."""
    snapshot = metrics_snapshot(name, verify_count=0, verify_seconds=0.0, stages_us_per_tx=stages or {})
    if stages is None:
        return replace(snapshot, stages=replace(snapshot.stages, by_stage={
            name: replace(figure, us_per_tx=None) for name, figure in snapshot.stages.by_stage.items()}))
    return snapshot


def snapshot(baseline: Baseline = Baseline(25_000.0, "results/x/summary.json")) -> Snapshot:
    polls = [NodePoll("http://a", 1.0, node_metrics("node-0", dict(verify=40.0, decode_hash=20.0,
                                                                         http=10.0, other=10.0))),
             NodePoll("http://b", 1.0, node_metrics("node-1", None)),
             NodePoll("http://c", 1.0, None, "ClientConnectorError")]
    return Snapshot(1.0, polls, baseline)


def panel_lines(snap: Snapshot) -> list[str]:
    console = Console(width=160, record=True, color_system=None)
    console.print(render(snap))
    text = console.export_text()
    return text[text.index("stage costs"):].splitlines()


def test_each_node_gets_its_cost_per_transaction_and_a_bar_split_by_stage():
    lines = panel_lines(snapshot())
    row = next(line for line in lines if "node-0" in line)
    assert "80.0" in row                    # 40 + 20 + 10 + 10 µs per transaction
    assert "50%" in row                     # verify's share of it
    # The longest row fills the bar: half verify, a quarter decode+hash, an eighth http and other.
    assert "V" * 20 in row and "D" * 10 in row and "H" * 5 in row and "·" * 5 in row
    assert "V" * 21 not in row


def test_the_c_verify_cost_is_on_the_same_scale():
    lines = panel_lines(snapshot())
    row = next(line for line in lines if "C verify" in line)
    assert "25,000" in row and "40.0" in row          # 1e6 / 25,000 = 40 µs per verify
    assert "V" * 20 in row and "V" * 21 not in row    # 40 of node-0's 80 µs: half the width
    assert "100%" in row


def test_the_fast_verifiers_c_cost_gets_its_own_row():
    lines = panel_lines(snapshot(Baseline(25_000.0, "results/x/summary.json", fast_verify_per_s=50_000.0)))
    row = next(line for line in lines if "C fast verify" in line)
    assert "50,000" in row and "20.0" in row and "V" * 10 in row and "V" * 11 not in row


def test_a_node_without_stages_or_down_shows_dashes_and_no_baseline_no_c_row():
    lines = panel_lines(snapshot(Baseline(None, "no C baseline yet")))
    assert not any("C verify" in line for line in lines)
    for name in ("node-1", "http://c"):
        row = next(line for line in lines if name in line)
        assert "-" in row and "V" not in row.replace("verify", "")


def test_the_legend_names_every_stage():
    legend = " ".join(panel_lines(snapshot()))
    for label in ("http", "decode+hash", "verify", "mempool", "block build", "block validate", "store", "relay",
                  "other"):
        assert label in legend


def test_cells_split_the_width_exactly_by_largest_remainder():
    assert cells([1, 1, 1], 10) == [4, 3, 3]
    assert sum(cells([0.2, 5.0, 0.01, 3.3], BAR_WIDTH)) == BAR_WIDTH
    assert cells([0, 0], 5) == [0, 0]
    assert str(stage_bar({"verify": 3.0, OTHER: 1.0}, 8)) == "VVVVVV··"


def test_a_node_without_stage_costs_in_its_window_has_none():
    assert per_tx_costs(None) is None
    assert per_tx_costs(node_metrics("n", {})) is None           # nothing admitted in the window: all zero
    assert per_tx_costs(node_metrics("n", None)) is None         # no per-transaction figure at all
    assert per_tx_costs(node_metrics("n", {"http": 2, "verify": 0.0})) == \
        {name: 2.0 if name == "http" else 0.0 for name in (*STAGES, OTHER)}
