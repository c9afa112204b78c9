"""Benchmark: µs per transaction of admission's decode+hash+verify, Python path vs native kernel.

    .venv/bin/python tests/native/bench_admit.py                 # 500 Falcon-512 txs, 15 passes
    .venv/bin/python tests/native/bench_admit.py --txs 500 --passes 30 --out results/admit-kernel.json

On one framed POST /txs body of --txs Falcon-512 transactions (256-byte payloads, spread
over --senders keys), single thread, in the same run, round-robin pass by pass (so a busy
neighbour slows every path alike; GC off during a pass, as timeit does):

  python   what a node does today: decode_frames + Transaction.decode per record (three
           BLAKE3-512 digests through the blake3 package; derive_address's cache warm, as
           in a node that has seen its senders) + the liboqs batch verify (verify_many).
  kernel   AdmitKernel.admit (one native call: frames, decode, digests, liboqs verify)
           + reading every result record with struct.iter_unpack.
  kernel_no_verify / python_decode   the same without the signature checks.

Reported per path: median and best µs per transaction, wall clock and thread CPU time;
the verify calls' own time (each path times its verifies natively), and the ratios.
Every pass checks that both paths agree on every id and verdict. The JSON (machine,
versions, load average) goes to results/ (never committed). Not a test: no pass/fail
on speed.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from qmemo.core.transaction import Transaction, derive_address
from qmemo.crypto.admit_kernel import AdmitKernel, Verdict, blake3_c_version
from qmemo.crypto.schemes import get_scheme
from qmemo.frames import decode_frames, encode_frames
from qmemo.sysinfo import machine_info

SCHEMA = "qmemo-admit-kernel-bench/1"
SCHEME = "Falcon-512"
CHAIN_ID = 1
MAX_COUNT = 100_000


def make_body(count: int, senders: int) -> bytes:
    scheme = get_scheme(SCHEME)
    keys = [scheme.keypair() for _ in range(senders)]
    recipient = derive_address(scheme.info.scheme_id, keys[0].public_key)
    encodings = []
    for i in range(count):
        key = keys[i % senders]
        tx = Transaction(CHAIN_ID, scheme.info.scheme_id, key.public_key, i // senders, recipient, 1, 1,
                         bytes(range(256)))
        encodings.append(tx.signed(lambda digest, secret=key.secret_key: scheme.sign(secret, digest)).encoded)
    return encode_frames(encodings)


def python_path(body: bytes, verify: bool) -> tuple[list[bytes], list[bool], int]:
    """Today's node: frames, Transaction.decode per record, one liboqs batch verify."""
    decode = Transaction.decode
    transactions = [decode(record) for record in decode_frames(body, MAX_COUNT, "transaction")]
    ids = [tx.id for tx in transactions]
    if not verify:
        return ids, [], 0
    valid, durations = get_scheme(SCHEME).verify_many(
        [(tx.public_key, tx.signing_digest, tx.signature) for tx in transactions])
    return ids, valid, sum(durations)


def kernel_path(kernel: AdmitKernel, body: bytes, verify: bool) -> tuple[list[bytes], list[bool], int]:
    """One native call, then every record read (id at 17, verdict at 3, verify_ns at 10)."""
    rows = list(kernel.admit(body, MAX_COUNT, verify=verify).rows())
    return [row[17] for row in rows], [row[3] == Verdict.VALID for row in rows] if verify else [], \
        sum(row[10] for row in rows)


def timed(step: Any) -> tuple[int, int, Any]:
    gc.disable()
    try:
        wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
        result = step()
        return time.perf_counter_ns() - wall, time.thread_time_ns() - cpu, result
    finally:
        gc.enable()


