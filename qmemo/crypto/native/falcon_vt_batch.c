/*
 * falcon_vt_batch.c - many Falcon verifies in one call (falcon_vt.h's qfv_verify_items,
 * qfv_verify_batch and the admission kernel's hooks): the points of four signatures
 * hashed together on liboqs's four-lane SHAKE256.
 *
 * Each signature goes through falcon_vt.c's own steps (falcon_vt_verify.h) in
 * qfv_verify_cached's order; only the hashing is shared, and each lane's output is its
 * own SHAKE256 stream, so verdicts, cache insertions and cache counts are those of
 * qfv_verify_cached for each item in order (tests/native/falcon_diff.c checks every case
 * both ways).
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c11 */
#include "falcon_vt.h"
#include "falcon_vt_cache.h"
#include "falcon_vt_verify.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <oqs/sha3x4.h> /* liboqs's four-lane SHAKE256 (KeccakP-1600-times4, AVX2 where the CPU has it) */

/*
 * The same for 2 to 4 signatures whose messages have one length, on liboqs's four-lane
 * SHAKE256: one Keccak-f[1600] times4 permutation (AVX2: four states in one set of
 * registers) per output block of all four, where one lane costs one permutation of its
 * own. Lanes past `lanes` hash lane 0's input again, their output unused. Each lane's
 * stream is exactly its SHAKE256(nonce || msg), so each point is the one-lane point.
 */
static void hash_to_point_x4(const uint8_t *const nonce[4], const uint8_t *const msg[4], size_t msg_len,
                             uint16_t *const x[4], size_t lanes, unsigned logn, int impl) {
	uint8_t buf[4][OQS_SHA3_SHAKE256_RATE] __attribute__((aligned(32)));
	size_t n = (size_t) 1 << logn, got[4] = {0, 0, 0, 0};
	const uint8_t *in_nonce[4], *in_msg[4];
	for (size_t l = 0; l < 4; l++) {
		in_nonce[l] = nonce[l < lanes ? l : 0];
		in_msg[l] = msg[l < lanes ? l : 0];
	}
	OQS_SHA3_shake256_x4_inc_ctx sc;
	OQS_SHA3_shake256_x4_inc_init(&sc);
	OQS_SHA3_shake256_x4_inc_absorb(&sc, in_nonce[0], in_nonce[1], in_nonce[2], in_nonce[3], NONCE_BYTES);
	OQS_SHA3_shake256_x4_inc_absorb(&sc, in_msg[0], in_msg[1], in_msg[2], in_msg[3], msg_len);
	OQS_SHA3_shake256_x4_inc_finalize(&sc);
	for (size_t done = 0; done < lanes;) {
		OQS_SHA3_shake256_x4_inc_squeeze(buf[0], buf[1], buf[2], buf[3], OQS_SHA3_SHAKE256_RATE, &sc);
		done = 0;
		for (size_t l = 0; l < lanes; l++) {
			if (got[l] < n) {
				got[l] = falcon_vt_sample_block(x[l], got[l], n, buf[l], impl);
			}
			done += got[l] >= n;
		}
	}
	OQS_SHA3_shake256_x4_inc_ctx_release(&sc);
}

/* --- many verifies in one call ------------------------------------------------------ */

/* One signature of a group, between its checks and its norm. */
typedef struct {
	size_t index;
	size_t set;       /* its key's cache set */
	int cached;       /* its key came from the cache (nothing to insert) */
	const uint8_t *pk, *msg, *nonce;
	decoded_key h;
	int16_t s2[MAX_N] __attribute__((aligned(32)));
	uint16_t hm[HASHED_ROOM] __attribute__((aligned(32)));
} staged;

#define GROUP 4 /* the lanes of liboqs's four-lane SHAKE256 */

/* Hash the group's points together, then finish each signature as qfv_verify_cached does. */
static size_t finish_group(qfv_cache *cache, int variant, const variant_info *v, int impl, staged *group, size_t count,
                           size_t msg_len, uint8_t *ok) {
	size_t valid = 0;
	if (count == 1) {
		falcon_vt_hash_to_point(group[0].nonce, group[0].msg, msg_len, group[0].hm, v->logn, impl);
	} else if (count > 1) {
		const uint8_t *nonce[GROUP], *msg[GROUP];
		uint16_t *hm[GROUP];
		for (size_t l = 0; l < count; l++) {
			nonce[l] = group[l].nonce, msg[l] = group[l].msg, hm[l] = group[l].hm;
		}
		hash_to_point_x4(nonce, msg, msg_len, hm, count, v->logn, impl);
	}
	for (size_t l = 0; l < count; l++) {
		staged *g = &group[l];
		int good = falcon_vt_short_enough(v, impl, g->hm, g->s2, g->h);
		if (good && cache != NULL && !g->cached) { /* as qfv_verify_cached: only keys that verified */
			falcon_vt_cache_insert(cache, g->set, variant, impl, g->pk, v->pk_bytes, g->h, (size_t) 1 << v->logn);
		}
		ok[g->index] = (uint8_t) good;
		valid += (size_t) good;
	}
	return valid;
}

