"""`qmemo bench node`, the references its figures are read against: same-run single-thread
verify rates measured here through the node's own Falcon verifier (two native loops over
all the transactions - the verifier's batch call, and the admission kernel's verify,
which is what the node runs, with nothing in Python per transaction - the registry call,
the bare ctypes call, two threads at once) and the C baseline's single-core rate from
bench_c's latest summary.json.

The single-thread references are verifies per CPU-second of the verifying thread
(`time.thread_time`), as the node's figure is admitted transactions per CPU-second of
the node: on a machine shared with other work a wall-clock rate would fall with the
load while the node's CPU-time figure does not, and their ratio would flatter the node
(a same-run ratio of 1.08 was seen at load average 11 with wall-clock references).
Only the two-thread figure, which asks how many cores the machine gave, is wall time.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from qmemo.bench.c_baseline import load_c_baseline
from qmemo.crypto.admit_kernel import AdmitKernel
from qmemo.crypto.schemes import get_scheme
from qmemo.frames import encode_frames
from qmemo.errors import BenchmarkError, QmemoError

C_BASELINE_MISSING = "no results/latest/summary.json; run `qmemo bench c`"


def same_run_references(scheme_name: str, verifier: str, transactions: list) -> dict[str, Any]:
    """Same-run single-thread verify rates through `verifier`: a native loop over all the
    transactions, the registry call, and the bare ctypes call."""
    scheme = get_scheme(scheme_name, verifier)
    args = [(tx.public_key, tx.signing_digest, tx.signature) for tx in transactions]
    verify = scheme.verify
    out: dict[str, Any] = {"verifier": verifier, "implementation": scheme.info.implementation}
    best = 0.0
    for _ in range(3):       # the first pass also fills the fast verifier's key cache, as the node's warm-up does
        started = time.thread_time()
        ok, _durations = scheme.verify_many(args)
        best = max(best, len(args) / (time.thread_time() - started))
        if not all(ok):
            raise BenchmarkError(f"{sum(not v for v in ok)} of the benchmark's own signatures did not verify")
    out["native_loop_verify"] = {"ops_per_s": best, "us_per_op": 1e6 / best, "samples": len(args), "best_of": 3}
    best = _kernel_verify_rate(scheme_name, verifier, transactions)
    out["kernel_verify"] = {"ops_per_s": best, "us_per_op": 1e6 / best, "samples": len(args), "best_of": 3}
    for label, call in (("registry_verify", verify), ("ctypes_verify", _bare_ctypes(scheme))):
        if call is None:
            continue
        best = 0.0
        for _ in range(3):
            started = time.thread_time()
            for pk, msg, sig in args:
                call(pk, msg, sig)
            best = max(best, len(args) / (time.thread_time() - started))
        out[label] = {"ops_per_s": best, "us_per_op": 1e6 / best, "samples": len(args), "best_of": 3}
    out["two_threads_verify"] = _two_threads(scheme_name, verifier, transactions)
    return out


def _kernel_verify_rate(scheme_name: str, verifier: str, transactions: list) -> float:
    """Verifies per second of the admission kernel's verify over every transaction: the
    node's verify path (its verifier slot, the length rule, the per-record timing) in one
    native call. Best of three; only the verify call is timed."""
    kernel = AdmitKernel(transactions[0].chain_id, (scheme_name,), verifier=verifier)
    body = encode_frames([tx.encoded for tx in transactions])
    best = 0.0
    try:
        for _ in range(3):
            results = kernel.admit(body, len(transactions), verify=False)
            started = time.thread_time()
            valid = kernel.verify(results)
            best = max(best, len(transactions) / (time.thread_time() - started))
            if valid != len(transactions):
                raise BenchmarkError(f"{len(transactions) - valid} of the benchmark's own signatures did not "
                                     "verify in the admission kernel")
    finally:
        kernel.close()
    return best


TWO_THREAD_ROUNDS = 8   # each thread's half verified this many times: a few ms per round is less than the noise


def _two_threads(scheme_name: str, verifier: str, transactions: list) -> dict[str, float]:
    """The admission kernel's verify over half the transactions on each of two threads at
    once, against one thread over all of them, both in wall time: how much of a second core
    this process really got (about 2x on an idle 2-core machine, 1x if another process held
    a core). The kernel's native call holds no GIL while it verifies, as the node's verify
    threads run it; a loop of one Python call per verify would measure the GIL's hand-offs
    instead (about 1x whatever the machine gives, with a verify of a few µs). Best of three."""
    kernel = AdmitKernel(transactions[0].chain_id, (scheme_name,), verifier=verifier)
    body = encode_frames([tx.encoded for tx in transactions])
    count = len(transactions)
    half = count // 2
    masks = (bytes([1] * half + [0] * (count - half)), bytes([0] * half + [1] * (count - half)))

    def fresh() -> list:
        return [kernel.admit(body, count, verify=False) for _ in range(TWO_THREAD_ROUNDS)]

    expected = {None: count, masks[0]: half, masks[1]: count - half}

    def verify_all(batches: list, mask: bytes | None, valid: list[int]) -> None:
        valid.extend(kernel.verify(results, mask) for results in batches)

    def checked(valid: list[int], mask: bytes | None) -> None:
        if valid != [expected[mask]] * len(valid):
            raise BenchmarkError(f"the two-thread reference verified {valid} of {expected[mask]} per round "
                                 "of the benchmark's own signatures")

    one_per_s = two_per_s = 0.0
    try:
        kernel.verify(kernel.admit(body, count, verify=False))     # the key cache filled, as in the timed runs
        for _ in range(3):
            batches, valid = fresh(), []
            started = time.perf_counter()
            verify_all(batches, None, valid)
            one_per_s = max(one_per_s, TWO_THREAD_ROUNDS * count / (time.perf_counter() - started))
            checked(valid, None)
            batches, valids = fresh(), ([], [])
            threads = [threading.Thread(target=verify_all, args=(batches, mask, valid))
                       for mask, valid in zip(masks, valids)]
            started = time.perf_counter()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            two_per_s = max(two_per_s, TWO_THREAD_ROUNDS * count / (time.perf_counter() - started))
            for mask, valid in zip(masks, valids):
                checked(valid, mask)
    finally:
        kernel.close()
    return {"ops_per_s": two_per_s, "one_thread_ops_per_s": one_per_s, "speedup": two_per_s / one_per_s}


def _bare_ctypes(scheme: Any):
    """The verifier's ctypes call with nothing around it: OQS_SIG_verify for liboqs schemes,
    the fast Falcon verifier's own wrapper (its length checks and one ctypes call) for it."""
    fast = getattr(scheme, "_fast", None)
    if fast is not None:
        return fast.verify
    lib, sig = getattr(scheme, "_lib", None), getattr(scheme, "_sig", None)
    if lib is None or sig is None:
        return None
    verify = lib.OQS_SIG_verify
    return lambda pk, msg, signature: verify(sig, msg, len(msg), signature, len(signature), pk) == 0


def c_baseline_reference(scheme: str) -> dict[str, Any]:
    """The C single-core verify rate and where it came from; {"missing": ..} when bench_c
    has not run, {"error": ..} when its summary cannot be read."""
    try:
        baseline = load_c_baseline()
        if baseline is None:
            return {"missing": C_BASELINE_MISSING}
        return {"ops_per_s": baseline.verify_ops_per_s(scheme), "source": str(baseline.path.resolve()),
                "run_id": baseline.run_id, "quick": baseline.quick}
    except QmemoError as exc:
        return {"error": str(exc)}
