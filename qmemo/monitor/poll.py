"""The dashboard's polling loop: fetch every node's /metrics, hand snapshots to the view.

Thin on purpose: all interpretation lives in view.py. A node that does not answer
within the timeout is shown as down and polled again next round; the dashboard never
stops because a node did.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

import orjson

from qmemo.errors import NodeApiError, NodeRefused, NodeUnreachable
from qmemo.monitor.headline_view import WINDOW_S
from qmemo.monitor.view import Baseline, NodePoll, Snapshot, node_rows
from qmemo.net.client import NodeClient, open_clients
from qmemo.paths import RESULTS_DIR
from qmemo.records import to_json


@dataclass(frozen=True, slots=True)
class MonitorConfig:
    node_urls: list[str]
    interval_s: float = 2.0
    timeout_s: float = 1.5
    scheme: str = "Falcon-512"
    target_tps: float | None = None
    generator_status: Path | None = None   # the generator's live.json
    record: Path | None = None             # append every snapshot here (JSON lines)
    baseline_path: Path | None = None      # a bench_c summary.json; default: this machine's best
    results_dir: Path = RESULTS_DIR        # where this machine's C baselines are


NO_BASELINE = "no C baseline of this machine yet: run `.venv/bin/qmemo bench c --verify-only` (about 20 s)"


def load_baseline(config: MonitorConfig) -> Baseline:
    """The C single-core verify rate for the scheme, from the run named by --baseline or
    else this machine's best (qmemo.bench.c_baseline.find_c_baseline); failing that,
    results/latest marked as another machine's, or a pointer to the command that measures one."""
    import datetime

    from qmemo.bench.c_baseline import find_c_baseline, load_c_baseline
    from qmemo.bench import fingerprint
    from qmemo.errors import QmemoError

    try:
        here = fingerprint.current()
    except (QmemoError, OSError):   # no liboqs to fingerprint: nothing can be "this machine's"
        here = None
    baseline = load_c_baseline(config.baseline_path) if config.baseline_path else (
        here and find_c_baseline(config.scheme, here, config.results_dir)) or load_c_baseline(
        config.results_dir / "latest" / "summary.json")
    if baseline is None or not baseline.has_verify_rate(config.scheme):
        return Baseline(None, NO_BASELINE)
    fast = baseline.fast_verifier(config.scheme)
    try:
        started = datetime.datetime.fromisoformat(baseline.created).timestamp()
    except ValueError:
        started = None
    return Baseline(baseline.verify_ops_per_s(config.scheme), str(baseline.path), fast and fast.ops_per_s,
                    run_id=baseline.run_id, measured_at_s=started, kind=baseline.kind,
                    library=baseline.scheme(config.scheme).library,
                    this_machine=here is not None and baseline.summary.fingerprint == here,
                    fast_applies=config.scheme.startswith("Falcon"), busy_load=baseline.busy_load)


async def poll_node(client: NodeClient) -> NodePoll:
    """One node's /metrics now, or why there is none (down, refusing, another version)."""
    try:
        return NodePoll(client.url, time.time(), await client.metrics())
    except NodeUnreachable as exc:
        return NodePoll(client.url, time.time(), None, exc.transport)
    except NodeRefused as exc:
        return NodePoll(client.url, time.time(), None, f"HTTP {exc.node_status} {exc.node_code}")
    except NodeApiError as exc:
        return NodePoll(client.url, time.time(), None, str(exc))


def read_generator_status(path: Path | None) -> dict | None:
    if path is None:
        return None
    try:
        return orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):  # not written yet, or mid-rename
        return None


async def snapshots(config: MonitorConfig, *, rounds: int | None = None):
    """Yield a Snapshot every interval (forever, or `rounds` times)."""
    baseline = load_baseline(config)
    previous: Snapshot | None = None
    async with open_clients(config.node_urls, config.timeout_s) as clients:
        count = 0
        while rounds is None or count < rounds:
            started = time.monotonic()
            polls = await asyncio.gather(*(poll_node(client) for client in clients))
            now = time.time()
            snapshot = Snapshot(now, list(polls), baseline, config.target_tps,
                                read_generator_status(config.generator_status),
                                previous=previous and _keep_window(previous, WINDOW_S - (now - previous.time_s)))
            if config.record:
                _record(config.record, snapshot)
            yield snapshot
            previous = snapshot
            count += 1
            if rounds is None or count < rounds:
                await asyncio.sleep(max(0.0, config.interval_s - (time.monotonic() - started)))


def _keep_window(snapshot: Snapshot, window_s: float = WINDOW_S) -> Snapshot:
    """Keep the snapshots of the last `window_s` (the headline's committed rate spans them,
    qmemo.monitor.headline_view), not the whole chain."""
    earlier = snapshot.previous
    kept = _keep_window(earlier, window_s - (snapshot.time_s - earlier.time_s)) \
        if earlier is not None and snapshot.time_s - earlier.time_s <= window_s else None
    return Snapshot(snapshot.time_s, snapshot.polls, snapshot.baseline, snapshot.target_tps, snapshot.generator,
                    previous=kept)


def _record(path: Path, snapshot: Snapshot) -> None:
    line = {
        "time_s": snapshot.time_s,
        "target_tps": snapshot.target_tps,
        "polls": [{"url": p.url, "time_s": p.time_s, "error": p.error, "metrics": to_json(p.metrics)}
                  for p in snapshot.polls],
        "rows": [dataclasses.asdict(row) for row in node_rows(snapshot)],
        "generator": snapshot.generator,
    }
    with path.open("ab") as out:
        out.write(orjson.dumps(line) + b"\n")
