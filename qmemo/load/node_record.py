"""A run's `nodes.json` ("qmemo-run-nodes/1"): what the nodes did during one generator run.

Why a file of its own: the summary says what the generator saw (latencies, outcomes);
comparing schemes also needs what the nodes spent on it - CPU, verification time, the
bytes each block carried - and a sweep run against devnet.sh --no-load has no
dashboard recording. So the generator keeps every node's `/metrics` document (docs/api.md)
from just before its first send and from the end of its wait for commits, and, for every
block its follower saw, how many transactions it held and how many bytes of ours. The
report (qmemo.analysis.scheme_ab) takes differences of the two documents; nothing is
computed here.

Pure: the schema, `block_bytes` and the read/write at the bottom.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from qmemo.api_schema import MetricsSnapshot
from qmemo.frames import decode_frames
from qmemo.records import read_record, write_record

NODES_SCHEMA = "qmemo-run-nodes/1"
NODES_FILE = "nodes.json"


@dataclass(frozen=True, slots=True)
class NodeEnds:
    """One node's /metrics at the start and at the end of the run (None: it did not answer),
    the document as the node wrote it (qmemo.api_schema.MetricsSnapshot)."""

    url: str
    start: MetricsSnapshot | None
    end: MetricsSnapshot | None


@dataclass(frozen=True, slots=True)
class BlockSeen:
    height: int
    tx_count: int          # every transaction in the block
    ours: int              # those of this run
    our_tx_bytes: int      # their encoded size (the bytes POST /txs carried for each)


@dataclass(frozen=True, slots=True)
class RunNodes:
    schema: str
    scheme: str | None     # the chain's signature scheme, as the nodes report it
    nodes: tuple[NodeEnds, ...]
    blocks: tuple[BlockSeen, ...]


def tx_sizes(bodies: Sequence[tuple[int, bytes]], count: int) -> list[int]:
    """Each planned transaction's encoded size, from the framed request bodies
    ((first index, body) per batch) that carry them."""
    sizes = [0] * count
    for first, body in bodies:
        for offset, record in enumerate(decode_frames(body, max_count=len(body))):
            sizes[first + offset] = len(record)
    return sizes


def scheme_of(nodes: Sequence[NodeEnds]) -> str | None:
    """The scheme the first answering node reports."""
    for node in nodes:
        for document in (node.end, node.start):
            if document is not None:
                return document.scheme
    return None


def write_nodes(path: Path, record: RunNodes) -> None:
    write_record(path, record)


def read_nodes(path: Path) -> RunNodes:
    """The record at `path`; FileNotFoundError if absent, DecodeError if not this schema."""
    return read_record(RunNodes, NODES_SCHEMA, path, "a run's nodes record")
