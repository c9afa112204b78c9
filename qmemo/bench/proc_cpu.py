"""CPU time of another process by thread group, from Linux's /proc: what `qmemo bench node`
charges to the node's event loop, its verify threads and the rest."""

from __future__ import annotations

import os


def thread_cpu_s(pid: int) -> dict[str, float]:
    """User + system CPU seconds of process `pid` by thread group (Linux /proc): the event
    loop ("loop": the main thread), the verify pool ("verify"), everything else ("other")."""
    ticks = os.sysconf("SC_CLK_TCK")
    groups = {"loop": 0.0, "verify": 0.0, "other": 0.0}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as stat:
                data = stat.read()
        except OSError:          # the thread ended meanwhile
            continue
        name = data[data.index(b"(") + 1:data.rindex(b")")]
        fields = data.rsplit(b")", 1)[1].split()
        group = "loop" if int(tid) == pid else "verify" if b"-veri" in name else "other"
        groups[group] += (int(fields[11]) + int(fields[12])) / ticks
    return groups
