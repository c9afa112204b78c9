/*
 * mldsa_arith.h - the ML-DSA verifier's own arithmetic checked value by value, for
 * mldsa_diff.c: a verdict can hide a wrong coefficient, an exhaustive table cannot.
 *
 * mldsa_vt's AVX2 path has one function of its own, use_hint_fips (mldsa_vt_core.c);
 * everything else is liboqs's. It is checked against the ref code's use_hint (FIPS 204,
 * Algorithm 40) for every r in [0, q) and both hint bits, for each gamma2. liboqs 0.13's
 * AVX2 use_hint_avx runs over the same table: the points where it differs from the ref
 * code are counted and must be exactly those with r0 == 0 and the hint set (the known
 * difference mldsa_vt.h names), so the test also shows why use_hint_fips exists.
 */
#ifndef QMEMO_TESTS_MLDSA_ARITH_H
#define QMEMO_TESTS_MLDSA_ARITH_H

#include <stdint.h>
#include <stdio.h>

#include "mldsa_vt_core.h"

#define ARITH_Q 8380417

int32_t pqcrystals_ml_dsa_44_ref_use_hint(int32_t a, unsigned int hint);
int32_t pqcrystals_ml_dsa_65_ref_use_hint(int32_t a, unsigned int hint);
int32_t pqcrystals_ml_dsa_44_ref_decompose(int32_t *a0, int32_t a);
int32_t pqcrystals_ml_dsa_65_ref_decompose(int32_t *a0, int32_t a);
#ifdef QMV_HAVE_AVX2
void pqcrystals_ml_dsa_44_avx2_use_hint_avx(void *b, const void *a, const void *hint);
void pqcrystals_ml_dsa_65_avx2_use_hint_avx(void *b, const void *a, const void *hint);
#endif

typedef struct {
	const char *name;
	int32_t (*ref_use_hint)(int32_t, unsigned);
	int32_t (*ref_decompose)(int32_t *, int32_t);
#ifdef QMV_HAVE_AVX2
	void (*ours)(int32_t *, const int32_t *, const int32_t *);
	void (*liboqs_avx2)(void *, const void *, const void *);
#endif
} arith_gamma2;

/* gamma2 = (q-1)/88 (ML-DSA-44) and (q-1)/32 (ML-DSA-65 and -87 share their rounding). */
static const arith_gamma2 ARITH_GAMMA2[] = {
#ifdef QMV_HAVE_AVX2
	{"(q-1)/88", pqcrystals_ml_dsa_44_ref_use_hint, pqcrystals_ml_dsa_44_ref_decompose, mldsa_vt_use_hint_44_avx2,
	 pqcrystals_ml_dsa_44_avx2_use_hint_avx},
	{"(q-1)/32", pqcrystals_ml_dsa_65_ref_use_hint, pqcrystals_ml_dsa_65_ref_decompose, mldsa_vt_use_hint_65_avx2,
	 pqcrystals_ml_dsa_65_avx2_use_hint_avx},
#else
	{"(q-1)/88", pqcrystals_ml_dsa_44_ref_use_hint, pqcrystals_ml_dsa_44_ref_decompose},
	{"(q-1)/32", pqcrystals_ml_dsa_65_ref_use_hint, pqcrystals_ml_dsa_65_ref_decompose},
#endif
};

/*
 * Every r in [0, q) (with `stride` 1; a larger stride samples it, for the sanitizer
 * build) and both hint bits. Returns the number of failures (0: all as expected);
 * prints one line per gamma2.
 */
static inline size_t mldsa_arith_check(unsigned stride) {
	size_t failures = 0;
	for (size_t g = 0; g < sizeof ARITH_GAMMA2 / sizeof ARITH_GAMMA2[0]; g++) {
		const arith_gamma2 *t = &ARITH_GAMMA2[g];
		size_t checked = 0, ours_wrong = 0, liboqs_avx2_differs = 0, differs_unexplained = 0;
		static int32_t a[256] __attribute__((aligned(32))), hint[256] __attribute__((aligned(32)));
		static int32_t ours[256] __attribute__((aligned(32))), theirs[256] __attribute__((aligned(32)));
		for (int32_t bit = 0; bit < 2; bit++) { /* every r with the hint clear, then set */
			int32_t r = 0;
			while (r < ARITH_Q) {
				size_t n = 0;
				for (; n < 256 && r < ARITH_Q; n++, r += (int32_t) stride) {
					a[n] = r;
					hint[n] = bit;
				}
				for (size_t i = n; i < 256; i++) {
					a[i] = 0, hint[i] = 0;
				}
#ifdef QMV_HAVE_AVX2
				t->ours(ours, a, hint);
				t->liboqs_avx2(theirs, a, hint);
#endif
				for (size_t i = 0; i < n; i++) {
					int32_t want = t->ref_use_hint(a[i], (unsigned) hint[i]);
					checked++;
#ifdef QMV_HAVE_AVX2
					int32_t r0;
					t->ref_decompose(&r0, a[i]);
					if (ours[i] != want && ours_wrong++ < 5) {
						fprintf(stderr, "use_hint gamma2=%s r=%d hint=%d: ref %d, ours %d\n", t->name, a[i], hint[i],
						        want, ours[i]);
					}
					if (theirs[i] != want) {
						liboqs_avx2_differs++;
						differs_unexplained += !(hint[i] == 1 && r0 == 0);
					}
#else
					(void) want, (void) ours, (void) theirs;
#endif
				}
			}
		}
		failures += ours_wrong + differs_unexplained;
		printf("use_hint gamma2=%s: %zu values, ours differs from ref at %zu; liboqs AVX2 at %zu "
		       "(%zu not r0 == 0 with the hint set)\n", t->name, checked, ours_wrong, liboqs_avx2_differs,
		       differs_unexplained);
	}
	return failures;
}

#endif
