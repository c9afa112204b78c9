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
   is none - labelled as missing); the same ratio against two same-run references
   measured here in one Python thread: the registry's `verify` (what the node calls) and
   the bare ctypes call into liboqs; and the 2-vs-1-thread speed-up.
5. Where time goes: the node's CPU split by thread (the event loop: HTTP, decoding, checks,
   mempool, JSON; the verify threads: liboqs plus the Python around each call and the waits
   for the GIL), and an in-process breakdown of the admission steps on the same transactions,
   one step at a time with nothing else running.

The client runs on the same machine and competes for the same cores; its CPU time is
reported too. Results are saved as JSON with the machine description.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

SCHEMA = "qmemo-node-bench/1"
PAYLOAD_BYTES = 188     # a 256-byte transaction body (qmemo.load.workload: 256 - 66 fixed - 2)
TXS_PER_ACCOUNT = 100   # below the mempool's per-sender limit


def register(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--txs", type=int, default=30_000, help="measured transactions per run (default 30000)")
    parser.add_argument("--warmup", type=int, default=3_000, help="transactions before timing starts (default 3000)")
    parser.add_argument("--batch", type=int, default=500, help="transactions per request (default 500)")
    parser.add_argument("--concurrency", type=int, default=4, help="requests in flight (default 4)")
    parser.add_argument("--threads", default="1,2", help="verify-thread counts to run (default 1,2)")
    parser.add_argument("--scheme", default="Falcon-512", help="signature scheme (default Falcon-512)")
    parser.add_argument("--gil-switch-interval-s", type=float,
                        help="the node's sys.setswitchinterval (default: the node's, see docs/api.md)")
    parser.add_argument("--out", type=Path, help="JSON file (default results/node-bench-<UTC time>.json)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import tempfile
    import time

    import orjson

    from qmemo.errors import ConfigError
    from qmemo.sysinfo import machine_info

    thread_counts = [int(t) for t in args.threads.split(",") if t.strip()]
    if args.txs < args.batch or args.batch < 1 or args.concurrency < 1 or not thread_counts:
        raise ConfigError("need --txs >= --batch >= 1, --concurrency >= 1 and at least one thread count")
    with tempfile.TemporaryDirectory(prefix="qmemo-node-bench-") as tmp:
        workdir = Path(tmp)
        devnet = _make_devnet(workdir, args)
        print(f"signing {args.warmup + args.txs:,} {args.scheme} transactions ...", flush=True)
        transactions = _sign(devnet, args.warmup + args.txs)
        references = _references(args.scheme, transactions[:3000])
        breakdown = _breakdown(devnet, transactions[:4000])
        runs = [_run_node(workdir, devnet, transactions, threads, args) for threads in thread_counts]
    baseline = _c_baseline(args.scheme)
    document = _summarize(args, thread_counts, runs, references, baseline, breakdown)
    document["machine"] = machine_info()
    _print(document)
    out = args.out or Path("results") / f"node-bench-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")
    print(f"saved {out}")
    return 0


# --- setup ----------------------------------------------------------------------------------

def _make_devnet(workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    import contextlib
    import io

    import orjson

    from qmemo.cli import main
    from qmemo.crypto.keys import load_keys
    from qmemo.crypto.schemes import get_scheme

    accounts = -(-(args.warmup + args.txs) // TXS_PER_ACCOUNT)
    with contextlib.redirect_stdout(io.StringIO()):
        status = main(["genesis", "--out", str(workdir / "devnet"), "--validators", "1",
                       "--accounts", str(accounts), "--scheme", args.scheme, "--block-interval-ms", "3600000"])
    if status != 0:
        raise RuntimeError("qmemo genesis failed")
    document = orjson.loads((workdir / "devnet" / "genesis.json").read_bytes())
    keys = load_keys(workdir / "devnet" / "accounts.keys.json")
    return {"dir": workdir / "devnet", "chain_id": document["chain_id"], "keys": keys,
            "scheme": get_scheme(args.scheme)}


def _sign(devnet: dict[str, Any], count: int) -> list:
    import os
    from concurrent.futures import ThreadPoolExecutor

    from qmemo.core.transaction import Transaction, derive_address

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


def _references(scheme_name: str, transactions: list) -> dict[str, Any]:
    """Same-run single-thread verify rates: the registry call, and the bare ctypes call."""
    import time

    from qmemo.crypto.schemes import get_scheme

    scheme = get_scheme(scheme_name)
    args = [(tx.public_key, tx.signing_digest, tx.signature) for tx in transactions]
    verify = scheme.verify
    out: dict[str, Any] = {}
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
    import threading
    import time

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
    """OQS_SIG_verify through ctypes with nothing around it (liboqs schemes only)."""
    lib, sig = getattr(scheme, "_lib", None), getattr(scheme, "_sig", None)
    if lib is None or sig is None:
        return None
    verify = lib.OQS_SIG_verify
    return lambda pk, msg, signature: verify(sig, msg, len(msg), signature, len(signature), pk) == 0


def _c_baseline(scheme: str) -> dict[str, Any] | None:
    from qmemo.analysis.c_baseline import load_c_baseline
    from qmemo.errors import QmemoError

    try:
        baseline = load_c_baseline()
        if baseline is None:
            return None
        return {"ops_per_s": baseline.verify_ops_per_s(scheme), "source": str(baseline.path.resolve()),
                "run_id": baseline.run_id, "quick": baseline.quick}
    except QmemoError as exc:
        return {"error": str(exc)}


def _breakdown(devnet: dict[str, Any], transactions: list) -> dict[str, float]:
    """Microseconds per transaction of each admission step, in this process (no HTTP)."""
    import time

    from qmemo.core.genesis import parse_genesis
    from qmemo.core.mempool import Mempool, MempoolLimits
    from qmemo.core.state import ChainState, check_transaction_form
    from qmemo.core.transaction import Transaction
    from qmemo.core.verify_cache import VerifyCache
    from qmemo.crypto.verifier import RegistryVerifier, scheme_table
    from qmemo.net.wire import decode_tx_batch, encode_tx_batch, encode_tx_results
    from qmemo.node.answers import ACCEPTED, TxOutcome
    import orjson

    genesis = parse_genesis(orjson.loads((devnet["dir"] / "genesis.json").read_bytes()), scheme_table())
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
    cache = VerifyCache(RegistryVerifier())
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
              args: argparse.Namespace) -> dict[str, Any]:
    import asyncio
    import signal
    import socket
    import subprocess
    import sys

    import orjson

    from qmemo.net.wire import encode_tx_batch

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = workdir / f"node-{threads}.json"
    settings = {"mempool_max_txs": 10 * len(transactions), "mempool_max_bytes": 1 << 34,
                "mempool_max_per_sender": 10 * TXS_PER_ACCOUNT}
    if args.gil_switch_interval_s is not None:
        settings["gil_switch_interval_s"] = args.gil_switch_interval_s
    config.write_bytes(orjson.dumps(settings))
    log = (workdir / f"node-{threads}.log").open("wb")
    qmemo = Path(sys.executable).with_name("qmemo")
    process = subprocess.Popen(
        [str(qmemo), "node", "--genesis", str(devnet["dir"] / "genesis.json"),
         "--key", str(devnet["dir"] / "validator-0.keys.json"), "--data", str(workdir / f"data-{threads}"),
         "--port", str(port), "--verify-threads", str(threads), "--config", str(config), "--log-level", "WARNING"],
        stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    bodies = [encode_tx_batch([tx.encoded for tx in transactions[i:i + args.batch]])
              for i in range(0, len(transactions), args.batch)]
    warm = -(-args.warmup // args.batch)
    try:
        print(f"node with {threads} verify thread(s): admitting {len(transactions) - warm * args.batch:,} "
              f"transactions ...", flush=True)
        result = asyncio.run(_drive(url, process.pid, bodies[:warm], bodies[warm:], args.concurrency))
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
    expected = sum(min(args.batch, len(transactions) - i) for i in range(warm * args.batch, len(transactions),
                                                                          args.batch))
    if result["accepted"] != expected:
        tail = (workdir / f"node-{threads}.log").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"the node accepted {result['accepted']} of {expected} transactions "
                           f"({result['answers']}); its log ends:\n{tail}")
    result["threads"] = threads
    result["transactions"] = expected
    return result


async def _drive(url: str, pid: int, warmup: list[bytes], bodies: list[bytes], concurrency: int) -> dict[str, Any]:
    import asyncio
    import time

    import aiohttp
    import orjson

    from qmemo.commands.health import wait_ready

    if not (await wait_ready([url], 30.0))[url]:
        raise RuntimeError(f"the node at {url} did not become ready in 30 s")
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
            "event_loop_lag_ms": after["event_loop_lag_ms"]}


def _thread_cpu_s(pid: int) -> dict[str, float]:
    """User + system CPU seconds of process `pid` by thread group (Linux /proc): the event
    loop ("loop": the main thread), the verify pool ("verify"), everything else ("other")."""
    import os

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

def _summarize(args: argparse.Namespace, thread_counts: list[int], runs: list[dict[str, Any]],
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
                                    for label in ("registry_verify", "ctypes_verify")
                                    if label in references and per_cpu}
    speedup = None
    by_threads = {run["threads"]: run for run in runs}
    if 1 in by_threads and 2 in by_threads:
        speedup = by_threads[2]["admitted_per_s"] / by_threads[1]["admitted_per_s"]
    return {
        "schema": SCHEMA,
        "parameters": {"scheme": args.scheme, "txs": args.txs, "warmup": args.warmup, "batch": args.batch,
                       "concurrency": args.concurrency, "threads": thread_counts, "payload_bytes": PAYLOAD_BYTES,
                       "gil_switch_interval_s": args.gil_switch_interval_s},
        "c_baseline": baseline or {"missing": "no results/latest/summary.json; run `qmemo bench c`"},
        "same_run_references": references,
        "admission_breakdown_us_per_tx": breakdown,
        "runs": runs,
        "speedup_2_vs_1_threads": speedup,
        "targets": {"per_cpu_s_vs_c": 0.9, "speedup_2_vs_1": 1.8},
    }


def _print(document: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(Console().width, 132))     # the table's ten columns, unabridged
    baseline = document["c_baseline"]
    table = Table(title=f"qmemo bench node: {document['parameters']['scheme']} admission over loopback "
                        f"(batches of {document['parameters']['batch']}, "
                        f"{document['parameters']['concurrency']} in flight)")
    for column in ("verify threads", "admitted tx/s", "node CPU cores", "tx per node CPU-s", "vs C 1-core",
                   "vs ctypes loop", "CPU us/tx", "loop us/tx", "verify threads us/tx", "client CPU-s"):
        table.add_column(column, justify="right")
    for run in document["runs"]:
        ratio = run["ratio_to_c_single_core"]
        table.add_row(str(run["threads"]), f"{run['admitted_per_s']:,.0f}", f"{run['node_cores_busy']:.2f}",
                      f"{run['admitted_per_cpu_s']:,.0f}", f"{ratio:.0%}" if ratio else "-",
                      f"{run['ratio_to_same_run'].get('ctypes_verify', 0):.0%}",
                      f"{run['node_cpu_us_per_tx']:.1f}", f"{run['cpu_us_per_tx_by_thread']['loop']:.1f}",
                      f"{run['cpu_us_per_tx_by_thread']['verify']:.1f}", f"{run['client_cpu_s']:.2f}")
    console.print(table)
    refs = document["same_run_references"]
    source = baseline.get("source", baseline.get("missing", baseline.get("error")))
    c_rate = f"{baseline['ops_per_s']:,.0f}/s" if "ops_per_s" in baseline else "none"
    console.print(f"C single-core verify: {c_rate} ({source}); same run, one Python thread: "
                  + ", ".join(f"{k} {refs[k]['ops_per_s']:,.0f}/s" for k in ("registry_verify", "ctypes_verify")
                              if k in refs))
    console.print(f"two Python threads verifying at once: {refs['two_threads_verify']['speedup']:.2f}x one "
                  "(the cores this machine really gave us; ~2x when idle)")
    if document["speedup_2_vs_1_threads"]:
        console.print(f"2 vs 1 verify threads: {document['speedup_2_vs_1_threads']:.2f}x")
    console.print("admission steps in-process (us/tx): "
                  + ", ".join(f"{k} {v:.1f}" for k, v in document["admission_breakdown_us_per_tx"].items()))
