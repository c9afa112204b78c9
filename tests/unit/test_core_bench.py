"""`qmemo bench core` smoke run: tiny sizes (the figures mean nothing), the JSON it saves."""

from __future__ import annotations

import orjson

from qmemo.cli import main


def test_core_bench_runs_and_saves_its_figures(tmp_path, capsys):
    out = tmp_path / "core.json"
    assert main(["bench", "core", "--schemes", "Falcon-512,Ed25519", "--transactions", "12", "--accounts", "3",
                 "--repeat", "1", "--out", str(out)]) == 0
    document = orjson.loads(out.read_bytes())
    assert document["schema"] == "qmemo-core-bench/1" and "cpu_model" in document["machine"]
    falcon = document["schemes"]["Falcon-512"]
    assert set(falcon["per_transaction_us"]) >= {"decode_binary", "merkle_root", "validate_cold", "validate_warm",
                                                 "verify_only"}
    assert all(step["median_us"] > 0 for step in falcon["per_transaction_us"].values())
    assert 0 < falcon["verify_share_of_cold_validation"]
    printed = capsys.readouterr().out
    assert "share of cold validation" in printed and f"saved {out}" in printed
