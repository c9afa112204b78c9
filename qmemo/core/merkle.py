"""The BLAKE3-512 Merkle tree over a block's transaction ids, and inclusion proofs.

Construction (docs/protocol.md, "Merkle tree"):
- leaf  = H(MERKLE_LEAF, tx_id)
- node  = H(MERKLE_NODE, left || right)
- the leaves are padded up to a power of two with EMPTY_LEAF = H(MERKLE_EMPTY, "")
  (a value no leaf can take: it lives in its own domain);
- root  = H(MERKLE_ROOT, u32 leaf_count (little-endian) || top of the padded tree).
  No transactions: root = H(MERKLE_ROOT, 0 || EMPTY_LEAF).

Why this shape: Bitcoin's tree duplicates the last node of an odd level, so [a, b, c]
and [a, b, c, c] share a root (CVE-2012-2459) and a node can be fooled into rejecting
a valid block. Here a padded slot holds EMPTY_LEAF, never a copy; leaves and inner
nodes are hashed under different domains, so an inner node cannot pose as a leaf (or
the reverse) to shorten or lengthen a proof; and the root commits to the leaf count.

Padding costs nothing: a level with an odd number of nodes is completed with the
precomputed root of an empty subtree of that height, never by hashing empty leaves.

Pure: no I/O.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from qmemo.core.codec import U32_MAX, expect_object, int_field, parse_hex
from qmemo.core.hashing import DIGEST_BYTES, Domain, blake3_512, hasher_factory
from qmemo.errors import DecodeError, Misuse

EMPTY_LEAF = blake3_512(Domain.MERKLE_EMPTY)
MAX_DEPTH = 32                     # leaf_count is a u32, so a tree is at most 2^32 wide
_COUNT = struct.Struct("<I")
_new_leaf_hasher = hasher_factory(Domain.MERKLE_LEAF)
_new_node_hasher = hasher_factory(Domain.MERKLE_NODE)


def leaf_hash(tx_id: bytes) -> bytes:
    hasher = _new_leaf_hasher()
    hasher.update(tx_id)
    return hasher.digest(DIGEST_BYTES)


def node_hash(left: bytes, right: bytes) -> bytes:
    hasher = _new_node_hasher()
    hasher.update(left)
    hasher.update(right)
    return hasher.digest(DIGEST_BYTES)


# EMPTY_SUBTREE[k]: the top of a subtree of 2^k empty leaves.
EMPTY_SUBTREE: tuple[bytes, ...] = (EMPTY_LEAF,)
for _ in range(MAX_DEPTH):
    EMPTY_SUBTREE += (node_hash(EMPTY_SUBTREE[-1], EMPTY_SUBTREE[-1]),)


def tree_depth(leaf_count: int) -> int:
    """Levels above the leaves: log2 of the padded width (0 for 0 or 1 leaf)."""
    return (leaf_count - 1).bit_length() if leaf_count > 1 else 0


def _seal(leaf_count: int, top: bytes) -> bytes:
    """The root: the padded tree's top bound to the number of real leaves."""
    return blake3_512(Domain.MERKLE_ROOT, _COUNT.pack(leaf_count), top)


def _next_level(nodes: list[bytes], height: int) -> list[bytes]:
    """Pair up one level, completing an odd level with the empty subtree of that height."""
    if len(nodes) % 2:
        nodes.append(EMPTY_SUBTREE[height])
    return [node_hash(nodes[i], nodes[i + 1]) for i in range(0, len(nodes), 2)]


def merkle_root(tx_ids: Sequence[bytes]) -> bytes:
    """The root committing to `tx_ids` in order (and to how many there are)."""
    if len(tx_ids) > U32_MAX:
        # The leaf count is committed as a u32, and a block counts its transactions in one:
        # no decoded block can get here, so a caller that does has a bug (500, not 422).
        raise Misuse("a Merkle tree holds at most 2^32 - 1 leaves", code="too_many_leaves")
    nodes = [leaf_hash(tx_id) for tx_id in tx_ids] or [EMPTY_LEAF]
    height = 0
    while len(nodes) > 1:
        nodes = _next_level(nodes, height)
        height += 1
    return _seal(len(tx_ids), nodes[0])


