"""qmemo.node.stages: the per-stage CPU arithmetic, on a fake thread clock (no timing)."""

from __future__ import annotations

import threading
import time

import pytest

from qmemo.node import stages as stages_module
from qmemo.node.stages import (BLOCK_VALIDATE, DECODE_HASH, HTTP, MEMPOOL, OTHER, STAGES, STORE, VERIFY, StageCPU,
                               stage_figures)


class FakeClock:
    """A thread CPU clock that moves only when told (ns)."""

    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(stages_module, "thread_cpu_ns", fake)
    return fake


def zeros() -> list[int]:
    return [0] * len(STAGES)


def test_stage_names_are_the_documented_list():
    assert STAGES == ("http", "decode_hash", "verify", "mempool", "block_build", "block_validate", "store", "relay")
    assert STAGES[HTTP] == "http" and STAGES[STORE] == "store" and OTHER not in STAGES


def test_laps_chain_one_clock_read_from_stage_to_stage(clock):
    stages = StageCPU(started_monotonic=0.0, started_process_cpu_s=0.0)
    started = stages_module.thread_cpu_ns()
    clock.now += 300
    started = stages.lap(DECODE_HASH, started, 4)
    clock.now += 200
    stages.lap(MEMPOOL, started, 4)
    clock.now += 50
    stages.lap(MEMPOOL, clock.now - 50)
    cpu_ns, txs = stages.totals()
    assert cpu_ns[DECODE_HASH] == 300 and cpu_ns[MEMPOOL] == 250
    assert txs[DECODE_HASH] == 4 and txs[MEMPOOL] == 4
    assert sum(cpu_ns) == 550


def test_timed_adds_the_threads_cpu_even_when_the_call_raises(clock):
    stages = StageCPU(started_monotonic=0.0, started_process_cpu_s=0.0)

    def write(rows: int) -> int:
        clock.now += 70 * rows
        return rows

    def broken() -> None:
        clock.now += 5
        raise OSError("disk gone")

    assert stages.timed(STORE, write, 3)(2) == 2
    with pytest.raises(OSError):
        stages.timed(STORE, broken)()
    cpu_ns, txs = stages.totals()
    assert cpu_ns[STORE] == 145 and txs[STORE] == 3
    with pytest.raises(OSError):
        stages.timed(STORE, broken, 5)()      # a failed write handled none of its 5: a retry counts them
    cpu_ns, txs = stages.totals()
    assert cpu_ns[STORE] == 150 and txs[STORE] == 3


def test_adds_from_many_threads_are_never_lost():
    stages = StageCPU(started_monotonic=0.0, started_process_cpu_s=0.0)

    def work() -> None:
        for _ in range(2_000):
            stages.add_from_thread(BLOCK_VALIDATE, 1, 1)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    cpu_ns, txs = stages.totals()
    assert cpu_ns[BLOCK_VALIDATE] == 8_000 and txs[BLOCK_VALIDATE] == 8_000


def test_loop_and_thread_slots_add_up_in_the_totals(clock):
    stages = StageCPU(started_monotonic=0.0, started_process_cpu_s=0.0)
    clock.now += 40
    stages.lap(STORE, clock.now - 40, 1)
    stages.add_from_thread(STORE, 60, 2)
    assert stages.totals() == ([0] * STORE + [100] + [0] * (len(STAGES) - STORE - 1),
                               [0] * STORE + [3] + [0] * (len(STAGES) - STORE - 1))


def test_other_is_the_process_cpu_the_stages_do_not_hold_and_shares_add_up_to_one():
    stages = StageCPU(started_monotonic=0.0, started_process_cpu_s=0.0)
    cpu_ns = zeros()
    cpu_ns[HTTP], cpu_ns[VERIFY] = 250_000_000, 500_000_000
    figures = stage_figures(stages, cpu_ns, zeros(), process_cpu_s=2.0, admitted=0, now=5.0)
    assert list(figures.by_stage) == [*STAGES, OTHER]
    assert figures.accounted_cpu_s == 0.75 and figures.process_cpu_s == 2.0
    assert figures.by_stage[OTHER].cpu_s == 1.25
    assert figures.by_stage["verify"].share == 0.25 and figures.by_stage[OTHER].share == 0.625
    assert sum(f.share for f in figures.by_stage.values()) == pytest.approx(1.0)
    assert figures.us_per_tx is None and figures.by_stage["verify"].us_per_tx is None   # nothing admitted


def test_per_transaction_costs_cover_the_recent_window_not_the_start():
    stages = StageCPU(started_monotonic=0.0, started_process_cpu_s=0.0)
    cpu_ns = zeros()
    # 0 .. 2 s: start-up only (1 s of CPU in "other"), nothing admitted
    first = stage_figures(stages, cpu_ns, zeros(), process_cpu_s=1.0, admitted=0, now=2.0)
    assert first.window_s == 2.0 and first.window_admitted == 0
    # 2 .. 13 s: 1,000 admitted, 40 ms verifying, 10 ms decoding, 10 ms elsewhere
    cpu_ns[VERIFY], cpu_ns[DECODE_HASH] = 40_000_000, 10_000_000
    stage_figures(stages, cpu_ns, zeros(), process_cpu_s=1.06, admitted=1_000, now=13.0)
    # 13 .. 14 s: nothing more. The window reaches back to the newest mark 10 s old (2 s).
    later = stage_figures(stages, cpu_ns, zeros(), process_cpu_s=1.06, admitted=1_000, now=14.0)
    assert later.window_s == 12.0 and later.window_admitted == 1_000
    assert later.by_stage["verify"].us_per_tx == pytest.approx(40.0)
    assert later.by_stage["decode_hash"].us_per_tx == pytest.approx(10.0)
    assert later.by_stage[OTHER].us_per_tx == pytest.approx(10.0)        # the start-up second is outside
    assert later.us_per_tx == pytest.approx(60.0)
    assert sum(f.us_per_tx for f in later.by_stage.values()) == pytest.approx(later.us_per_tx)


