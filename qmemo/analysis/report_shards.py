"""The report's sharded-devnet section: each shard's load, cross-shard transfers and invariants
measured, and the per-shard verify load set against MEMO's scenarios.

For each sharded devnet run given to `qmemo report --devnet` (its summary.json's
`shards`, `cross_shard`, `invariants`: qmemo.load.shard_summary):

- per shard: committed TPS, transfers it sent to other shards and receipts credited to
  it, intra-shard p99, and verifies per committed transaction measured on its nodes
  beside the research's model 1 + cross-shard share;
- the cross-shard latency (intended -> credited) and the invariants;
- MEMO's conservative and target scenarios, without and with 20% cross-shard traffic
  (qmemo.analysis.memo): the verifies per second one shard needs (model:
  qmemo.analysis.headroom), the verify load one node of this devnet's busiest shard
  carried end to end (its committed TPS x its measured verifies per transaction), that
  load as a share of the need, and the C single-core verify rate's headroom against the
  need - with the model's verifies per transaction and with the measured one (without a C
  baseline those two columns say so, and the rest stands).

Every figure names the file it came from. Pure: result records in, Markdown out.
"""

from __future__ import annotations

from collections.abc import Sequence

from qmemo.analysis.devnet import DevnetRun
from qmemo.analysis.headroom import required_verify_rate, verdict
from qmemo.analysis.markdown import Section, headroom_x, num, percent, source_note, table
from qmemo.analysis.memo import CONSERVATIVE_SHARDS, CONSERVATIVE_TPS, CROSS_SHARD_SHARE, TARGET_SHARDS, TARGET_TPS
from qmemo.analysis.report_headline import NO_C_BASELINE
from qmemo.analysis.results import FALCON, Results, capacities, display_path

MEMO_SOURCE = "qmemo/analysis/memo.py"
_SCENARIOS = (("conservative", CONSERVATIVE_TPS, CONSERVATIVE_SHARDS, 0.0),
              ("conservative", CONSERVATIVE_TPS, CONSERVATIVE_SHARDS, CROSS_SHARD_SHARE),
              ("target", TARGET_TPS, TARGET_SHARDS, 0.0),
              ("target", TARGET_TPS, TARGET_SHARDS, CROSS_SHARD_SHARE))


def shards_section(results: Results | None, runs: Sequence[DevnetRun]) -> Section | None:
    sharded = [run for run in runs if run.shards]
    if not sharded:
        return None
    body = ["A sharded devnet runs one chain per shard; a transfer to another shard's account is debited on "
            "its own shard and credited on the destination from a receipt, whose transaction the destination "
            "verifies again (docs/protocol.md, \"Shards\" and \"Receipts\"). Verifies per committed transaction "
            "are counted on each shard's nodes (signatures verified in the verify pool: transactions and "
            "receipts, not block headers) over the transactions their chain committed, mean over the shard's "
            "nodes; the model is 1 + the share of cross-shard transfers the shard receives."]
    for run in sharded:
        source = display_path(run.source)
        rows = [(s.shard, s.chain_id, len(s.nodes), num(s.committed_tps, 1), num(s.committed), num(s.cross_planned),
                 num(s.credited_in), num(s.p99_ms_intra), num(s.verifies_per_committed_tx, 2),
                 num(s.modelled_verifies_per_tx, 2)) for s in run.shards]
        body += [f"### Run {run.run_id}",
                 table(("shard", "chain", "nodes", "committed TPS", "committed", "to other shards", "credited in",
                        "intra p99 ms", "verifies / tx (measured)", "1 + share (model)"), rows),
                 source_note(source)]
        cross, checks = run.cross_shard, run.invariants
        if cross is not None:
            body.append(f"Cross-shard: {num(cross.planned)} planned, {num(cross.committed)} debited, "
                        f"{num(cross.credited)} credited, {num(cross.lost)} lost; intended -> credited p50 "
                        f"{num(cross.p50_ms_intended_to_credited)} ms, p99 {num(cross.p99_ms_intended_to_credited)} "
                        f"ms (debited -> credited p99 {num(cross.p99_ms_committed_to_credited)} ms). _Source: `{source}`_")
        if checks is not None:
            body.append(f"Invariants from every shard's final state: supply conserved **{_yes(checks.supply_conserved)}** "
                        f"({num(checks.supply_before)} before, {num(checks.supply_after)} after, "
                        f"{num(checks.in_flight)} in flight); credited exactly once "
                        f"**{_yes(checks.credited_exactly_once)}** ({num(checks.not_credited)} debited without a "
                        f"credit, {num(checks.accounts_off)} accounts off). _Source: `{source}`_")
        body += _against_memo(results, run)
    return Section("Shards end to end", "\n\n".join(body))


def _yes(flag: bool) -> str:
    return "yes" if flag else "NO"


def _against_memo(results: Results | None, run: DevnetRun) -> list[str]:
    busiest = max(run.shards, key=lambda s: s.committed_tps * (s.verifies_per_committed_tx or 0))
    measured_per_tx = busiest.verifies_per_committed_tx
    load = busiest.committed_tps * measured_per_tx if measured_per_tx is not None else None
    single = capacities(results, FALCON)[0] if results is not None else None
    rows = []
    for name, tps, shards, share in _SCENARIOS:
        need = required_verify_rate(tps, shards, share)
        need_measured = tps / shards * measured_per_tx if measured_per_tx is not None else None
        head = single.verify_rate / need if single is not None else None
        head_measured = single.verify_rate / need_measured if need_measured and single is not None else None
        rows.append((f"{name}, {percent(share, 0)} cross-shard", num(tps), shards, num(1 + share, 2), num(need, 1),
                     percent(load / need) if load is not None else "-",
                     f"{headroom_x(head)} {verdict(head)}" if head is not None else "-",
                     num(need_measured, 1) if need_measured is not None else "-",
                     f"{headroom_x(head_measured)} {verdict(head_measured)}" if head_measured else "-"))
    against_c = (f"the C single core ({num(single.verify_rate)}/s) is set against it with the model's and with the "
                 "measured verifies per transaction." if single is not None else
                 f"the C single core's headroom is not shown: there is {NO_C_BASELINE}.")
    return [
        f"Set against MEMO: the busiest shard of run {run.run_id} (shard {busiest.shard}) committed "
        f"{num(busiest.committed_tps, 1)} TPS at {num(measured_per_tx, 2)} verifies per transaction: a verify load of "
        f"{num(load, 1)}/s on each of its nodes, end to end (with everything else a node does, on this shared "
        f"machine). Needed per shard = TPS / shards x verifies per transaction; {against_c}",
        table(("MEMO scenario", "TPS", "shards", "verifies / tx (model)", "needed/s per shard",
               "this devnet's shard load / needed", "C single core headroom (model)",
               "needed/s (measured verifies / tx)", "C single core headroom (measured)"), rows),
        source_note(display_path(run.source), *([single.source] if single is not None else []), MEMO_SOURCE),
    ]