@dataclass(frozen=True, slots=True)
class MerkleProof:
    """The path from one leaf to the root: its index, the leaf count, and the siblings
    from the leaf level upwards."""

    index: int
    leaf_count: int
    siblings: tuple[bytes, ...]

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "leaf_count": self.leaf_count,
                "siblings": [sibling.hex() for sibling in self.siblings]}

    @classmethod
    def from_json(cls, obj: Any) -> MerkleProof:
        what = "merkle proof"
        obj = expect_object(obj, _PROOF_KEYS, what)
        siblings = obj["siblings"]
        if not isinstance(siblings, list) or len(siblings) > MAX_DEPTH:
            raise DecodeError(f"{what}.siblings must be a list of at most {MAX_DEPTH} hashes", code="malformed")
        return cls(
            index=int_field(obj, "index", U32_MAX, what),
            leaf_count=int_field(obj, "leaf_count", U32_MAX, what),
            siblings=tuple(parse_hex(s, f"{what}.siblings[{i}]", length=DIGEST_BYTES) for i, s in enumerate(siblings)),
        )


_PROOF_KEYS = frozenset(("index", "leaf_count", "siblings"))


def merkle_proof(tx_ids: Sequence[bytes], index: int) -> MerkleProof:
    """The inclusion proof of `tx_ids[index]`. The caller found the transaction at `index`:
    an index outside the list is our bug (Misuse, 500), not a transaction the client asked
    for that we lack (that is NotFound, decided before a proof is built)."""
    if not 0 <= index < len(tx_ids):
        raise Misuse(f"no leaf {index} among {len(tx_ids)}", code="no_such_leaf")
    nodes = [leaf_hash(tx_id) for tx_id in tx_ids]
    siblings = []
    position, height = index, 0
    while len(nodes) > 1:
        sibling = position ^ 1
        siblings.append(nodes[sibling] if sibling < len(nodes) else EMPTY_SUBTREE[height])
        nodes = _next_level(nodes, height)
        position, height = position // 2, height + 1
    return MerkleProof(index, len(tx_ids), tuple(siblings))


def merkle_proofs(tx_ids: Sequence[bytes], indices: Sequence[int]) -> list[MerkleProof]:
    """The inclusion proofs of `tx_ids[i]` for each i in `indices`, from one pass over the
    tree: a source shard proves every cross-shard transfer of a block at once (n leaves, n
    node hashes), where one `merkle_proof` per index would build the tree each time."""
    for index in indices:
        if not 0 <= index < len(tx_ids):
            raise Misuse(f"no leaf {index} among {len(tx_ids)}", code="no_such_leaf")
    siblings: list[list[bytes]] = [[] for _ in indices]
    positions = list(indices)
    nodes = [leaf_hash(tx_id) for tx_id in tx_ids]
    height = 0
    while len(nodes) > 1:
        for k, position in enumerate(positions):
            sibling = position ^ 1
            siblings[k].append(nodes[sibling] if sibling < len(nodes) else EMPTY_SUBTREE[height])
            positions[k] = position // 2
        nodes = _next_level(nodes, height)
        height += 1
    return [MerkleProof(index, len(tx_ids), tuple(path)) for index, path in zip(indices, siblings)]


def verify_proof(root: bytes, tx_id: bytes, proof: MerkleProof) -> bool:
    """True only if `proof` shows `tx_id` at `proof.index` under `root`; never raises."""
    if not 0 <= proof.index < proof.leaf_count <= U32_MAX or len(proof.siblings) != tree_depth(proof.leaf_count):
        return False
    node = leaf_hash(tx_id)
    position = proof.index
    for sibling in proof.siblings:
        node = node_hash(sibling, node) if position & 1 else node_hash(node, sibling)
        position >>= 1
    return _seal(proof.leaf_count, node) == root
