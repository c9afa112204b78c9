"""`qmemo scenario propagation`: how long a full block takes to reach the other nodes, per link profile.

Runs `scenarios/propagation.toml` (3 nodes, blocks of max_block_transactions = 4,000
Falcon-512 transactions every 8 s) once per profile, every pair of nodes on that
profile, as an ordinary scenario run (hosts, links, load, invariants); then reads the
nodes' logs. For every full block: the time from the producer's "produced block" line
to each other node's "applied block" line for the same block (same machine, one clock).
That span holds the producer's storing of the block (it is stored before it is pushed),
its encoding, the transfer over the shaped link, and the peer's decode, validation
(signatures already verified when the transactions were relayed: cache hits) and apply
- not the peer's own storing. `propagation.json` holds the figures per profile with the
profile's facts, and the report sets them against its model (qmemo.analysis.report_scenario).

Never a figure it did not measure: a profile whose run produced no full block says so.
"""

from __future__ import annotations

import dataclasses
import re
import statistics
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from qmemo.scenario.manifest import Manifest

SCHEMA = "qmemo-scenario-propagation/1"
PROFILES = ("lan", "continental", "intercontinental")
# intake.py's line: "<time> node-i INFO qmemo.node: produced|applied block H (hash16.., N txs, validator V, ..."
_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) (\S+) \w+ [\w.]+: (produced|applied) block (\d+) "
                   r"\(([0-9a-f]+)\.\., (\d+) txs")


@dataclass(frozen=True, slots=True)
class BlockEvent:
    node: str
    what: str            # produced | applied
    height: int
    hash_prefix: str
    transactions: int
    time_s: float        # wall time (the log's local clock)


def parse_log(lines: Iterable[str]) -> list[BlockEvent]:
    events = []
    for line in lines:
        match = _LINE.match(line)
        if match:
            stamp, node, what, height, prefix, txs = match.groups()
            when = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()
            events.append(BlockEvent(node, what, int(height), prefix, int(txs), when))
    return events


def propagation_delays(events: Sequence[BlockEvent], full: int) -> list[tuple[int, str, str, float]]:
    """(height, producer, peer, seconds) for every block of `full` transactions and every
    node that applied it. A block applied again after a restart counts once (its first)."""
    applied: dict[tuple[str, int, str], float] = {}
    for event in events:
        if event.what == "applied":
            key = (event.node, event.height, event.hash_prefix)
            applied[key] = min(applied.get(key, event.time_s), event.time_s)
    delays = []
    for event in events:
        if event.what != "produced" or event.transactions != full:
            continue
        for (node, height, prefix), when in applied.items():
            if height == event.height and prefix == event.hash_prefix and node != event.node:
                delays.append((event.height, event.node, node, when - event.time_s))
    return sorted(delays)


def summarize(profile: str, facts: dict[str, Any], links: str, delays: Sequence[tuple[int, str, str, float]],
              run_dir: Path) -> dict[str, Any]:
    seconds = sorted(d for *_, d in delays)
    entry: dict[str, Any] = {"profile": profile, "links": links, "profile_facts": facts, "run_dir": str(run_dir),
                             "samples": len(seconds), "blocks": len({h for h, *_ in delays})}
    if seconds:
        entry.update(median_s=statistics.median(seconds), min_s=seconds[0], max_s=seconds[-1],
                     p90_s=seconds[min(len(seconds) - 1, int(0.9 * len(seconds)))],
                     pairs=[{"height": h, "from": a, "to": b, "s": round(s, 4)} for h, a, b, s in delays])
    return entry


def block_bytes(run_dir: Path, height: int) -> int:
    """The encoded size of block `height` from node-0's store (read after the run)."""
    from qmemo.crypto.verifier import load_genesis
    from qmemo.node.store import ChainStore

    devnet = run_dir / "devnet"
    with ChainStore(devnet / "data" / "node-0" / "chain.sqlite", load_genesis(devnet / "genesis.json")) as store:
        block = store.block(height)
        return len(block.encode()) if block else 0


def measure(run_dir: Path, manifest: Manifest, links: str) -> dict[str, Any]:
    """The figures of one finished run of the propagation manifest."""
    events = [e for path in sorted((run_dir / "logs").glob("node-*.log"))
              for e in parse_log(path.read_text(errors="replace").splitlines())]
    full = manifest.chain.max_block_transactions
    delays = propagation_delays(events, full)
    profile = manifest.network.default_profile
    facts = {key: value for key, value in dataclasses.asdict(manifest.profiles[profile]).items() if key != "name"}
    entry = summarize(profile, facts, links, delays, run_dir)
    entry["block_bytes"] = block_bytes(run_dir, delays[0][0]) if delays else None
    return entry


def write(out: Path, manifest: Manifest, entries: list[dict[str, Any]], command: str) -> Path:
    sizes = [e["block_bytes"] for e in entries if e.get("block_bytes")]
    document = {
        "schema": SCHEMA, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "command": command,
        "scheme": manifest.chain.scheme, "transactions": manifest.chain.max_block_transactions,
        "block_bytes": round(statistics.median(sizes)) if sizes else None,
        "note": "Measured from the producer's \"produced block\" log line to each peer's \"applied block\" line "
                "(one machine, one clock): the producer's storing and encoding, the transfer, the peer's decode, "
                "validation and apply. Under `--links relay` the delay is added per chunk in user space: TCP's "
                "slow start over the real round trip is not reproduced, so WAN figures are a lower bound.",
        "profiles": entries,
    }
    path = out / "propagation.json"
    path.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    return path
