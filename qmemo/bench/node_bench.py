"""`qmemo bench node`: how fast one node admits pre-signed transactions, per CPU-second.

Method:
1. A throw-away devnet with one validator whose block interval is an hour, so no block
   is produced during the measurement: what is timed is admission alone (decode, cheap
   checks, signature verification in the pool, mempool insertion, the JSON answer).
2. Every transaction is signed before any node starts (a thread pool; never timed), and
   framed into binary `POST /txs` bodies of `--batch` transactions.
3. For each verify-thread count (`--threads 1,2`): a fresh `qmemo node` subprocess, a
   warm-up of `--warmup` transactions, then the rest sent over loopback with
   `--concurrency` requests in flight. Measured: wall time from the first request to the
   last answer, and the node process's CPU time (user + system, every thread, from
   /proc/<pid>/stat) over the same span. Every transaction must be accepted.
4. Figures: admitted tx/s; admitted tx per CPU-second of the node; the ratio of the
   latter to the C single-core verify rate (bench_c's latest summary.json, or - if there
   is none - labelled as missing); the same ratio against same-run references measured
   here in one thread, all through the node's own Falcon verifier (`--verifier`, the
   node's default "fast" or "liboqs"): a native loop over the transactions
   (`verify_many`: one call, no Python per transaction - the `headline`'s reference), the
   registry's `verify` (what the node calls) and the bare ctypes call; and the 2-vs-1-thread
   speed-up. The node reports which verifier ran (/metrics); a mismatch fails the run.
5. Where time goes: the node's CPU split by thread (the event loop: HTTP, decoding, checks,
   mempool, JSON; the verify threads: liboqs plus the Python around each call and the waits
   for the GIL), and an in-process breakdown of the admission steps on the same transactions,
   one step at a time with nothing else running.

The client runs on the same machine and competes for the same cores; its CPU time is
reported too. `run_node_bench` returns the result document ("qmemo-node-bench/1"); the
command (qmemo.commands.bench_node) prints it and saves it. This module never prints
and never imports the CLI: progress goes to the `progress` callback.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from qmemo.analysis.c_baseline import load_c_baseline
from qmemo.core.genesis import parse_genesis
from qmemo.core.mempool import Mempool, MempoolLimits
from qmemo.core.state import ChainState, check_transaction_form
from qmemo.core.transaction import Transaction, derive_address
from qmemo.core.verify_cache import VerifyCache
from qmemo.crypto.schemes import DEFAULT_VERIFIER, backend_of, get_scheme
from qmemo.crypto.verifier import RegistryVerifier, scheme_table
from qmemo.devnet.files import GENESIS_FILE, DevnetSpec, create_devnet, validator_key_file
from qmemo.devnet.health import wait_ready
from qmemo.errors import BenchmarkError, ConfigError, QmemoError
from qmemo.net.wire import decode_tx_batch, dumps, encode_tx_batch, encode_tx_results
from qmemo.node.answers import ACCEPTED, TxOutcome
from qmemo.sysinfo import machine_info

SCHEMA = "qmemo-node-bench/1"
PAYLOAD_BYTES = 188     # a 256-byte transaction body (qmemo.load.workload: 256 - 66 fixed - 2)
TXS_PER_ACCOUNT = 100   # below the mempool's per-sender limit
NODE_READY_S = 30.0     # a node that is not answering /health by then has failed to start


@dataclass(frozen=True, slots=True)
class NodeBenchConfig:
    """The benchmark's parameters (the `qmemo bench node` flags)."""

    txs: int = 30_000                    # measured transactions per run
    warmup: int = 3_000                  # transactions before timing starts
    batch: int = 500                     # transactions per request
    concurrency: int = 4                 # requests in flight
    threads: tuple[int, ...] = (1, 2)    # verify-thread counts, one node run each
    scheme: str = "Falcon-512"
    verifier: str = DEFAULT_VERIFIER     # the node's Falcon verifier, and the references'
    gil_switch_interval_s: float | None = None   # the node's sys.setswitchinterval (None: its default)


def run_node_bench(config: NodeBenchConfig, progress: Callable[[str], None]) -> dict[str, Any]:
    """Run the whole benchmark and return its result document (see the module docstring)."""
    if config.txs < config.batch or config.batch < 1 or config.concurrency < 1 or not config.threads \
            or min(config.threads) < 1 or config.warmup < 0:
        raise ConfigError("need --txs >= --batch >= 1, --concurrency >= 1, --warmup >= 0 and thread counts >= 1")
    backend_of("Falcon-512", config.verifier)    # an unknown verifier is refused before any work
    with tempfile.TemporaryDirectory(prefix="qmemo-node-bench-") as tmp:
        workdir = Path(tmp)
        devnet = _make_devnet(workdir, config)
        progress(f"signing {config.warmup + config.txs:,} {config.scheme} transactions ...")
        transactions = _sign(devnet, config.warmup + config.txs)
        references = _references(config.scheme, config.verifier, transactions[:3000])
        breakdown = _breakdown(devnet, transactions[:4000], config.verifier)
        runs = [_run_node(workdir, devnet, transactions, threads, config, progress) for threads in config.threads]
    document = _summarize(config, runs, references, _c_baseline(config.scheme), breakdown)
    document["machine"] = machine_info()
    return document


