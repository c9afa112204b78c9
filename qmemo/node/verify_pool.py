"""The verification pool: signature checks on native threads, in batches, off the event loop.

liboqs calls through ctypes release the GIL, so N threads verify on N cores while the
event loop keeps parsing requests. Work is handed over in batches: a batch of B
transactions becomes at most `threads` executor jobs (one per thread, each at least
`min_chunk` transactions), never one job or task per transaction - an executor round
trip costs ~20 us, almost half a Falcon-512 verify.

Every check goes through the core's `VerifyCache` (shared with block validation), so a
transaction verified at admission is a cache hit when its block is validated.

Binary batches are verified by the native admission kernel (`verify_records`): one job
per thread verifies its share of the batch's records in one foreign call on the
kernel's buffer (the GIL released), reads back their verdicts and durations, and hands
the ids that verified to the same cache - no Python call per signature. Its inner
verifier is `TimedSchemeVerifier`: the registry's schemes by wire id, each call timed
into a per-thread list that the job hands to the metrics when it ends (one lock per
job, not per call).

Never imports aiohttp or knows about HTTP.
"""

from __future__ import annotations

import asyncio
import ctypes
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from qmemo.core.transaction import Transaction
from qmemo.core.verify_cache import VerifyCache
from qmemo.crypto.admit_kernel import AdmitKernel, AdmitResults
from qmemo.crypto.schemes import DEFAULT_VERIFIER, backend_of, scheme_by_id
from qmemo.errors import ConfigError, UnknownScheme
from qmemo.node.metrics import VerifyMetrics
from qmemo.node.stages import thread_cpu_ns

MIN_CHUNK = 8   # below this a job's fixed cost (~20 us) is not worth a second thread


class TimedSchemeVerifier:
    """`SignatureVerifier` over the scheme registry, timing every call per thread.

    `verifier` is the registry's Falcon verifier ("fast" or "liboqs"), for every path.
    """

    def __init__(self, verifier: str = DEFAULT_VERIFIER) -> None:
        backend_of("Falcon-512", verifier)   # an unknown verifier fails at start, not per transaction
        self.verifier = verifier
        self._verify_by_id: dict[int, Callable[[bytes, bytes, bytes], bool]] = {}
        self._local = threading.local()

    def verify(self, scheme_id: int, public_key: bytes, message: bytes, signature: bytes) -> bool:
        verify = self._verify_by_id.get(scheme_id)
        if verify is None:
            verify = self._load(scheme_id)
        started = time.perf_counter_ns()
        ok = verify(public_key, message, signature)
        self.samples().append(time.perf_counter_ns() - started)
        return ok

    def verify_many(self, scheme_id: int, items: Sequence[tuple[bytes, bytes, bytes]]) -> list[bool]:
        """Many (public_key, message, signature) of one scheme in one native call, each timed."""
        try:
            scheme = scheme_by_id(scheme_id, self.verifier)
        except UnknownScheme:
            return [False] * len(items)
        results, durations = scheme.verify_many(items)
        self.samples().extend(durations)
        return results

    def samples(self) -> list[int]:
        """This thread's durations (ns) since it last took them."""
        try:
            return self._local.samples
        except AttributeError:
            self._local.samples = []
            return self._local.samples

    def take_samples(self) -> list[int]:
        samples = self.samples()
        self._local.samples = []
        return samples

    def _load(self, scheme_id: int) -> Callable[[bytes, bytes, bytes], bool]:
        try:
            verify = scheme_by_id(scheme_id, self.verifier).verify
        except UnknownScheme:
            def verify(public_key: bytes, message: bytes, signature: bytes) -> bool:
                return False
        self._verify_by_id[scheme_id] = verify
        return verify


def name_os_thread(name: str) -> None:
    """Give the calling thread an OS-visible name (Linux, 15 bytes): `top -H`, /proc and the
    node benchmark then tell the verify threads from the event loop."""
    try:
        libc = ctypes.CDLL(None)
        libc.prctl(15, name.encode()[:15], 0, 0, 0)     # 15 = PR_SET_NAME
    except (OSError, AttributeError):
        pass


