/*
 * qmemo_admit_merkle.c - the BLAKE3-512 Merkle root of a block's transaction ids, in C.
 *
 * The same tree as qmemo/core/merkle.py (docs/protocol.md, "Merkle tree"), which stays the
 * reference: leaf = H(MERKLE_LEAF, id), node = H(MERKLE_NODE, left || right), an odd level
 * completed with the root of an empty subtree of its height (never a copy of a node), and
 * root = H(MERKLE_ROOT, u32 LE leaf count || top). tests/unit/test_ledger_blocks.py checks
 * this function against merkle_root on every count from 0 to past a few powers of two.
 *
 * Why here: the node computes a root for every block it builds and every block it
 * receives, two BLAKE3-512 hashes per transaction - in Python, with an object per digest,
 * that cost more than a transaction's whole storage. BLAKE3's C code is already in this
 * library for the admission kernel's digests.
 */
#include "qmemo_admit.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "blake3.h"

/* The derive_key contexts of qmemo/core/hashing.py's Domain: part of the protocol. */
static const char CONTEXT_LEAF[] = "qMEMO v1 merkle leaf";
static const char CONTEXT_NODE[] = "qMEMO v1 merkle node";
static const char CONTEXT_EMPTY[] = "qMEMO v1 merkle empty leaf";
static const char CONTEXT_ROOT[] = "qMEMO v1 merkle root";

#define MAX_DEPTH 32 /* the leaf count is a u32: a tree is at most 2^32 wide */

static blake3_hasher proto_leaf, proto_node, proto_root;
/* empty_subtree[k]: the top of a subtree of 2^k empty leaves (EMPTY_SUBTREE in merkle.py). */
static uint8_t empty_subtree[MAX_DEPTH + 1][QMEMO_DIGEST_BYTES];
static pthread_once_t merkle_once = PTHREAD_ONCE_INIT;

/* A fresh hasher from an initialised prototype: copies only what precedes the CV stack,
 * which a fresh hasher never reads (as qmemo_admit.c does). */
static void from_proto(blake3_hasher *hasher, const blake3_hasher *proto) {
	memcpy(hasher, proto, offsetof(blake3_hasher, cv_stack));
}

static void hash_node(const uint8_t *left, const uint8_t *right, uint8_t *out) {
	blake3_hasher hasher;
	uint8_t both[2 * QMEMO_DIGEST_BYTES];
	memcpy(both, left, QMEMO_DIGEST_BYTES);
	memcpy(both + QMEMO_DIGEST_BYTES, right, QMEMO_DIGEST_BYTES);
	from_proto(&hasher, &proto_node);
	blake3_hasher_update(&hasher, both, sizeof both);
	blake3_hasher_finalize(&hasher, out, QMEMO_DIGEST_BYTES);
}

static void init_merkle(void) {
	blake3_hasher empty;
	blake3_hasher_init_derive_key(&proto_leaf, CONTEXT_LEAF);
	blake3_hasher_init_derive_key(&proto_node, CONTEXT_NODE);
	blake3_hasher_init_derive_key(&proto_root, CONTEXT_ROOT);
	blake3_hasher_init_derive_key(&empty, CONTEXT_EMPTY);
	blake3_hasher_finalize(&empty, empty_subtree[0], QMEMO_DIGEST_BYTES);
	for (int k = 1; k <= MAX_DEPTH; k++) {
		hash_node(empty_subtree[k - 1], empty_subtree[k - 1], empty_subtree[k]);
	}
}

static void seal(uint32_t leaf_count, const uint8_t *top, uint8_t *root) {
	blake3_hasher hasher;
	uint8_t count[4] = {(uint8_t) leaf_count, (uint8_t) (leaf_count >> 8), (uint8_t) (leaf_count >> 16),
	                    (uint8_t) (leaf_count >> 24)};
	from_proto(&hasher, &proto_root);
	blake3_hasher_update(&hasher, count, sizeof count);
	blake3_hasher_update(&hasher, top, QMEMO_DIGEST_BYTES);
	blake3_hasher_finalize(&hasher, root, QMEMO_DIGEST_BYTES);
}

int qmemo_admit_merkle_root(const uint8_t *ids, size_t count, uint8_t *root) {
	if (!root || (count && !ids) || count > UINT32_MAX) {
		return -1;
	}
	pthread_once(&merkle_once, init_merkle);
	if (count == 0) {
		seal(0, empty_subtree[0], root);
		return 0;
	}
	/* One level at a time, in place: node i of the next level is written after nodes 2i and
	 * 2i + 1 of this one were read (hashed into `out` first), so nothing is overwritten early. */
	uint8_t *level = malloc((count + 1) * QMEMO_DIGEST_BYTES);
	if (!level) {
		return -2;
	}
	for (size_t i = 0; i < count; i++) {
		blake3_hasher hasher;
		from_proto(&hasher, &proto_leaf);
		blake3_hasher_update(&hasher, ids + i * QMEMO_DIGEST_BYTES, QMEMO_DIGEST_BYTES);
		blake3_hasher_finalize(&hasher, level + i * QMEMO_DIGEST_BYTES, QMEMO_DIGEST_BYTES);
	}
	size_t width = count;
	for (int height = 0; width > 1; height++) {
		if (width % 2) {
			memcpy(level + width * QMEMO_DIGEST_BYTES, empty_subtree[height], QMEMO_DIGEST_BYTES);
			width++;
		}
		for (size_t i = 0; i < width / 2; i++) {
			uint8_t out[QMEMO_DIGEST_BYTES];
			hash_node(level + 2 * i * QMEMO_DIGEST_BYTES, level + (2 * i + 1) * QMEMO_DIGEST_BYTES, out);
			memcpy(level + i * QMEMO_DIGEST_BYTES, out, QMEMO_DIGEST_BYTES);
		}
		width /= 2;
	}
	seal((uint32_t) count, level, root);
	free(level);
	return 0;
}