# --- setup ----------------------------------------------------------------------------------

def _make_devnet(workdir: Path, config: NodeBenchConfig) -> dict[str, Any]:
    """One validator whose block interval is an hour: no block during the measurement."""
    accounts = -(-(config.warmup + config.txs) // TXS_PER_ACCOUNT)
    devnet = create_devnet(DevnetSpec(out=workdir / "devnet", validators=1, accounts=accounts, scheme=config.scheme,
                                      block_interval_ms=3_600_000))
    return {"dir": devnet.dir, "chain_id": devnet.genesis.chain_id, "keys": list(devnet.accounts),
            "scheme": get_scheme(config.scheme)}


def _sign(devnet: dict[str, Any], count: int) -> list:
    scheme, keys = devnet["scheme"], devnet["keys"]
    scheme_id = scheme.info.scheme_id
    payload = bytes(PAYLOAD_BYTES)

    def sign(index: int) -> Transaction:
        sender = keys[index % len(keys)]
        recipient = derive_address(scheme_id, keys[(index + 1) % len(keys)].public_key)
        tx = Transaction(devnet["chain_id"], scheme_id, sender.public_key, index // len(keys), recipient, 1, 1,
                         payload)
        return tx.signed(lambda digest: scheme.sign(sender.secret_key, digest))

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return list(pool.map(sign, range(count), chunksize=256))


def _references(scheme_name: str, verifier: str, transactions: list) -> dict[str, Any]:
    """Same-run single-thread verify rates through `verifier`: a native loop over all the
    transactions, the registry call, and the bare ctypes call."""
    scheme = get_scheme(scheme_name, verifier)
    args = [(tx.public_key, tx.signing_digest, tx.signature) for tx in transactions]
    verify = scheme.verify
    out: dict[str, Any] = {"verifier": verifier, "implementation": scheme.info.implementation}
    best = 0.0
    for _ in range(3):       # the first pass also fills the fast verifier's key cache, as the node's warm-up does
        started = time.perf_counter()
        ok, _durations = scheme.verify_many(args)
        best = max(best, len(args) / (time.perf_counter() - started))
        if not all(ok):
            raise BenchmarkError(f"{sum(not v for v in ok)} of the benchmark's own signatures did not verify")
    out["native_loop_verify"] = {"ops_per_s": best, "us_per_op": 1e6 / best, "samples": len(args), "best_of": 3}
    for label, call in (("registry_verify", verify), ("ctypes_verify", _bare_ctypes(scheme))):
        if call is None:
            continue
        best = 0.0
        for _ in range(3):
            started = time.perf_counter()
            for pk, msg, sig in args:
                call(pk, msg, sig)
            best = max(best, len(args) / (time.perf_counter() - started))
        out[label] = {"ops_per_s": best, "us_per_op": 1e6 / best, "samples": len(args), "best_of": 3}
    out["two_threads_verify"] = _two_threads(verify, args, out["registry_verify"]["ops_per_s"])
    return out


def _two_threads(verify: Any, args: list, one_thread_per_s: float) -> dict[str, float]:
    """The same verify loop on two threads at once: how much of a second core this process
    really got (about 2x on an idle 2-core machine, 1x if another process held a core)."""
    def loop() -> None:
        for pk, msg, sig in args:
            verify(pk, msg, sig)

    threads = [threading.Thread(target=loop) for _ in range(2)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    rate = 2 * len(args) / (time.perf_counter() - started)
    return {"ops_per_s": rate, "speedup": rate / one_thread_per_s}


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


def _c_baseline(scheme: str) -> dict[str, Any] | None:
    try:
        baseline = load_c_baseline()
        if baseline is None:
            return None
        return {"ops_per_s": baseline.verify_ops_per_s(scheme), "source": str(baseline.path.resolve()),
                "run_id": baseline.run_id, "quick": baseline.quick}
    except QmemoError as exc:
        return {"error": str(exc)}


def _breakdown(devnet: dict[str, Any], transactions: list, verifier: str) -> dict[str, float]:
    """Microseconds per transaction of each admission step, in this process (no HTTP)."""
    genesis = parse_genesis(orjson.loads((devnet["dir"] / GENESIS_FILE).read_bytes()), scheme_table())
    state = ChainState.from_genesis(genesis)
    body = encode_tx_batch([tx.encoded for tx in transactions])
    n = len(transactions)
    steps: dict[str, float] = {}

    def timed(name: str, fn) -> Any:
        started = time.perf_counter()
        value = fn()
        steps[name] = (time.perf_counter() - started) / n * 1e6
        return value

    records = timed("unframe", lambda: decode_tx_batch(body, n))
    decoded = timed("decode (ids, digests, address)", lambda: [Transaction.decode(r) for r in records])
    timed("form rules", lambda: [check_transaction_form(genesis, tx) for tx in decoded])
    cache = VerifyCache(RegistryVerifier(verifier))
    timed("signature (cache + registry verify)", lambda: cache.verify_transactions(decoded))
    mempool = Mempool(MempoolLimits(max_transactions=10 * n, max_bytes=1 << 34, max_per_sender=n))

    def check_and_add() -> None:
        for tx in decoded:
            account = state.account(tx.sender)
            mempool.check(tx, account)
            mempool.add(tx, account)

    timed("mempool check + add", check_and_add)
    outcomes = [TxOutcome(tx.id, ACCEPTED) for tx in decoded]
    timed("JSON answer", lambda: encode_tx_results(outcomes))
    return steps


# --- one node run ------------------------------------------------------------------------------

def _run_node(workdir: Path, devnet: dict[str, Any], transactions: list, threads: int,
              config: NodeBenchConfig, progress: Callable[[str], None]) -> dict[str, Any]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    node_config = workdir / f"node-{threads}.json"
    settings = {"mempool_max_txs": 10 * len(transactions), "mempool_max_bytes": 1 << 34,
                "mempool_max_per_sender": 10 * TXS_PER_ACCOUNT}
    if config.gil_switch_interval_s is not None:
        settings["gil_switch_interval_s"] = config.gil_switch_interval_s
    node_config.write_bytes(orjson.dumps(settings))
    log = (workdir / f"node-{threads}.log").open("wb")
    qmemo = Path(sys.executable).with_name("qmemo")
    process = subprocess.Popen(
        [str(qmemo), "node", "--genesis", str(devnet["dir"] / GENESIS_FILE),
         "--key", str(devnet["dir"] / validator_key_file(0)), "--data", str(workdir / f"data-{threads}"),
         "--port", str(port), "--verify-threads", str(threads), "--config", str(node_config),
         "--verifier", config.verifier, "--log-level", "WARNING"],
        stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    bodies = [encode_tx_batch([tx.encoded for tx in transactions[i:i + config.batch]])
              for i in range(0, len(transactions), config.batch)]
    warm = -(-config.warmup // config.batch)
    try:
        progress(f"node with {threads} verify thread(s): admitting {len(transactions) - warm * config.batch:,} "
                 "transactions ...")
        result = asyncio.run(_drive(url, process.pid, bodies[:warm], bodies[warm:], config.concurrency))
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
    expected = sum(min(config.batch, len(transactions) - i)
                   for i in range(warm * config.batch, len(transactions), config.batch))
    if result["accepted"] != expected:
        tail = (workdir / f"node-{threads}.log").read_text(errors="replace")[-2000:]
        raise BenchmarkError(f"the node accepted {result['accepted']} of {expected} transactions "
                           f"({result['answers']}); its log ends:\n{tail}")
    if result["verifier"] != config.verifier:
        raise BenchmarkError(f"the node verified with {result['verifier']!r}, not {config.verifier!r}")
    result["threads"] = threads
    result["transactions"] = expected
    return result


async def _drive(url: str, pid: int, warmup: list[bytes], bodies: list[bytes], concurrency: int) -> dict[str, Any]:
    if not (await wait_ready([url], NODE_READY_S))[url]:
        raise BenchmarkError(f"the node at {url} did not become ready in {NODE_READY_S:g} s")
    answers: dict[str, int] = {}
    accepted = 0

    async def post(session: aiohttp.ClientSession, body: bytes) -> None:
        nonlocal accepted
        async with session.post(f"{url}/txs", data=body,
                                headers={"Content-Type": "application/octet-stream"}) as response:
            document = orjson.loads(await response.read())
        key = str(response.status)
        answers[key] = answers.get(key, 0) + 1
        if response.status == 200:
            accepted += document["accepted"]

    async def send_all(session: aiohttp.ClientSession, batch: list[bytes]) -> None:
        queue = list(reversed(batch))

        async def worker() -> None:
            while queue:
                await post(session, queue.pop())

        await asyncio.gather(*(worker() for _ in range(concurrency)))

    timeout = aiohttp.ClientTimeout(total=300)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        await send_all(session, warmup)
        async with session.get(f"{url}/metrics") as response:
            before = orjson.loads(await response.read())
        accepted = 0
        cpu_before, client_before = _thread_cpu_s(pid), time.process_time()
        started = time.perf_counter()
        await send_all(session, bodies)
        wall_s = time.perf_counter() - started
        cpu_after, client_s = _thread_cpu_s(pid), time.process_time() - client_before
        threads_s = {group: cpu_after.get(group, 0.0) - cpu_before.get(group, 0.0) for group in cpu_after}
        cpu_s = sum(threads_s.values())
        async with session.get(f"{url}/metrics") as response:
            after = orjson.loads(await response.read())
    verify_s = after["verify"]["seconds"]["admission"] - before["verify"]["seconds"]["admission"]
    verify_n = after["verify"]["count"]["admission"] - before["verify"]["count"]["admission"]
    return {"accepted": accepted, "answers": answers, "wall_s": wall_s, "node_cpu_s": cpu_s,
            "node_cpu_s_by_thread": threads_s, "client_cpu_s": client_s,
            "verify_calls": verify_n, "verify_s": verify_s,
            "verify_latency_us": after["verify"]["latency_us"],
            "verifier": after["verify"].get("verifier"), "key_cache": after["verify"].get("key_cache"),
            "event_loop_lag_ms": after["event_loop_lag_ms"]}


def _thread_cpu_s(pid: int) -> dict[str, float]:
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


# --- figures ---------------------------------------------------------------------------------------

def _summarize(config: NodeBenchConfig, runs: list[dict[str, Any]],
               references: dict[str, Any], baseline: dict[str, Any] | None,
               breakdown: dict[str, float]) -> dict[str, Any]:
    c_rate = baseline.get("ops_per_s") if baseline else None
    for run in runs:
        n = run["transactions"]
        run["admitted_per_s"] = n / run["wall_s"]
        run["admitted_per_cpu_s"] = n / run["node_cpu_s"] if run["node_cpu_s"] else None
        run["node_cpu_us_per_tx"] = run["node_cpu_s"] / n * 1e6
        run["verify_call_us_per_tx"] = run["verify_s"] / n * 1e6   # wall time in calls, GIL waits included
        run["cpu_us_per_tx_by_thread"] = {group: seconds / n * 1e6
                                          for group, seconds in run["node_cpu_s_by_thread"].items()}
        run["node_cores_busy"] = run["node_cpu_s"] / run["wall_s"]
        per_cpu = run["admitted_per_cpu_s"]
        run["ratio_to_c_single_core"] = per_cpu / c_rate if per_cpu and c_rate else None
        run["ratio_to_same_run"] = {label: per_cpu / references[label]["ops_per_s"]
                                    for label in ("native_loop_verify", "registry_verify", "ctypes_verify")
                                    if label in references and per_cpu}
    speedup = None
    by_threads = {run["threads"]: run for run in runs}
    if 1 in by_threads and 2 in by_threads:
        speedup = by_threads[2]["admitted_per_s"] / by_threads[1]["admitted_per_s"]
    return {
        "schema": SCHEMA,
        "headline": _headline(config, runs, references),
        "parameters": {"scheme": config.scheme, "verifier": config.verifier, "txs": config.txs, "warmup": config.warmup, "batch": config.batch,
                       "concurrency": config.concurrency, "threads": list(config.threads),
                       "payload_bytes": PAYLOAD_BYTES, "gil_switch_interval_s": config.gil_switch_interval_s},
        "c_baseline": baseline or {"missing": "no results/latest/summary.json; run `qmemo bench c`"},
        "same_run_references": references,
        "admission_breakdown_us_per_tx": breakdown,
        "runs": runs,
        "speedup_2_vs_1_threads": speedup,
        "targets": {"per_cpu_s_vs_c": 0.9, "speedup_2_vs_1": 1.8},
    }


def _headline(config: NodeBenchConfig, runs: list[dict[str, Any]], references: dict[str, Any]) -> dict[str, Any]:
    """The one-thread node's admitted tx per CPU-second over the same verifier's native loop
    in the same run (issue 11's P2 figure; a 2-thread run's CPU includes GIL hand-offs)."""
    run = next((r for r in runs if r["threads"] == 1), runs[0])
    reference = references["native_loop_verify"]["ops_per_s"]
    per_cpu = run["admitted_per_cpu_s"]
    return {"admitted_per_cpu_s": per_cpu, "same_run_verify_per_s": reference,
            "ratio": per_cpu / reference if per_cpu else None, "verifier": config.verifier,
            "threads": run["threads"]}
