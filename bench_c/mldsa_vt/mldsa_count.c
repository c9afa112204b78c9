/*
 * mldsa_count.c - ML-DSA verify cost, liboqs against mldsa_vt, on the same inputs.
 *
 * One key, N distinct 64-byte messages (a qMEMO signing digest) and their signatures,
 * made by liboqs from a fixed seed. Four ways to verify them:
 *   liboqs     OQS_SIG_verify (the caller's length check included): liboqs's dispatch,
 *              its AVX2 code on an AVX2 CPU
 *   uncached   qmv_verify: the key expanded on every call (A-hat, tr, NTT(t1 * 2^d))
 *   cached     qmv_verify_cached with the key already in the cache (warmed outside the
 *              measured function)
 *   batch      qmv_verify_batch over all N through the same warm cache: the node's call
 *              (one signature after another: nothing of ML-DSA's is shared between them)
 * Commands and output: bench_c/verify_count.h.
 */
#include "../verify_count.h" /* first: it sets _POSIX_C_SOURCE */
#include "mldsa_vt.h"

enum { MODE_LIBOQS, MODE_UNCACHED, MODE_CACHED, MODE_BATCH, MODE_COUNT };
static const char *const MODES[MODE_COUNT] = {"liboqs", "uncached", "cached", "batch"};

static int variant;
static qmv_cache *cache;

static int setup(const verify_inputs *in) {
	variant = qmv_variant(in->oqs->method_name);
	cache = qmv_cache_new(variant, 64);
	/* Warm the cache: the key is expanded once, here, outside any measured pass. */
	return variant >= 0 && cache != NULL &&
	       qmv_verify_cached(cache, variant, in->pk, in->pk_len, verify_inputs_msg(in, 0), VERIFY_COUNT_MSG_BYTES,
	                         verify_inputs_sig(in, 0), in->sig_lens[0]) ? 0 : -1;
}

static size_t run(int mode) {
	const verify_inputs *in = &vc_in;
	size_t valid = 0;
	if (mode == MODE_LIBOQS) {
		return verify_inputs_liboqs(in);
	}
	if (mode == MODE_BATCH) {
		return qmv_verify_batch(cache, variant, in->n, in->blob, in->blob_len, in->lengths, in->ok, NULL);
	}
	for (size_t i = 0; i < in->n; i++) {
		const uint8_t *msg = verify_inputs_msg(in, i), *sig = verify_inputs_sig(in, i);
		valid += (size_t) (mode == MODE_UNCACHED
		                   ? qmv_verify(variant, in->pk, in->pk_len, msg, VERIFY_COUNT_MSG_BYTES, sig, in->sig_lens[i])
		                   : qmv_verify_cached(cache, variant, in->pk, in->pk_len, msg, VERIFY_COUNT_MSG_BYTES, sig,
		                                       in->sig_lens[i]));
	}
	return valid;
}

static const char *implementation(int mode) {
	return mode == MODE_LIBOQS ? "liboqs" : qmv_implementation();
}

static void teardown(void) {
	qmv_cache_free(cache);
}

int main(int argc, char **argv) {
	const verify_counter counter = {MODE_COUNT, MODES, "ML-DSA-44", setup, run, implementation, teardown};
	return verify_count_main(&counter, argc, argv);
}
