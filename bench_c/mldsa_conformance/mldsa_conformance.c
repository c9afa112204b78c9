/*
 * mldsa_conformance.c - what FIPS 204's two checks cost liboqs 0.13's AVX2 ML-DSA verify.
 *
 * scripts/liboqs/mldsa_conformance.cmake patches the bundled pq-crystals AVX2 verify at
 * build time (the z bound of FIPS 204 Algorithm 8 line 13, UseHint's r0 > 0 test) and
 * installs two static archives beside liboqs.so, every symbol renamed:
 *   lib/qmemo/libqmemo_mldsa_conforming.a   the patched objects liboqs.so is linked from
 *   lib/qmemo/libqmemo_mldsa_shipped.a      the bundled code as shipped, same flags
 * Three ways to verify the same inputs (bench_c/verify_count.h: one key, N distinct
 * 64-byte messages and their signatures, made by liboqs from a fixed seed):
 *   liboqs       OQS_SIG_verify, the conforming build a node runs (its dispatch included)
 *   conforming   the patched AVX2 verify from the archive, called directly
 *   shipped      the AVX2 verify as liboqs 0.13 ships it, called the same way
 * conforming against shipped is the patch's cost, like for like (the same objects but
 * two files, linked alike); liboqs against conforming shows what the shared library's
 * call path adds. All three are constant-time in the message and the key (nothing is
 * cached). Both archives are AVX2 code: on a CPU without AVX2 and POPCNT liboqs runs its
 * portable ML-DSA, which needs no patch, and this program says so and exits 3.
 *
 * Commands: `time` and `count` as in verify_count.h, and
 *   mldsa_conformance verdicts VARIANT    one line per stdin line "pk sig msg" (hex):
 *                                         "liboqs conforming shipped" as 1 (valid) / 0,
 * which lets a test show that the two archives really differ where FIPS 204 says.
 * Built by bench_c/Makefile when the archives are installed.
 */
#include "../verify_count.h" /* first: it sets _POSIX_C_SOURCE */

typedef int (*mldsa_verify)(const uint8_t *sig, size_t sig_len, const uint8_t *msg, size_t msg_len, const uint8_t *ctx,
                            size_t ctx_len, const uint8_t *pk);

#define MLDSA_SETS(X) X(44) X(65) X(87)
#define DECLARE(set)                                                                                                   \
	int qmemo_conforming_pqcrystals_ml_dsa_##set##_avx2_verify(const uint8_t *, size_t, const uint8_t *, size_t,     \
	                                                            const uint8_t *, size_t, const uint8_t *);           \
	int qmemo_shipped_pqcrystals_ml_dsa_##set##_avx2_verify(const uint8_t *, size_t, const uint8_t *, size_t,        \
	                                                         const uint8_t *, size_t, const uint8_t *);
MLDSA_SETS(DECLARE)

static const struct {
	const char *name;
	mldsa_verify conforming, shipped;
} SETS[] = {
	{"ML-DSA-44", qmemo_conforming_pqcrystals_ml_dsa_44_avx2_verify, qmemo_shipped_pqcrystals_ml_dsa_44_avx2_verify},
	{"ML-DSA-65", qmemo_conforming_pqcrystals_ml_dsa_65_avx2_verify, qmemo_shipped_pqcrystals_ml_dsa_65_avx2_verify},
	{"ML-DSA-87", qmemo_conforming_pqcrystals_ml_dsa_87_avx2_verify, qmemo_shipped_pqcrystals_ml_dsa_87_avx2_verify},
};

enum { MODE_LIBOQS, MODE_CONFORMING, MODE_SHIPPED, MODE_COUNT };
static const char *const MODES[MODE_COUNT] = {"liboqs", "conforming", "shipped"};
static mldsa_verify direct[MODE_COUNT];

/* The two archives' functions of `variant`; 0 when it is an ML-DSA set and the CPU runs AVX2. */
static int choose(const char *variant) {
	if (!OQS_CPU_has_extension(OQS_CPU_EXT_AVX2) || !OQS_CPU_has_extension(OQS_CPU_EXT_POPCNT)) {
		fprintf(stderr, "mldsa_conformance: no AVX2/POPCNT here: liboqs runs its portable ML-DSA, nothing to compare\n");
		exit(3);
	}
	for (size_t i = 0; i < sizeof SETS / sizeof SETS[0]; i++) {
		if (strcmp(SETS[i].name, variant) == 0) {
			direct[MODE_CONFORMING] = SETS[i].conforming, direct[MODE_SHIPPED] = SETS[i].shipped;
			return 0;
		}
	}
	fprintf(stderr, "mldsa_conformance: %s is not ML-DSA-44, -65 or -87\n", variant);
	return -1;
}

