"""Adversarial floods, sent from the attacker's namespace: `python -m qmemo.scenario.flood ...`.

Three kinds, each at a fixed rate for a fixed time, open loop (sends never wait for
answers; past `MAX_IN_FLIGHT` outstanding requests a batch is skipped and counted):

- invalid-signature: transactions from funded attacker accounts at their next nonce,
  with a well-formed signature over another message, so each one passes every cheap
  check and costs the node a full signature verification before `bad_signature`;
- held-queue: never-funded keys, nonces 1..64 (nonce 0 never comes), validly signed:
  the node's held queue and its verification pool are the target;
- held-queue-funded: the same from the attacker's funded accounts (a balance to pass the
  feasibility check), each round over nonces 1..64 with a new payload;
- oversized-block: a block on the current tip with one transaction more than the chain
  allows, sent to `POST /peer/block` - the node must read and decode it to refuse it.

Everything is built before the start time, so the flood's own signing never slows its
rate. The answers (per HTTP status and per rejection code) go to `--out` as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson

from qmemo.api_schema import BlockSummary
from qmemo.errors import DecodeError, NodeApiError, NodeUnreachable
from qmemo.net.client import NodeClient, open_clients

BATCH = 50
MAX_IN_FLIGHT = 32
HELD_NONCES = 64         # the node holds up to 64 nonces ahead of a sender's next one


def _transactions_invalid_signature(keys, genesis, count: int) -> list[bytes]:
    from qmemo.core.transaction import Transaction, derive_address
    from qmemo.crypto.schemes import get_scheme

    scheme = get_scheme(keys[0].scheme)
    scheme_id = scheme.info.scheme_id
    # One real signature per account, over an unrelated message: well-formed, never valid here.
    signatures = [scheme.sign(key.secret_key, b"qmemo flood: not this transaction") for key in keys]
    recipient = derive_address(scheme_id, keys[0].public_key)
    out = []
    for i in range(count):
        key = keys[i % len(keys)]
        tx = Transaction(genesis.chain_id, scheme_id, key.public_key, 0, recipient, 1, 1,
                         i.to_bytes(8, "big") * 8, signatures[i % len(keys)])
        out.append(tx.encoded)
    return out


def _transactions_held_queue(scheme_name: str, genesis, count: int, funded_keys=None) -> list[bytes]:
    """`count` transactions at nonces 1..64: from fresh keys, or round after round from `funded_keys`."""
    from qmemo.core.transaction import Transaction
    from qmemo.crypto.schemes import get_scheme

    scheme = get_scheme(scheme_name)
    scheme_id = scheme.info.scheme_id
    senders = -(-count // HELD_NONCES)
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        if funded_keys:
            pairs = [funded_keys[k % len(funded_keys)] for k in range(senders)]
        else:
            pairs = list(pool.map(lambda _: scheme.keypair(), range(senders)))

        def sign(i: int) -> bytes:
            pair = pairs[i // HELD_NONCES]
            round_number = (i // HELD_NONCES) // len(funded_keys) if funded_keys else 0
            tx = Transaction(genesis.chain_id, scheme_id, pair.public_key, 1 + i % HELD_NONCES, bytes(32), 1, 1,
                             round_number.to_bytes(8, "big") * 8)
            return tx.signed(lambda digest: scheme.sign(pair.secret_key, digest)).encoded

        return list(pool.map(sign, range(count), chunksize=256))


def _oversized_block(genesis, tip: BlockSummary, filler: bytes) -> bytes:
    """One transaction over the limit, on `tip` (a /block/latest answer), stamped at the primary's turn.

    Stamped at the parent's timestamp plus one interval, so the timestamp rule does not
    refuse it before its size is looked at.
    """
    from qmemo.core.block import make_block
    from qmemo.core.transaction import Transaction

    template = Transaction.decode(filler)
    count = genesis.max_block_transactions + 1
    txs = [Transaction(template.chain_id, template.scheme_id, template.public_key, n, template.recipient, 1, 1,
                       template.payload, template.signature) for n in range(count)]
    height = tip.height + 1
    producer = (height - 1) % len(genesis.validators)
    return make_block(chain_id=genesis.chain_id, height=height, previous_hash=tip.hash,
                      timestamp_ms=tip.timestamp_ms + genesis.block_interval_ms, producer_index=producer,
                      transactions=txs,
                      sign=lambda digest: bytes(666)).encode()


async def _flood(args: argparse.Namespace) -> dict:
    from qmemo.crypto.keys import load_keys
    from qmemo.net.wire import encode_tx_batch
    from qmemo.crypto.verifier import load_genesis

    genesis = load_genesis(args.genesis)
    keys = load_keys(args.keys)
    per_request = 1 if args.kind == "oversized-block" else BATCH
    requests = max(1, round(args.rate * args.duration / per_request))
    if args.kind == "invalid-signature":
        encodings = _transactions_invalid_signature(keys, genesis, requests * BATCH)
    elif args.kind == "held-queue":
        encodings = _transactions_held_queue(keys[0].scheme, genesis, requests * BATCH)
    elif args.kind == "held-queue-funded":
        encodings = _transactions_held_queue(keys[0].scheme, genesis, requests * BATCH, funded_keys=keys)
    else:
        encodings = _transactions_invalid_signature(keys, genesis, 1)
    bodies = [encode_tx_batch(encodings[i * BATCH:(i + 1) * BATCH]) for i in range(requests)] \
        if args.kind != "oversized-block" else []
    answers: Counter[str] = Counter()
    codes: Counter[str] = Counter()
    sent = skipped = 0
    in_flight: set[asyncio.Task] = set()

    async def post(client: NodeClient, body: bytes, block: bool) -> None:
        try:
            answer = await (client.post_peer_block(body) if block else client.post_txs(body))
            answers[str(answer.status)] += 1
            if answer.status != 200:
                codes[answer.error() or "?"] += 1
            elif block:
                codes[answer.block_answer().status] += 1
            else:
                for result in answer.results():
                    codes[result.code or result.status] += 1
        except NodeUnreachable as exc:
            answers[exc.transport] += 1
        except DecodeError:
            answers["unreadable"] += 1

    interval = per_request / args.rate
    delay = args.start_at - time.time()
    if delay > 0:
        await asyncio.sleep(delay)
    started = time.monotonic()
    async with open_clients(args.nodes, timeout_s=30) as clients:
        for k in range(requests):
            due = started + k * interval
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            if len(in_flight) >= MAX_IN_FLIGHT:
                skipped += 1
                continue
            client = clients[k % len(clients)]
            if args.kind == "oversized-block":
                try:
                    tip = await client.latest_block()
                except NodeApiError:
                    answers["tip_unavailable"] += 1
                    continue
                body = _oversized_block(genesis, tip, encodings[0])
            else:
                body = bodies[k]
            task = asyncio.ensure_future(post(client, body, args.kind == "oversized-block"))
            in_flight.add(task)
            task.add_done_callback(in_flight.discard)
            sent += 1
        sending_s = time.monotonic() - started
        if in_flight:
            await asyncio.wait(in_flight, timeout=30)
    return {"kind": args.kind, "rate": args.rate, "duration_s": args.duration, "requests_planned": requests,
            "requests_sent": sent, "requests_skipped_in_flight_cap": skipped,
            "per_request": per_request, "sending_s": sending_s, "http": dict(answers), "outcomes": dict(codes)}


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m qmemo.scenario.flood", description=__doc__.splitlines()[0])
    parser.add_argument("--kind", required=True, choices=("invalid-signature", "held-queue", "held-queue-funded", "oversized-block"))
    parser.add_argument("--rate", type=float, required=True, help="transactions (or blocks) per second")
    parser.add_argument("--duration", type=float, required=True)
    parser.add_argument("--start-at", type=float, required=True, help="Unix time to start sending")
    parser.add_argument("--nodes", type=lambda s: s.split(","), required=True)
    parser.add_argument("--genesis", type=Path, required=True)
    parser.add_argument("--keys", type=Path, required=True, help="the attacker's funded accounts")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    report = asyncio.run(_flood(args))
    args.out.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))
    print(orjson.dumps(report).decode())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
