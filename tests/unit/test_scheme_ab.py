"""The report's scheme A/B section: per-stage costs from nodes.json, sweeps side by side."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from qmemo.analysis.devnet import load_devnet_run
from qmemo.analysis.scheme_ab import STAGE_CPU, VERIFY_TIME, load_scheme_run, scheme_ab_section, stage_costs
from qmemo.api_schema import MetricsSnapshot
from qmemo.frames import encode_frames
from qmemo.load.node_record import (
    NODES_FILE, NODES_SCHEMA, BlockSeen, NodeEnds, RunNodes, read_nodes, scheme_of, tx_sizes, write_nodes,
)
from tests.unit.api_documents import metrics_snapshot

FIXTURES = Path(__file__).parents[1] / "fixtures"


def metrics(scheme: str, cpu_s: float, verify_s: float, stage_verify_cpu_s: float | None = None,
            verifier: str = "fast") -> MetricsSnapshot:
    """A node's /metrics with this process CPU, verify calls' wall time, (when given) verify
    stage CPU, and the verifier it ran."""
    snapshot = metrics_snapshot()
    by_stage = dict(snapshot.stages.by_stage)
    if stage_verify_cpu_s is None:
        del by_stage["verify"]
    else:
        by_stage["verify"] = replace(by_stage["verify"], cpu_s=stage_verify_cpu_s)
    return replace(snapshot, scheme=scheme, process=replace(snapshot.process, cpu_seconds=cpu_s),
                   verify=replace(snapshot.verify, seconds={"admission": verify_s * 0.75, "block": verify_s * 0.25},
                                  verifier=verifier),
                   stages=replace(snapshot.stages, by_stage=by_stage))


def record(scheme: str, *nodes: NodeEnds, blocks=()) -> RunNodes:
    return RunNodes(NODES_SCHEMA, scheme_of(nodes), nodes, tuple(blocks))


def test_transaction_sizes_come_from_the_framed_request_bodies():
    bodies = [(0, encode_frames([b"a" * 10, b"b" * 12])), (2, encode_frames([b"c" * 7]))]
    assert tx_sizes(bodies, 3) == [10, 12, 7]


def test_verify_share_is_the_difference_of_verify_time_over_process_cpu_summed_over_nodes():
    costs = stage_costs(record("Ed25519",
                               NodeEnds("a", metrics("Ed25519", 10.0, 1.0), metrics("Ed25519", 12.0, 1.5)),
                               NodeEnds("b", metrics("Ed25519", 5.0, 0.0), metrics("Ed25519", 7.0, 0.5))), 1000.0)
    # (0.5 + 0.5) s of verify time over (2 + 2) s of process CPU.
    assert costs.verify_share == pytest.approx(0.25) and costs.share_from == VERIFY_TIME
    assert costs.cpu_us_per_tx is None          # no block seen: no transactions to divide by


def test_the_nodes_own_stage_cpu_is_preferred_when_they_report_it():
    costs = stage_costs(record("Falcon-512", NodeEnds("a", metrics("Falcon-512", 10.0, 1.0, 0.4),
                                                      metrics("Falcon-512", 14.0, 3.0, 1.4))), 1000.0)
    assert costs.verify_share == pytest.approx(0.25) and costs.share_from == STAGE_CPU   # 1.0 of 4.0, not 2.0


def test_a_node_that_restarted_or_did_not_answer_is_left_out():
    costs = stage_costs(record("Falcon-512",
                               NodeEnds("a", metrics("Falcon-512", 10.0, 1.0), metrics("Falcon-512", 2.0, 0.1)),
                               NodeEnds("b", None, metrics("Falcon-512", 2.0, 0.1))), 1000.0)
    assert costs.verify_share is None and costs.share_from is None


def test_bytes_per_block_count_only_blocks_with_transactions_and_scale_others_by_our_mean():
    blocks = [BlockSeen(1, 0, 0, 0), BlockSeen(2, 100, 100, 180_000), BlockSeen(3, 200, 100, 180_000)]
    costs = stage_costs(record("Falcon-512", blocks=blocks), 1000.0)
    assert costs.blocks == 2 and costs.txs_per_block == 150
    assert costs.tx_bytes_per_block == (180_000 + 360_000) / 2 and costs.tx_bytes_per_tx == 1_800


def sweep_folder(tmp_path: Path, name: str, scheme: str, verify_s: float) -> Path:
    """The devnet-sweep fixture (sweep.json and its stages) with a nodes.json in each stage."""
    source = FIXTURES / "devnet-sweep"
    folder = tmp_path / name
    for path in source.rglob("*.json"):
        target = folder / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    for stage in folder.glob("stage-*"):
        write_nodes(stage / NODES_FILE, record(scheme, NodeEnds("a", metrics(scheme, 1.0, 0.0),
                                                                metrics(scheme, 3.0, verify_s)),
                                               blocks=[BlockSeen(5, 10, 10, 10 * 700)]))
    return folder


def test_two_sweeps_of_different_schemes_are_set_side_by_side(tmp_path):
    falcon = load_devnet_run(sweep_folder(tmp_path, "falcon", "Falcon-512", 0.2))
    ed = load_devnet_run(sweep_folder(tmp_path, "ed", "Ed25519", 1.0))
    assert read_nodes(next((tmp_path / "ed").glob("stage-*")) / NODES_FILE).scheme == "Ed25519"
    assert [s.target_tps for s in load_scheme_run(falcon).stages] == sorted(p.target_tps for p in falcon.sweep)
    section = scheme_ab_section([falcon, ed], tmp_path, "caption")
    text = section.render()
    # Every row names the code that verified and what its time depends on.
    [falcon_row] = [line for line in text.splitlines()
                    if line.startswith("| Falcon-512 | qMEMO fast (variable-time hash-to-point, cached keys) | falcon |")]
    [ed_row] = [line for line in text.splitlines() if line.startswith("| Ed25519 | libsodium | ed |")]
    assert "10.0%" in falcon_row and "50.0%" in ed_row           # 0.2 s and 1.0 s of 2.0 s of CPU
    assert "200,000" in falcon_row                                # 2.0 s of node CPU over 10 transactions
    assert "7.00 kB" in falcon_row and "700" in falcon_row        # 10 transactions of 700 bytes a block
    assert section.plots == ("schemes_throughput_latency.png",)
    assert (tmp_path / "schemes_throughput_latency.png").stat().st_size > 10_000


def test_the_verifier_column_says_which_code_ran_and_whether_it_is_variable_time():
    from qmemo.analysis.scheme_ab import verifier_label

    assert verifier_label("ML-DSA-44", "fast") == "qMEMO (variable-time: cached keys)"
    assert verifier_label("ML-DSA-44", "liboqs") == "liboqs"
    assert verifier_label("Falcon-padded-512", "liboqs") == "liboqs (constant-time hash-to-point)"
    assert verifier_label("ECDSA-secp256k1", "fast") == "libsecp256k1"
    assert verifier_label("Falcon-512", None) is None            # a run from before the field: no guess


def test_one_run_alone_has_nothing_to_compare(tmp_path):
    run = load_devnet_run(sweep_folder(tmp_path, "falcon", "Falcon-512", 0.2))
    assert scheme_ab_section([run], tmp_path, "caption") is None


def test_runs_written_before_nodes_json_show_dashes_not_figures(tmp_path):
    runs = [load_devnet_run(FIXTURES / "devnet-sweep"), load_devnet_run(FIXTURES / "devnet-run")]
    text = scheme_ab_section(runs, tmp_path, "caption").render()
    assert "Schemes side by side" in text and "%" not in text.split("| scheme |")[1].split("_Source")[0]
