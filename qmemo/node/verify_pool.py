"""The verification pool: signature checks on native threads, in slices of a batch, off the event loop.

A batch (a request's candidates, or a block's transactions the ledger does not know as
verified) is cut into at most `threads` slices, each at least `min_chunk` long, and each
slice is one executor job: one call into the node's ledger (`AdmitBatch.verify`,
`BlockBody.verify`) that verifies its records through the admission kernel's verifier
table with the GIL released, remembers the ids that verified in the ledger's verified set
(so a block's validation finds them there), and hands back counts, the total verify time
and a few sampled durations. No Python runs per signature: two threads on two cores
verify twice as fast as one, instead of fighting for the GIL.

Block headers (one signature per block) are verified on the calling thread through the
registry (`verify_header`).

Never imports aiohttp or knows about HTTP.
"""

from __future__ import annotations

import asyncio
import ctypes
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from qmemo.crypto.admit_kernel import AdmitKernel
from qmemo.crypto.schemes import backend_of, scheme_by_id
from qmemo.errors import ConfigError, UnknownScheme
from qmemo.node.metrics import VerifyMetrics
from qmemo.node.stages import thread_cpu_ns

MIN_CHUNK = 8   # below this a job's fixed cost (~20 µs) is not worth a second thread


def name_os_thread(name: str) -> None:
    """Give the calling thread an OS-visible name (Linux, 15 bytes): `top -H`, /proc and the
    node benchmark then tell the verify threads from the event loop."""
    try:
        libc = ctypes.CDLL(None)
        libc.prctl(15, name.encode()[:15], 0, 0, 0)     # 15 = PR_SET_NAME
    except (OSError, AttributeError):
        pass


class VerifyPool:
    """N verify threads (0: verify on the calling thread) over the admission kernel's table."""

    def __init__(self, threads: int, metrics: VerifyMetrics, kernel: AdmitKernel, ledger: Any, *,
                 name: str = "node", min_chunk: int = MIN_CHUNK, verifier: str) -> None:
        if threads < 0:
            raise ConfigError("verify threads must be 0 (inline) or more")
        backend_of("Falcon-512", verifier)   # an unknown verifier fails at start, not per transaction
        self.threads = threads
        self.metrics = metrics
        self.kernel = kernel
        self.ledger = ledger
        self.verifier = verifier
        self._min_chunk = min_chunk
        self._header_verifiers: dict[int, Callable[[bytes, bytes, bytes], bool]] = {}
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=f"{name}-verify",
                                            initializer=name_os_thread, initargs=(f"{name}-verify",)) \
            if threads else None

    @property
    def inline(self) -> bool:
        """No threads: signatures are verified on the calling (event loop) thread."""
        return self._executor is None

    async def verify_batch(self, batch: Any, path: str) -> None:
        """Verify an AdmitBatch's candidates (verdicts land in the batch)."""
        await self._run(lambda part, parts: batch.verify(self.kernel.table, part, parts), batch.candidates, path)

    async def verify_body(self, body: Any, path: str) -> int:
        """Verify a block body's signatures the ledger does not know as verified; how many were checked."""
        missing = self.ledger.unverified(body)
        if missing:
            await self._run(lambda part, parts: body.verify(self.ledger, self.kernel.table, part, parts), missing, path)
        return missing

    async def _run(self, job: Callable[[int, int], tuple], count: int, path: str) -> None:
        parts = 1 if self._executor is None else max(1, min(self.threads, count // self._min_chunk))
        if self._executor is None:
            self._file(path, *self._timed(job, 0, 1))
            return
        loop = asyncio.get_running_loop()
        results = await asyncio.gather(*(loop.run_in_executor(self._executor, self._timed, job, part, parts)
                                         for part in range(parts)))
        for result in results:
            self._file(path, *result)

    @staticmethod
    def _timed(job: Callable[[int, int], tuple], part: int, parts: int) -> tuple:
        started = thread_cpu_ns()
        checked, valid, hits, ns, samples = job(part, parts)
        return checked, hits, ns, samples, thread_cpu_ns() - started

    def _file(self, path: str, checked: int, hits: int, ns: int, samples: list[int], cpu_ns: int) -> None:
        self.metrics.record_summary(path, checked, ns, samples, cpu_ns)
        self.metrics.count_cache(hits, checked)

    def verify(self, scheme_id: int, public_key: bytes, message: bytes, signature: bytes) -> bool:
        """One block header's signature (qmemo.core.state.HeaderVerifier), on the calling
        thread, through the registry, timed under the "block" path."""
        verify = self._header_verifiers.get(scheme_id)
        if verify is None:
            try:
                verify = scheme_by_id(scheme_id, self.verifier).verify
            except UnknownScheme:
                def verify(public_key: bytes, message: bytes, signature: bytes) -> bool:
                    return False
            self._header_verifiers[scheme_id] = verify
        started = time.perf_counter_ns()
        ok = verify(public_key, message, signature)
        self.metrics.record_summary("block", 1, time.perf_counter_ns() - started, [])
        return ok

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)