static int setup(const verify_inputs *in) {
	return choose(in->oqs->method_name);
}

static size_t run(int mode) {
	const verify_inputs *in = &vc_in;
	if (mode == MODE_LIBOQS) {
		return verify_inputs_liboqs(in);
	}
	size_t valid = 0;
	for (size_t i = 0; i < in->n; i++) {
		/* The caller's length check, as verify_inputs_liboqs makes it. */
		valid += in->sig_lens[i] <= in->max_sig &&
		         direct[mode](verify_inputs_sig(in, i), in->sig_lens[i], verify_inputs_msg(in, i),
		                      VERIFY_COUNT_MSG_BYTES, NULL, 0, in->pk) == 0;
	}
	return valid;
}

static const char *implementation(int mode) {
	return mode == MODE_SHIPPED ? "liboqs-0.13.0-avx2-as-shipped" : "liboqs-0.13.0-avx2-conforming";
}

static void teardown(void) {}

/* Hex of at most `room` bytes into out; its length, or -1. */
static long unhex(const char *hex, size_t hex_len, uint8_t *out, size_t room) {
	if (hex_len % 2 || hex_len / 2 > room) {
		return -1;
	}
	for (size_t i = 0; i < hex_len / 2; i++) {
		unsigned int byte;
		if (sscanf(hex + 2 * i, "%2x", &byte) != 1) {
			return -1;
		}
		out[i] = (uint8_t) byte;
	}
	return (long) (hex_len / 2);
}

/* `verdicts VARIANT`: every stdin line "pk sig msg" in hex, answered by all three modes. */
static int verdicts(const char *variant) {
	OQS_SIG *oqs = OQS_SIG_new(variant);
	if (oqs == NULL || choose(variant) != 0) {
		OQS_SIG_free(oqs);
		return 2;
	}
	enum { ROOM = 1 << 16 };
	static char line[6 * ROOM];
	static uint8_t pk[ROOM], sig[ROOM], msg[ROOM];
	int rc = 0;
	while (fgets(line, sizeof line, stdin) != NULL) {
		char *fields[3] = {0};
		size_t lens[3] = {0};
		char *at = line;
		for (int f = 0; f < 3; f++) {
			at += strspn(at, " \t");
			fields[f] = at;
			lens[f] = strcspn(at, " \t\r\n");
			at += lens[f];
		}
		long pk_len = unhex(fields[0], lens[0], pk, ROOM), sig_len = unhex(fields[1], lens[1], sig, ROOM);
		long msg_len = unhex(fields[2], lens[2], msg, ROOM);
		if (pk_len < 0 || sig_len < 0 || msg_len < 0) {
			fprintf(stderr, "mldsa_conformance: a line is not \"pk sig msg\" in hex\n");
			rc = 2;
			break;
		}
		/* liboqs's API takes a key of its exact length; a wrong one is refused by every mode. */
		int key_ok = (size_t) pk_len == oqs->length_public_key;
		int ok[MODE_COUNT];
		ok[MODE_LIBOQS] = key_ok && OQS_SIG_verify(oqs, msg, (size_t) msg_len, sig, (size_t) sig_len, pk) == OQS_SUCCESS;
		for (int m = MODE_CONFORMING; m < MODE_COUNT; m++) {
			ok[m] = key_ok && direct[m](sig, (size_t) sig_len, msg, (size_t) msg_len, NULL, 0, pk) == 0;
		}
		printf("%d %d %d\n", ok[MODE_LIBOQS], ok[MODE_CONFORMING], ok[MODE_SHIPPED]);
	}
	OQS_SIG_free(oqs);
	return rc;
}

int main(int argc, char **argv) {
	if (argc == 3 && strcmp(argv[1], "verdicts") == 0) {
		OQS_init();
		int rc = verdicts(argv[2]);
		OQS_destroy();
		return rc;
	}
	const verify_counter counter = {MODE_COUNT, MODES, "ML-DSA-44", setup, run, implementation, teardown};
	return verify_count_main(&counter, argc, argv);
}