size_t qfv_verify_items(qfv_cache *cache, int variant, const qfv_item *items, size_t count,
                        int fixed_signature_length, uint8_t *ok) {
	staged group[GROUP];
	size_t staged_count = 0, group_msg_len = 0, valid = 0;
	int impl = falcon_vt_current_impl(); /* read once: the keys' form and their use must agree */
	for (size_t i = 0; i < count; i++) {
		ok[i] = 0;
	}
	for (size_t i = 0; i < count; i++) {
		const qfv_item *it = &items[i];
		const variant_info *v = falcon_vt_checked_variant(variant, it->public_key_length, it->signature_length);
		if (v == NULL || it->signature_length == 0 ||
		        (fixed_signature_length && it->signature_length != v->max_sig_bytes)) {
			continue;
		}
		/* Four lanes absorb equal lengths: a message of another length starts a new group. */
		if (staged_count > 0 && it->message_length != group_msg_len) {
			valid += finish_group(cache, variant, v, impl, group, staged_count, group_msg_len, ok);
			staged_count = 0;
		}
		staged *g = &group[staged_count];
		size_t n = (size_t) 1 << v->logn;
		/* The key first, then the signature: qfv_verify_cached's order (and its cache counts). */
		g->cached = 0;
		if (cache != NULL) {
			g->set = falcon_vt_cache_set(cache, variant, it->public_key, it->public_key_length);
			g->cached = falcon_vt_cache_lookup(cache, g->set, variant, impl, it->public_key, it->public_key_length,
			                                   g->h, n);
		}
		if ((!g->cached && !falcon_vt_decode_public_key(v, impl, it->public_key, g->h)) ||
		        !falcon_vt_decode_signature(v, impl, it->signature, it->signature_length, g->s2, &g->nonce)) {
			continue;
		}
		g->index = i, g->pk = it->public_key, g->msg = it->message;
		group_msg_len = it->message_length;
		if (++staged_count == GROUP) {
			valid += finish_group(cache, variant, v, impl, group, staged_count, group_msg_len, ok);
			staged_count = 0;
		}
	}
	if (staged_count > 0) {
		valid += finish_group(cache, variant, falcon_vt_variant_info(variant), impl, group, staged_count, group_msg_len, ok);
	}
	return valid;
}

static uint64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* Items per qfv_verify_items call of qfv_verify_batch: a multiple of the group, small
 * enough for the stack, large enough that the call's overhead is nothing. */
#define CHUNK 64

size_t qfv_verify_batch(qfv_cache *cache, int variant, size_t count, const uint8_t *blob, uint64_t blob_len,
                        const uint64_t *lengths, int fixed_signature_length, uint8_t *ok, uint64_t *elapsed_ns) {
	size_t valid = 0, reached = 0;
	uint64_t offset = 0;
	qfv_item chunk[CHUNK];
	for (size_t i = 0; i < count; i++) {
		ok[i] = 0;
		if (elapsed_ns) {
			elapsed_ns[i] = 0;
		}
	}
	while (reached < count) {
		size_t in_chunk = 0, first = reached;
		for (; in_chunk < CHUNK && reached < count; in_chunk++, reached++) {
			uint64_t pk_len = lengths[3 * reached], msg_len = lengths[3 * reached + 1], sig_len = lengths[3 * reached + 2];
			/* Never read past the blob, whatever lengths we are handed (overflow-safe): this
			 * item and every later one stay invalid. */
			if (pk_len > blob_len - offset || msg_len > blob_len - offset - pk_len ||
			        sig_len > blob_len - offset - pk_len - msg_len) {
				count = reached;
				break;
			}
			const uint8_t *pk = blob + offset;
			chunk[in_chunk] = (qfv_item){pk, (size_t) pk_len, pk + pk_len, (size_t) msg_len, pk + pk_len + msg_len,
			                             (size_t) sig_len};
			offset += pk_len + msg_len + sig_len;
		}
		uint64_t started = elapsed_ns ? now_ns() : 0;
		valid += qfv_verify_items(cache, variant, chunk, in_chunk, fixed_signature_length, ok + first);
		/* Four signatures share each hash: a verify's own time is the chunk's, shared out. */
		uint64_t share = elapsed_ns && in_chunk ? (now_ns() - started) / in_chunk : 0;
		for (size_t i = 0; elapsed_ns && i < in_chunk; i++) {
			elapsed_ns[first + i] = share;
		}
	}
	return valid;
}

/* --- the admission kernel's hooks (qmemo_admit.h) ------------------------------------- */

typedef struct {
	qfv_cache *cache;
	int variant;
} admit_context;

void *qfv_admit_context_new(qfv_cache *cache, int variant) {
	admit_context *context = falcon_vt_variant_info(variant) ? malloc(sizeof *context) : NULL;
	if (context != NULL) {
		*context = (admit_context){cache, variant};
	}
	return context;
}

void qfv_admit_context_free(void *context) {
	free(context);
}

int qfv_admit_verify(void *context, const uint8_t *pk, size_t pk_len, const uint8_t *msg, size_t msg_len,
                     const uint8_t *sig, size_t sig_len) {
	const admit_context *c = context;
	return c != NULL && qfv_verify_cached(c->cache, c->variant, pk, pk_len, msg, msg_len, sig, sig_len);
}

void qfv_admit_verify_many(void *context, const qfv_item *items, size_t count, uint8_t *ok) {
	const admit_context *c = context;
	if (c == NULL) {
		memset(ok, 0, count);
		return;
	}
	qfv_verify_items(c->cache, c->variant, items, count, 0, ok); /* the kernel applied the length rule */
}
