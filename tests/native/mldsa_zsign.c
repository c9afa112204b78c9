/*
 * mldsa_zsign.c - an ML-DSA signer that makes only signatures FIPS 204 forbids: ||z||inf at
 * or over gamma1 - beta, every other check of signing passed. For the tests that hold a
 * verifier (and a devnet of mixed verifiers) to refuse them.
 *
 * It is liboqs 0.13's own pq-crystals ref sign.c, built by mldsa_vt.mk as the "lenient"
 * signer (libqmemo_mldsa_test.a: its z check calls qmemo_lenient_<mode>_chknorm), with
 * that check turned round here: a z inside the bound is the one rejected, so the signing
 * loop runs until z breaks it while still packing (|z| < gamma1). Nothing else of signing
 * changes: the signature passes the r0, ct0 and hint checks, and a verifier that skips the
 * z bound accepts it.
 *
 * Reads lines "<44|65|87> <secret key hex> <message hex>" on stdin, writes one line of
 * signature hex each (empty context, FIPS 204's pure ML-DSA.Sign).
 * Build: cc -std=c11 -O2 mldsa_zsign.c .deps/native/mldsa/libqmemo_mldsa_test.a
 *        .deps/native/mldsa/libqmemo_mldsa.a -L<liboqs>/lib -loqs (tests/integration/mldsa_zsign.py)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SK 4896
#define MAX_SIG 4627
#define MAX_MSG 65536

#define MODE_DECLS(mode, gamma1)                                                                               \
	int pqcrystals_ml_dsa_##mode##_ref_polyvecl_chknorm(const void *v, int32_t bound);                         \
	int qmemo_lenient_##mode##_signature(uint8_t *sig, size_t *siglen, const uint8_t *m, size_t mlen,         \
	                                     const uint8_t *ctx, size_t ctxlen, const uint8_t *sk);                 \
	int qmemo_lenient_##mode##_chknorm(const void *v, int32_t bound);                                         \
	/* 0 (keep this z) only when it is over FIPS 204's bound and still packs */                               \
	int qmemo_lenient_##mode##_chknorm(const void *v, int32_t bound) {                                        \
		int over = pqcrystals_ml_dsa_##mode##_ref_polyvecl_chknorm(v, bound);                                  \
		int packs = !pqcrystals_ml_dsa_##mode##_ref_polyvecl_chknorm(v, (gamma1));                             \
		return !(over && packs);                                                                               \
	}
MODE_DECLS(44, 1 << 17) /* FIPS 204, Table 1: gamma1 */
MODE_DECLS(65, 1 << 19)
MODE_DECLS(87, 1 << 19)

static size_t from_hex(const char *hex, uint8_t *out, size_t max) {
	size_t len = strlen(hex);
	if (len % 2 || len / 2 > max) {
		return (size_t) -1;
	}
	for (size_t i = 0; i < len / 2; i++) {
		unsigned byte;
		if (sscanf(hex + 2 * i, "%2x", &byte) != 1) {
			return (size_t) -1;
		}
		out[i] = (uint8_t) byte;
	}
	return len / 2;
}

int main(void) {
	static char line[2 * (MAX_SK + MAX_MSG) + 64];
	static uint8_t sk[MAX_SK], msg[MAX_MSG], sig[MAX_SIG];
	while (fgets(line, sizeof line, stdin) != NULL) {
		char *mode = strtok(line, " \n"), *sk_hex = strtok(NULL, " \n"), *msg_hex = strtok(NULL, " \n");
		if (mode == NULL || sk_hex == NULL) {
			fprintf(stderr, "mldsa_zsign: expected '<mode> <sk hex> <msg hex>'\n");
			return 2;
		}
		size_t sk_len = from_hex(sk_hex, sk, sizeof sk), msg_len = msg_hex ? from_hex(msg_hex, msg, sizeof msg) : 0;
		size_t sig_len = 0;
		int rc;
		if (sk_len == (size_t) -1 || msg_len == (size_t) -1) {
			fprintf(stderr, "mldsa_zsign: bad hex\n");
			return 2;
		}
		if (strcmp(mode, "44") == 0) {
			rc = qmemo_lenient_44_signature(sig, &sig_len, msg, msg_len, NULL, 0, sk);
		} else if (strcmp(mode, "65") == 0) {
			rc = qmemo_lenient_65_signature(sig, &sig_len, msg, msg_len, NULL, 0, sk);
		} else if (strcmp(mode, "87") == 0) {
			rc = qmemo_lenient_87_signature(sig, &sig_len, msg, msg_len, NULL, 0, sk);
		} else {
			fprintf(stderr, "mldsa_zsign: unknown mode %s\n", mode);
			return 2;
		}
		if (rc != 0) {
			fprintf(stderr, "mldsa_zsign: signing failed (%d)\n", rc);
			return 1;
		}
		for (size_t i = 0; i < sig_len; i++) {
			printf("%02x", sig[i]);
		}
		printf("\n");
		fflush(stdout);
	}
	return 0;
}
