"""`qmemo bench idle`'s pieces that need no devnet: the /proc readings, finding the node
processes among a launcher's children, and the figures and verdicts of a window."""

from __future__ import annotations

import os
import subprocess
import sys

from qmemo.bench.idle_bench import TARGET_NODE_PERCENT, ProcSample, figures, node_children, proc_sample


def test_a_process_sample_reads_cpu_seconds_and_context_switches_that_only_grow():
    first = proc_sample(os.getpid())
    sum(i * i for i in range(300_000))      # some CPU between the two readings
    second = proc_sample(os.getpid())
    assert 0 <= first.cpu_s <= second.cpu_s and 0 < first.wakeups <= second.wakeups


def test_the_node_processes_are_found_among_the_launchers_children_by_their_port():
    node = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "node", "--port", "8601"])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "health"])
    try:
        assert node_children(os.getpid()) == {8601: node.pid}
    finally:
        for process in (node, other):
            process.kill()
            process.wait()


def test_a_window_gives_each_nodes_share_of_a_core_the_total_and_the_verdicts():
    before = {"a": ProcSample(1.0, 100), "b": ProcSample(2.0, 200)}
    after = {"a": ProcSample(1.3, 700), "b": ProcSample(2.9, 1400)}
    document = figures(["a", "b"], before, after, seconds=60.0)
    assert [node["cpu_percent"] for node in document["nodes"]] == [0.5, 1.5]
    assert [node["wakeups_per_s"] for node in document["nodes"]] == [10.0, 20.0]
    assert document["total_cpu_percent"] == 2.0 and document["max_node_cpu_percent"] == 1.5
    assert document["meets_total"] and not document["meets_node"]       # b is over 1% of a core
    assert document["targets"]["node_cpu_percent_below"] == TARGET_NODE_PERCENT


def test_the_window_is_split_by_stage_and_charged_per_block_from_two_metrics_reads():
    from types import SimpleNamespace

    from qmemo.bench.idle_bench import by_source

    def snapshot(store_s: float, other_s: float, blocks: int) -> SimpleNamespace:
        stages = {"store": SimpleNamespace(cpu_s=store_s), "other": SimpleNamespace(cpu_s=other_s)}
        return SimpleNamespace(stages=SimpleNamespace(by_stage=stages),
                               blocks=SimpleNamespace(produced=blocks, received=blocks))

    document = by_source([snapshot(1.0, 5.0, 10)], [snapshot(1.06, 5.3, 20)], seconds=60.0)
    assert document["stage_cpu_percent"] == {"store": 0.1, "other": 0.5}
    assert document["blocks_applied"] == 20 and document["staged_cpu_us_per_block"] == 3000.0