class VerifyPool:
    """N verify threads in front of the shared signature cache."""

    def __init__(self, threads: int, metrics: VerifyMetrics, *, name: str = "node",
                 min_chunk: int = MIN_CHUNK, verifier: str = DEFAULT_VERIFIER) -> None:
        if threads < 0:
            raise ConfigError("verify threads must be 0 (inline) or more")
        self.threads = threads
        self.metrics = metrics
        self.verifier = TimedSchemeVerifier(verifier)
        self.cache = VerifyCache(self.verifier)
        self._min_chunk = min_chunk
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=f"{name}-verify",
                                            initializer=name_os_thread, initargs=(f"{name}-verify",)) \
            if threads else None

    @property
    def inline(self) -> bool:
        """No threads: signatures are verified on the calling (event loop) thread."""
        return self._executor is None

    async def verify(self, transactions: Sequence[Transaction], path: str) -> list[bool]:
        """Is each transaction's signature valid? Counted under `path` ("admission"/"block")."""
        count = len(transactions)
        if not count:
            return []
        if self._executor is None:      # inline: on the calling (event loop) thread
            return self._job(transactions, path)
        jobs = max(1, min(self.threads, count // self._min_chunk))
        size = -(-count // jobs)
        loop = asyncio.get_running_loop()
        futures = [loop.run_in_executor(self._executor, self._job, transactions[i:i + size], path)
                   for i in range(0, count, size)]
        if len(futures) == 1:
            return await futures[0]
        results: list[bool] = []
        for part in await asyncio.gather(*futures):
            results.extend(part)
        return results

    async def verify_records(self, kernel: AdmitKernel, results: AdmitResults, positions: Sequence[int],
                             transactions: Sequence[Transaction], path: str) -> list[bool]:
        """Is the signature of each record at `positions` of `results` (whose transaction is
        the same index of `transactions`) valid? Ids the cache knows are not verified again."""
        cache = self.cache
        todo = cache.unknown(transactions)
        cache.count(len(transactions) - len(todo), len(todo))
        if len(todo) == len(transactions):
            valid = None
        else:
            valid = [True] * len(transactions)
            positions = [positions[i] for i in todo]
            transactions = [transactions[i] for i in todo]
        count = len(positions)
        if count and self._executor is None:
            checked = self._records_job(kernel, results, positions, transactions, path)
        elif count:
            jobs = max(1, min(self.threads, count // self._min_chunk))
            size = -(-count // jobs)
            loop = asyncio.get_running_loop()
            futures = [loop.run_in_executor(self._executor, self._records_job, kernel, results,
                                            positions[i:i + size], transactions[i:i + size], path)
                       for i in range(0, count, size)]
            if len(futures) == 1:
                checked = await futures[0]
            else:
                checked = [ok for part in await asyncio.gather(*futures) for ok in part]
        else:
            checked = []
        if valid is None:
            return checked
        for i, ok in zip(todo, checked):
            valid[i] = ok
        return valid

    def _records_job(self, kernel: AdmitKernel, results: AdmitResults, positions: Sequence[int],
                     transactions: Sequence[Transaction], path: str) -> list[bool]:
        """One executor job: verify these records in one native call, file their timings,
        and remember the ones that verified; its CPU is the `verify` stage, as in `_job`."""
        started = thread_cpu_ns()
        mask = bytearray(results.count)
        for position in positions:
            mask[position] = 1
        kernel.verify(results, bytes(mask))
        valid = results.valid(positions)
        self.cache.remember([tx.id for tx, ok in zip(transactions, valid) if ok])
        self.metrics.record(path, results.verify_ns(positions), thread_cpu_ns() - started)
        return valid

    def record_loop_samples(self, path: str) -> None:
        """File the verifications made on the calling thread (block headers) under `path`."""
        self.metrics.record(path, self.verifier.take_samples())

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)

    def _job(self, transactions: Sequence[Transaction], path: str) -> list[bool]:
        """One executor job: verify a chunk in this thread, then file its timings and its CPU
        (the `verify` stage, qmemo.node.stages) under the metrics' one lock per job."""
        started = thread_cpu_ns()
        results = self.cache.verify_transactions(transactions)
        self.metrics.record(path, self.verifier.take_samples(), thread_cpu_ns() - started)
        return results
