/*
 * falcon_vt_support.c - the two liboqs helpers that liboqs's SHA3 code needs but
 * liboqs.so does not export.
 *
 * Why: the PQClean Falcon code hashes with liboqs's SHAKE256 (OQS_SHA3_shake256_inc_*),
 * and liboqs.so keeps those symbols hidden. So the setup compiles liboqs 0.13's own
 * SHA3 sources (sha3.c, xkcp_sha3.c and the Keccak-p[1600] permutations, AVX2 or
 * portable by the same run-time check) into libqmemo_falcon, where they call these
 * two allocation helpers for each SHAKE context. Everything here is hidden: the
 * library exports only qfv_* (see falcon_vt.map), so nothing clashes with liboqs.
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
