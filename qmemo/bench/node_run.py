"""`qmemo bench node`, one node run: a fresh `qmemo node` subprocess with N verify threads,
a warm-up, then the pre-framed `POST /txs` bodies sent over loopback with a fixed number
of requests in flight. Measured over the timed span: wall time, the node's CPU time by
thread group (qmemo.bench.proc_cpu), the client's CPU time, and the node's own verify
counters from /metrics. Every timed transaction must be accepted.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import orjson

from qmemo.bench.node_setup import TXS_PER_ACCOUNT, BenchDevnet
from qmemo.bench.proc_cpu import thread_cpu_s
from qmemo.core.transaction import Transaction
from qmemo.devnet.files import GENESIS_FILE, validator_key_file
from qmemo.devnet.health import wait_ready
from qmemo.errors import BenchmarkError
from qmemo.load.answers import door_retry_s
from qmemo.net.client import NodeClient, base_url, open_clients
from qmemo.net.wire import encode_tx_batch
from qmemo.records import to_json

NODE_READY_S = 30.0     # a node that is not answering /health by then has failed to start


# Something run against the node through the timed span, given its host and port: a context
# manager whose value (a dictionary of what it did) goes into the run's figures as "disturbance".
Disturbance = Callable[[str, int], AbstractContextManager[dict[str, Any]]]


def run_node(workdir: Path, devnet: BenchDevnet, transactions: list[Transaction], threads: int, *,
             batch: int, warmup: int, concurrency: int, gil_switch_interval_s: float | None,
             verifier: str, progress: Callable[[str], None], round_: int = 0,
             disturb: Disturbance | None = None, label: str = "",
             node_settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """One node run with `threads` verify threads (0: verify inline), a fresh node for
    round `round_` (and `label`, where one round runs several nodes of one thread count);
    its measured figures. `disturb`, if given, runs through the timed span; `node_settings`
    are NodeConfig settings for the node besides the benchmark's own."""
    tag = f"{threads}-{round_}{'-' + label if label else ''}"
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    node_config = workdir / f"node-{tag}.json"
    settings = {"mempool_max_txs": 10 * len(transactions), "mempool_max_bytes": 1 << 34,
                "mempool_max_per_sender": 10 * TXS_PER_ACCOUNT}
    if gil_switch_interval_s is not None:
        settings["gil_switch_interval_s"] = gil_switch_interval_s
    settings.update(node_settings or {})
    node_config.write_bytes(orjson.dumps(settings))
    log = (workdir / f"node-{tag}.log").open("wb")
    qmemo = Path(sys.executable).with_name("qmemo")
    process = subprocess.Popen(
        [str(qmemo), "node", "--genesis", str(devnet.dir / GENESIS_FILE),
         "--key", str(devnet.dir / validator_key_file(0)), "--data", str(workdir / f"data-{tag}"),
         "--port", str(port), "--verify-threads", str(threads), "--config", str(node_config),
         "--verifier", verifier, "--log-level", "WARNING"],
        stdout=log, stderr=subprocess.STDOUT)
    url = base_url("127.0.0.1", port)
    bodies = [encode_tx_batch([tx.encoded for tx in transactions[i:i + batch]])
              for i in range(0, len(transactions), batch)]
    warm = -(-warmup // batch)
    try:
        progress(f"node with {threads} verify thread(s), round {round_ + 1}: admitting {len(transactions) - warm * batch:,} "
                 "transactions ...")
        result = asyncio.run(_drive(url, process.pid, bodies[:warm], bodies[warm:], concurrency,
                                    None if disturb is None else lambda: disturb("127.0.0.1", port)))
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
    expected = sum(min(batch, len(transactions) - i)
                   for i in range(warm * batch, len(transactions), batch))
    if result["accepted"] != expected:
        tail = (workdir / f"node-{tag}.log").read_text(errors="replace")[-2000:]
        raise BenchmarkError(f"the node accepted {result['accepted']} of {expected} transactions "
                           f"({result['answers']}); its log ends:\n{tail}")
    if result["verifier"] != verifier:
        raise BenchmarkError(f"the node verified with {result['verifier']!r}, not {verifier!r}")
    result["threads"] = threads
    result["round"] = round_
    result["transactions"] = expected
    return result


async def _drive(url: str, pid: int, warmup: list[bytes], bodies: list[bytes], concurrency: int,
                 disturb: Callable[[], AbstractContextManager[dict[str, Any]]] | None) -> dict[str, Any]:
    if not (await wait_ready([url], NODE_READY_S))[url]:
        raise BenchmarkError(f"the node at {url} did not become ready in {NODE_READY_S:g} s")
    answers: dict[str, int] = {}
    accepted = 0

    async def post(client: NodeClient, body: bytes) -> None:
        nonlocal accepted
        answer = await client.post_txs(body)
        # A busy door (qmemo.node.door) refused it unread: send it again after the wait it asked for.
        while (wait_s := door_retry_s(answer.status, answer.body)) is not None:
            answers["busy"] = answers.get("busy", 0) + 1
            await asyncio.sleep(wait_s)
            answer = await client.post_txs(body)
        key = str(answer.status)
        answers[key] = answers.get(key, 0) + 1
        if answer.status == 200:
            accepted += answer.counts().accepted

    async def send_all(client: NodeClient, batch: list[bytes]) -> None:
        queue = list(reversed(batch))

        async def worker() -> None:
            while queue:
                await post(client, queue.pop())

        await asyncio.gather(*(worker() for _ in range(concurrency)))

    async with open_clients([url], timeout_s=300) as (client,):
        await send_all(client, warmup)
        with disturb() if disturb is not None else contextlib.nullcontext({}) as disturbance:
            before = await client.metrics()
            accepted = 0
            cpu_before, client_before = thread_cpu_s(pid), time.process_time()
            started = time.perf_counter()
            await send_all(client, bodies)
            wall_s = time.perf_counter() - started
            cpu_after, client_s = thread_cpu_s(pid), time.process_time() - client_before
            threads_s = {group: cpu_after.get(group, 0.0) - cpu_before.get(group, 0.0) for group in cpu_after}
            cpu_s = sum(threads_s.values())
            after = await client.metrics()
    stages_before, stages_after = before.stages, after.stages
    return {"accepted": accepted, "answers": answers, "wall_s": wall_s, "node_cpu_s": cpu_s,
            "node_cpu_s_by_thread": threads_s, "client_cpu_s": client_s,
            "verify_calls": after.verify.count["admission"] - before.verify.count["admission"],
            "verify_s": after.verify.seconds["admission"] - before.verify.seconds["admission"],
            "verify_latency_us": after.verify.latency_us,
            "verifier": after.verify.verifier, "key_cache": to_json(after.verify.key_cache),
            "event_loop": after.process.event_loop, "open_fds": after.process.open_fds,
            "disturbance": dict(disturbance),
            "event_loop_lag_ms": to_json(after.event_loop_lag_ms),
            "stages_cpu_s": {name: stages_after.by_stage[name].cpu_s - figure.cpu_s
                             for name, figure in stages_before.by_stage.items()},
            "other_on_loop_cpu_s": (stages_after.other_on_loop_cpu_s or 0.0) - (stages_before.other_on_loop_cpu_s or 0.0)}
