/*
 * oqs_sha3_support.c - the two liboqs helpers that liboqs's SHA3 code needs but
 * liboqs.so does not export.
 *
 * Why: the PQClean Falcon and pq-crystals ML-DSA code hash with liboqs's SHAKE
 * (OQS_SHA3_shake*_inc_*, one lane and four), and liboqs.so keeps those symbols hidden.
 * So the setup compiles liboqs 0.13's own SHA3 sources (oqs_sha3.mk) into each verifier
 * library (libqmemo_falcon, libqmemo_mldsa), where they call these two allocation
 * helpers for each SHAKE context. Everything here is hidden: each library exports only
 * its own API (falcon_vt.map, mldsa_vt.map), so nothing clashes with liboqs.
 */
#define _POSIX_C_SOURCE 200112L /* posix_memalign under -std=c11 */
#include <stdlib.h>

__attribute__((visibility("hidden"))) void *OQS_MEM_aligned_alloc(size_t alignment, size_t size);
__attribute__((visibility("hidden"))) void OQS_MEM_aligned_free(void *ptr);

void *OQS_MEM_aligned_alloc(size_t alignment, size_t size) {
	void *ptr = NULL;
	return posix_memalign(&ptr, alignment, size) == 0 ? ptr : NULL;
}

void OQS_MEM_aligned_free(void *ptr) {
	free(ptr);
}