def summarize(samples: list[tuple[int, int, int]], count: int) -> dict[str, float]:
    wall, cpu, verify_ns = (sorted(column) for column in zip(*samples))
    def per_tx_us(ns: float) -> float:
        return ns / count / 1e3

    return {"wall_us_per_tx_median": per_tx_us(statistics.median(wall)), "wall_us_per_tx_best": per_tx_us(wall[0]),
            "cpu_us_per_tx_median": per_tx_us(statistics.median(cpu)), "cpu_us_per_tx_best": per_tx_us(cpu[0]),
            "verify_us_per_tx_median": per_tx_us(statistics.median(verify_ns))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--txs", type=int, default=500, help="transactions in the body (default 500)")
    parser.add_argument("--senders", type=int, default=100, help="keys they are spread over (default 100)")
    parser.add_argument("--passes", type=int, default=15, help="timed passes per path (default 15)")
    parser.add_argument("--out", type=Path, help="JSON file (default: results/admit-kernel-bench-<UTC time>.json)")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    body = make_body(args.txs, args.senders)
    kernel = AdmitKernel(CHAIN_ID, (SCHEME,))
    paths = {
        "python": lambda: python_path(body, True),
        "kernel": lambda: kernel_path(kernel, body, True),
        "python_decode": lambda: python_path(body, False),
        "kernel_no_verify": lambda: kernel_path(kernel, body, False),
    }
    expected_ids, _, _ = python_path(body, False)     # also warms derive_address's cache
    samples: dict[str, list[tuple[int, int, int]]] = {name: [] for name in paths}
    for _ in range(args.passes):
        for name, step in paths.items():
            wall, cpu, (ids, valid, verify_ns) = timed(step)
            if ids != expected_ids or (valid and not all(valid)):
                raise SystemExit(f"{name}: ids or verdicts differ from the Python path's")
            samples[name].append((wall, cpu, verify_ns))
    results = {name: summarize(rows, args.txs) for name, rows in samples.items()}
    medians = {name: r["wall_us_per_tx_median"] for name, r in results.items()}
    cpu = {name: r["cpu_us_per_tx_median"] for name, r in results.items()}
    ratios = {
        "python_over_kernel_wall": medians["python"] / medians["kernel"],
        "python_over_kernel_cpu": cpu["python"] / cpu["kernel"],
        "decode_hash_python_over_kernel_cpu": cpu["python_decode"] / cpu["kernel_no_verify"],
        # Everything but the verify calls (wall clock on both sides: the verifies time themselves so).
        "python_besides_verify_us_per_tx": medians["python"] - results["python"]["verify_us_per_tx_median"],
        "kernel_besides_verify_us_per_tx": medians["kernel"] - results["kernel"]["verify_us_per_tx_median"],
    }
    document = {
        "schema": SCHEMA,
        "command": " ".join([Path(sys.argv[0]).as_posix(), *(sys.argv[1:] if argv is None else argv)]),
        "parameters": {"scheme": SCHEME, "transactions": args.txs, "senders": args.senders, "passes": args.passes,
                       "body_bytes": len(body), "payload_bytes": 256},
        "machine": machine_info(),
        "versions": {"blake3_c": blake3_c_version(),
                     "kernel_verifiers": {str(scheme_id): label for scheme_id, label in kernel.verifiers.items()}},
        "load_average": {"before": load_before, "after": os.getloadavg()},
        "paths": results,
        "ratios": ratios,
    }
    print(f"{args.txs} {SCHEME} transactions, {args.passes} passes, single thread; µs per transaction (median)")
    print(f"{'path':<18}{'wall':>9}{'cpu':>9}{'of which verify':>17}")
    for name, r in results.items():
        print(f"{name:<18}{r['wall_us_per_tx_median']:>9.2f}{r['cpu_us_per_tx_median']:>9.2f}"
              f"{r['verify_us_per_tx_median']:>17.2f}")
    for name, value in ratios.items():
        print(f"{name}: {value:.3f}")
    print(f"load average: {load_before[0]:.2f} before, {document['load_average']['after'][0]:.2f} after")
    out = args.out or Path("results") / f"admit-kernel-bench-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2) + b"\n")
    print(f"saved {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
