"""A diagnostic, not part of a node: each `qmemo node` started with this folder on
PYTHONPATH and QMEMO_MEMLOG=1 writes, every QMEMO_MEMLOG_PERIOD seconds (default 30),
one line of its memory accounting to QMEMO_MEMLOG_DIR/mem-<pid>.log (default /tmp):

    t=<s since start> rss=<MiB> pyblocks=<sys.getallocatedblocks()> heap=<MiB> heap_used=<MiB>
    heap_free=<MiB> mmap=<MiB> mmaps=<count> threads=<Python threads>

`heap*` and `mmap*` are glibc's own `mallinfo2()` (all arenas): what the C allocator has
in use and holds free, which /proc's RSS lumps together. Used to tell a fill from a leak
and from fragmentation in docs/soak.md ("Fifteen minutes at 3,000 TPS"):

    QMEMO_MEMLOG=1 PYTHONPATH=scripts/memlog qmemo soak --rate 3000 --duration 900 ...

Cheap (a few microseconds a line), unlike tracemalloc, which slowed the nodes so much
that the load did not hold. Python imports `sitecustomize` at start-up when it is on the
path; without QMEMO_MEMLOG this does nothing, and nothing but `qmemo node` is touched.
Linux with glibc >= 2.33 only.
"""

import os
import sys

if os.environ.get("QMEMO_MEMLOG") and sys.argv[1:2] == ["node"]:     # `qmemo node`, `python -m qmemo.cli node`
    import ctypes
    import threading
    import time

    class _MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                         "fsmblks", "uordblks", "fordblks", "keepcost")]

    def _memlog() -> None:
        mallinfo2 = ctypes.CDLL(None).mallinfo2
        mallinfo2.restype = _MallInfo2
        page = os.sysconf("SC_PAGE_SIZE")
        period = float(os.environ.get("QMEMO_MEMLOG_PERIOD", "30"))
        path = os.path.join(os.environ.get("QMEMO_MEMLOG_DIR", "/tmp"), f"mem-{os.getpid()}.log")
        started = time.monotonic()
        mib = 2**20
        with open(path, "x") as out:       # never through a file (or link) already there
            while True:
                time.sleep(period)
                with open("/proc/self/statm") as statm:
                    rss = int(statm.read().split()[1]) * page
                info = mallinfo2()
                print(f"t={time.monotonic() - started:.0f} rss={rss / mib:.1f} pyblocks={sys.getallocatedblocks()} "
                      f"heap={info.arena / mib:.1f} heap_used={info.uordblks / mib:.1f} "
                      f"heap_free={info.fordblks / mib:.1f} mmap={info.hblkhd / mib:.1f} mmaps={info.hblks} "
                      f"threads={threading.active_count()}", file=out, flush=True)

    threading.Thread(target=_memlog, daemon=True, name="memlog").start()
