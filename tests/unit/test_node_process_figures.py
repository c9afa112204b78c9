"""The node's process figures (`/metrics`' `process`, qmemo.node.metrics and
qmemo.net.prometheus): open descriptors counted from /proc, none claimed without it, and
the Prometheus page carrying what the JSON document carries."""

from __future__ import annotations

from dataclasses import replace

from qmemo import api_schema
from qmemo.net import prometheus
from qmemo.node import metrics
from qmemo.node.reporting import Histograms
from tests.unit.api_documents import metrics_snapshot


def test_open_fds_counts_a_file_the_process_opens_and_closes(tmp_path):
    before = metrics.open_fds()
    with (tmp_path / "f").open("w"):
        assert metrics.open_fds() == before + 1
    assert metrics.open_fds() == before


def test_open_fds_is_none_where_there_is_no_proc(monkeypatch):
    def no_proc(path: str) -> list[str]:
        raise FileNotFoundError(path)

    monkeypatch.setattr(metrics.os, "listdir", no_proc)
    assert metrics.open_fds() is None


def _page(snapshot: api_schema.MetricsSnapshot) -> str:
    node = metrics.NodeMetrics(metrics.VerifyMetrics(threads=1))
    return prometheus.render(snapshot, Histograms(node.verify.latency, node.block_interval, node.validation,
                                                  node.loop_lag))


def test_prometheus_exports_open_fds_and_no_series_where_there_was_nothing_to_count():
    assert "\nprocess_open_fds 17\n" in _page(metrics_snapshot())
    unmeasured = replace(metrics_snapshot(), process=api_schema.ProcessFigures(0.5, 48_574_464, "uvloop"))
    page = _page(unmeasured)
    assert "process_open_fds" not in page
    assert "\nprocess_resident_memory_bytes 48574464\n" in page
