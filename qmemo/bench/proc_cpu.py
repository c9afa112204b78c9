"""CPU time of another process by thread group, from Linux's /proc: what `qmemo bench node`
charges to the node's event loop, its verify threads and the rest.

Each thread's time on a CPU comes from `/proc/<pid>/task/<tid>/schedstat` (its first
field, nanoseconds, user and system together), not from `stat`'s utime and stime: those
count 10 ms ticks, so a short run (the test suite's, 1,000 transactions admitted in
~20 ms) would read 0 s of node CPU. A kernel without schedstat falls back to the ticks.
"""

from __future__ import annotations

import os


def thread_cpu_s(pid: int) -> dict[str, float]:
    """CPU seconds of process `pid` by thread group (Linux /proc): the event loop ("loop":
    the main thread), the verify pool ("verify"), everything else ("other")."""
    groups = {"loop": 0.0, "verify": 0.0, "other": 0.0}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as stat:
                data = stat.read()
            seconds = _on_cpu_s(f"/proc/{pid}/task/{tid}", data)
        except OSError:          # the thread ended meanwhile
            continue
        name = data[data.index(b"(") + 1:data.rindex(b")")]
        group = "loop" if int(tid) == pid else "verify" if b"-veri" in name else "other"
        groups[group] += seconds
    return groups


def _on_cpu_s(task: str, stat: bytes) -> float:
    """A thread's time on a CPU: schedstat's nanoseconds, else stat's utime + stime ticks."""
    try:
        with open(f"{task}/schedstat", "rb") as schedstat:
            return int(schedstat.read().split()[0]) / 1e9
    except FileNotFoundError:
        fields = stat.rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
