"""Each fault of a run with the transactions intended around it (qmemo.scenario.fault_table),
from a hand-made run folder."""

from __future__ import annotations

from pathlib import Path

import orjson

from qmemo.scenario.fault_table import fault_rows, render


def test_each_fault_is_paired_with_what_undid_it_and_the_transactions_around_it(tmp_path: Path):
    timeline = [{"t_s": None, "what": "nodes healthy"}, {"t_s": 0.0, "what": "load started"},
                {"t_s": 5.0, "what": "kill -9", "nodes": [1]}, {"t_s": 8.0, "what": "SIGSTOP", "nodes": [2]},
                {"t_s": 9.0, "what": "restart", "nodes": [1]}, {"t_s": 12.0, "what": "SIGCONT", "nodes": [2]},
                {"t_s": 30.0, "what": "partition", "groups": [[0], [1, 2]]}]      # never healed: no end
    (tmp_path / "timeline.jsonl").write_bytes(b"".join(orjson.dumps(line) + b"\n" for line in timeline))
    (tmp_path / "gen").mkdir()
    rows = ["index,id,intended_s,sent_s,accepted_s,committed_s,status,reason"]
    for i, (intended, committed) in enumerate([(1.0, 3.0), (6.0, 10.0), (7.0, None), (21.0, 23.0), (33.0, 34.0)]):
        rows.append(f"{i},{i:02x},{intended},{intended},,{'' if committed is None else committed},accepted,")
    (tmp_path / "gen" / "transactions.csv").write_text("\n".join(rows) + "\n")
    kill, pause, partition = fault_rows(tmp_path, after_s=10.0)
    assert (kill.start_s, kill.end_s, kill.what, kill.nodes) == (5.0, 9.0, "kill -9", "1")
    assert (kill.intended, kill.committed, kill.p50_ms, kill.p99_ms) == (2, 1, 4000.0, 4000.0)   # 6..19 s
    assert (pause.end_s, pause.nodes, pause.intended) == (12.0, "2", 1)                        # 8..22 s: 21 s
    assert (partition.end_s, partition.nodes, partition.intended) == (None, "0 / 1,2", 1)
    table = render([kill, pause, partition], after_s=10.0)
    assert table.splitlines()[2] == "| 5.0 | 9.0 | kill -9 | 1 | 2 | 1 | 4,000 | 4,000 |"
    assert "| 30.0 | - | partition | 0 / 1,2 | 1 | 1 | 1,000 | 1,000 |" in table