def test_a_window_where_the_stages_outran_the_process_shows_other_as_zero():
    stages = StageCPU(started_monotonic=0.0, started_process_cpu_s=0.0)
    cpu_ns = zeros()
    stage_figures(stages, cpu_ns, zeros(), process_cpu_s=1.0, admitted=0, now=1.0)
    # A verify job that began before the mark is added whole after it: 30 ms of stages in a
    # window where the process used 20 ms.
    cpu_ns[VERIFY] = 30_000_000
    figures = stage_figures(stages, cpu_ns, zeros(), process_cpu_s=1.02, admitted=10, now=12.0)
    assert figures.by_stage[OTHER].us_per_tx == 0.0
    assert figures.by_stage[OTHER].cpu_s == pytest.approx(0.99)
    assert figures.us_per_tx == pytest.approx(3_000.0)


def test_transaction_counts_pass_through_and_other_has_none():
    stages = StageCPU(started_monotonic=0.0, started_process_cpu_s=0.0)
    txs = zeros()
    txs[VERIFY] = 7
    figures = stage_figures(stages, zeros(), txs, process_cpu_s=0.0, admitted=0, now=1.0)
    assert figures.by_stage["verify"].txs == 7 and figures.by_stage[OTHER].txs == 0
    assert figures.by_stage["verify"].share is None          # no process CPU to share yet


def test_stages_beyond_the_process_cpu_show_as_an_overrun_not_hidden_in_other():
    stages = StageCPU(started_monotonic=0.0, started_process_cpu_s=0.0)
    cpu_ns = zeros()
    cpu_ns[VERIFY] = 1_500_000_000       # a stage that double counts: 1.5 s of a 1 s process
    figures = stage_figures(stages, cpu_ns, zeros(), process_cpu_s=1.0, admitted=0, now=1.0)
    assert figures.overrun_cpu_s == pytest.approx(0.5) and figures.by_stage[OTHER].cpu_s == 0.0
    assert sum(f.share for f in figures.by_stage.values()) == pytest.approx(1.5)   # not 1 by construction
    honest = stage_figures(StageCPU(0.0, 0.0), zeros(), zeros(), process_cpu_s=1.0, admitted=0, now=1.0)
    assert honest.overrun_cpu_s == 0.0


def test_the_first_window_leaves_out_the_cpu_spent_before_the_stages_were_set_up():
    # 3 s of CPU (the import, the set-up) before construction; then 1,000 admitted for 20 ms.
    stages = StageCPU(started_monotonic=0.0, started_process_cpu_s=3.0)
    cpu_ns = zeros()
    cpu_ns[VERIFY] = 10_000_000
    figures = stage_figures(stages, cpu_ns, zeros(), process_cpu_s=3.02, admitted=1_000, now=5.0)
    assert figures.by_stage[OTHER].us_per_tx == pytest.approx(10.0)     # not (3.01 s / 1,000)
    assert figures.by_stage[OTHER].cpu_s == pytest.approx(3.01)         # since start: the set-up stays


def test_a_stage_clock_set_up_now_seeds_its_first_mark_with_the_process_cpu(monkeypatch):
    monkeypatch.setattr(time, "process_time", lambda: 7.0)
    stages = StageCPU(started_monotonic=0.0)
    figures = stage_figures(stages, zeros(), zeros(), process_cpu_s=7.5, admitted=100, now=1.0)
    assert figures.by_stage[OTHER].us_per_tx == pytest.approx(5_000.0)   # 0.5 s over 100, not 7.5 s


def test_verify_jobs_count_their_signatures_and_loop_checks_do_not():
    from qmemo.node.metrics import VerifyMetrics

    verify = VerifyMetrics(threads=1)
    verify.record("admission", [40_000] * 8, cpu_ns=400_000)     # an executor job: CPU and its 8
    verify.record("block", [40_000])                             # a header checked on the event loop
    assert verify.count == {"admission": 8, "block": 1}
    assert verify.job_count == 8 and sum(verify.cpu_ns.values()) == 400_000


def test_other_on_the_loop_is_the_loops_cpu_outside_its_laps_and_inline_verifies():
    from qmemo.node.stages import loop_other_ns
    stages = StageCPU(started_monotonic=0.0, started_process_cpu_s=0.0)
    stages.loop_ns[0], stages.loop_ns[3] = 300, 200
    stages.thread_ns[2] = 10_000        # another thread's: not the loop's
    assert loop_other_ns(stages, 1_000) == 500
    assert loop_other_ns(stages, 1_000, inline_ns=400) == 100
    assert loop_other_ns(stages, 400) == 0          # never negative
    cpu_ns = [0] * len(STAGES)
    figures = stage_figures(stages, cpu_ns, [0] * len(STAGES), process_cpu_s=1e-6, admitted=0, now=1.0,
                            other_on_loop_ns=5_000)
    assert figures.other_on_loop_cpu_s == pytest.approx(1e-6)      # at most all of "other"
    assert stage_figures(stages, cpu_ns, [0] * len(STAGES), process_cpu_s=1.0, admitted=0,
                         now=2.0).other_on_loop_cpu_s is None
