"""The dashboard's headline panel (qmemo.monitor.headline_view): the chain's committed TPS
over the last polls against the C rate of the verifier the nodes run, rendered to a
fixed-width console and read back as text."""

from __future__ import annotations

from rich.console import Console

from qmemo.analysis.headline import survival_against_c
from qmemo.monitor.headline_view import WINDOW_S, chain_committed_tps, window_start
from qmemo.monitor.poll import _keep_window
from qmemo.api_schema import MetricsSnapshot
from qmemo.monitor.view import Baseline, NodePoll, Snapshot, render
from tests.unit.api_documents import metrics_snapshot

BASE = Baseline(20_000.0, "results/x/summary.json", fast_verify_per_s=50_000.0)


def node(name: str, committed: int, verifier: str | None = "fast") -> MetricsSnapshot:
    return metrics_snapshot(name, accepted=committed, committed=committed, verify_count=0, verify_seconds=0.0,
                            verifier=verifier)


def polls_every_2s(committed_by_time: dict[float, int], verifiers=("fast", "fast"), **extra) -> Snapshot:
    """Snapshots chained as the poller keeps them; blocks land every other poll, so a rate
    between two polls jumps between 0 and twice the real one."""
    snapshot = None
    for time_s, committed in sorted(committed_by_time.items()):
        polls = [NodePoll(f"http://n{i}", time_s, node(f"node-{i}", committed, v)) for i, v in enumerate(verifiers)]
        kept = snapshot and _keep_window(snapshot, WINDOW_S - (time_s - snapshot.time_s))    # as the poller does
        snapshot = Snapshot(time_s, polls, BASE, previous=kept, **extra)
    return snapshot


def text_of(snapshot: Snapshot, width: int = 180) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(render(snapshot))
    return console.export_text()


JUMPY = {100.0: 0, 102.0: 2_000, 104.0: 2_000, 106.0: 6_000, 108.0: 6_000, 110.0: 10_000}


def test_the_committed_rate_spans_the_window_not_the_last_two_polls():
    snapshot = polls_every_2s(JUMPY)
    committed, span = chain_committed_tps(snapshot)
    assert (committed, span) == (1_000.0, 10.0)          # 10,000 over 10 s; the last 2 s alone say 2,000


def test_the_poller_keeps_only_the_window():
    snapshot = polls_every_2s({float(t): t * 100 for t in range(100, 140, 2)})
    oldest = window_start(snapshot)
    assert snapshot.time_s - oldest.time_s <= WINDOW_S and oldest.previous is None


def test_the_first_screen_leads_with_survival_against_the_fast_verifiers_c_rate():
    text = text_of(polls_every_2s(JUMPY, target_tps=1_000.0))
    first = text.split("qMEMO devnet: nodes")[0]         # the panel comes before the node table
    assert "end to end, live" in first and "survival against C" in first
    assert f"{survival_against_c(1_000.0, 50_000.0):.3f}" == "0.020" and "0.020" in first
    assert "C fast verifier, key cached 50,000/s, variable-time hash-to-point" in first
    assert "1,000 (last 10 s)" in first


def test_nodes_on_liboqs_are_set_against_liboqs_constant_time_rate():
    text = text_of(polls_every_2s(JUMPY, verifiers=("liboqs", "liboqs")))
    first = text.split("qMEMO devnet: nodes")[0]
    assert "C liboqs 20,000/s, constant-time hash-to-point" in first and "0.050" in first


def test_nodes_on_different_verifiers_get_no_survival_figure():
    first = text_of(polls_every_2s(JUMPY, verifiers=("fast", "liboqs"))).split("qMEMO devnet: nodes")[0]
    assert "nodes on different verifiers" in first and "0.0" not in first.split("survival against C")[1]


def test_a_first_poll_has_no_rate_yet_but_renders():
    first = text_of(polls_every_2s({100.0: 0})).split("qMEMO devnet: nodes")[0]
    assert "end to end, live" in first and "(last" not in first
