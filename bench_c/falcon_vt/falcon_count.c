/*
 * falcon_count.c - Falcon verify cost, liboqs against falcon_vt, on the same inputs.
 *
 * One key, N distinct 64-byte messages (the size of a qMEMO signing digest, BLAKE3-512)
 * and their signatures, made by liboqs from a fixed seed. Four ways to verify them:
 *   liboqs     OQS_SIG_verify (the caller's length checks included)
 *   uncached   qfv_verify: the public key decoded on every call
 *   cached     qfv_verify_cached with the key already in the cache (warmed outside the
 *              measured function), one signature per call: what qfv_verify_batch did for
 *              each item before it hashed four at a time
 *   batch      qfv_verify_batch over all N through the same warm cache: four signatures'
 *              points hashed together on liboqs's four-lane SHAKE256 (the node's call)
 * Commands and output: bench_c/verify_count.h.
 */
#include "../verify_count.h" /* first: it sets _POSIX_C_SOURCE */
#include "falcon_vt.h"

enum { MODE_LIBOQS, MODE_UNCACHED, MODE_CACHED, MODE_BATCH, MODE_COUNT };
static const char *const MODES[MODE_COUNT] = {"liboqs", "uncached", "cached", "batch"};

static int variant;
static qfv_cache *cache;

static int setup(const verify_inputs *in) {
	variant = qfv_variant(in->oqs->method_name);
	cache = qfv_cache_new(64);
	/* Warm the cache: the key is decoded once, here, outside any measured pass. */
	return variant >= 0 && cache != NULL &&
	       qfv_verify_cached(cache, variant, in->pk, in->pk_len, verify_inputs_msg(in, 0), VERIFY_COUNT_MSG_BYTES,
	                         verify_inputs_sig(in, 0), in->sig_lens[0]) ? 0 : -1;
}

static size_t run(int mode) {
	const verify_inputs *in = &vc_in;
	size_t valid = 0;
	if (mode == MODE_LIBOQS) {
		return verify_inputs_liboqs(in);
	}
	if (mode == MODE_BATCH) {
		return qfv_verify_batch(cache, variant, in->n, in->blob, in->blob_len, in->lengths, 0, in->ok, NULL);
	}
	for (size_t i = 0; i < in->n; i++) {
		const uint8_t *msg = verify_inputs_msg(in, i), *sig = verify_inputs_sig(in, i);
		valid += (size_t) (mode == MODE_UNCACHED
		                   ? qfv_verify(variant, in->pk, in->pk_len, msg, VERIFY_COUNT_MSG_BYTES, sig, in->sig_lens[i])
		                   : qfv_verify_cached(cache, variant, in->pk, in->pk_len, msg, VERIFY_COUNT_MSG_BYTES, sig,
		                                       in->sig_lens[i]));
	}
	return valid;
}

static const char *implementation(int mode) {
	return mode == MODE_LIBOQS ? "liboqs" : qfv_implementation();
}

static void teardown(void) {
	qfv_cache_free(cache);
}

int main(int argc, char **argv) {
	const verify_counter counter = {MODE_COUNT, MODES, "Falcon-512", setup, run, implementation, teardown};
	return verify_count_main(&counter, argc, argv);
}
