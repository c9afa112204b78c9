/* schemes.c - the registry and the liboqs wrappers (classical ones: classical.c). */
#include "schemes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <oqs/oqs.h>

/* liboqs 0.13 ships 60-odd signature identifiers; the classical four come on top. */
#define QB_MAX_SCHEMES 96

static qb_scheme registry[QB_MAX_SCHEMES];
static size_t registry_len;

/* --- liboqs ------------------------------------------------------------------ */

/* QB_IS_SET(MACRO) is 1 when MACRO is defined as 1 and 0 when it is undefined, usable
 * in an initializer (the Linux kernel's IS_ENABLED trick): oqsconfig.h defines
 * OQS_ENABLE_SIG_<alg>_avx2 as 1 or leaves it undefined. */
#define QB_PLACEHOLDER_1 0,
#define QB_SECOND(ignored, val, ...) val
#define QB_IS_SET(macro) QB_IS_SET_(macro)
#define QB_IS_SET_(value) QB_IS_SET__(QB_PLACEHOLDER_##value)
#define QB_IS_SET__(arg1_or_junk) QB_SECOND(arg1_or_junk 1, 0, 0)

/* Whether this liboqs build contains an AVX2 implementation of `alg`; with
 * OQS_DIST_BUILD it runs when OQS_CPU_has_extension says the CPU can (ML-DSA also
 * needs POPCNT: see liboqs src/sig/ml_dsa/sig_ml_dsa_44.c). liboqs does not expose
 * the chosen path at run time, so we read the build's configuration macros. Returns
 * -1 for algorithms not listed here (reported as "code path unknown"). */
static int oqs_avx2_built(const char *alg, bool *needs_popcnt) {
	static const struct {
		const char *alg;
		bool built;
		bool popcnt;
	} table[] = {
		{"Falcon-512", QB_IS_SET(OQS_ENABLE_SIG_falcon_512_avx2), false},
		{"Falcon-1024", QB_IS_SET(OQS_ENABLE_SIG_falcon_1024_avx2), false},
		{"Falcon-padded-512", QB_IS_SET(OQS_ENABLE_SIG_falcon_padded_512_avx2), false},
		{"Falcon-padded-1024", QB_IS_SET(OQS_ENABLE_SIG_falcon_padded_1024_avx2), false},
		{"ML-DSA-44", QB_IS_SET(OQS_ENABLE_SIG_ml_dsa_44_avx2), true},
		{"ML-DSA-65", QB_IS_SET(OQS_ENABLE_SIG_ml_dsa_65_avx2), true},
		{"ML-DSA-87", QB_IS_SET(OQS_ENABLE_SIG_ml_dsa_87_avx2), true},
		{"SPHINCS+-SHA2-128f-simple", QB_IS_SET(OQS_ENABLE_SIG_sphincs_sha2_128f_simple_avx2), false},
		{"SPHINCS+-SHA2-128s-simple", QB_IS_SET(OQS_ENABLE_SIG_sphincs_sha2_128s_simple_avx2), false},
		{"MAYO-1", QB_IS_SET(OQS_ENABLE_SIG_mayo_1_avx2), false},
		{"MAYO-2", QB_IS_SET(OQS_ENABLE_SIG_mayo_2_avx2), false},
	};
	*needs_popcnt = false;
	for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
		if (strcmp(table[i].alg, alg) == 0) {
			*needs_popcnt = table[i].popcnt;
			return table[i].built ? 1 : 0;
		}
	}
	return -1;
}

static int oqs_keypair(const qb_scheme *s, qb_keypair *kp) {
	return OQS_SIG_keypair(s->impl, kp->pk, kp->sk) == OQS_SUCCESS ? 0 : -1;
}

static int oqs_sign(const qb_scheme *s, const qb_keypair *kp, const uint8_t *msg, size_t msg_len, uint8_t *sig,
                    size_t *sig_len) {
	if (*sig_len < s->sig_max_bytes) {
		return -1;
	}
	return OQS_SIG_sign(s->impl, sig, sig_len, msg, msg_len, kp->sk) == OQS_SUCCESS ? 0 : -1;
}

/* liboqs returns OQS_ERROR both for a bad signature and for an internal failure; no
 * scheme built here fails internally on verify, so every non-success is a rejection. */
static qb_verdict oqs_verify(const qb_scheme *s, const uint8_t *pk, const uint8_t *msg, size_t msg_len,
                             const uint8_t *sig, size_t sig_len) {
	return OQS_SIG_verify(s->impl, msg, msg_len, sig, sig_len, pk) == OQS_SUCCESS ? QB_VALID : QB_INVALID;
}

static int register_oqs(void) {
	for (size_t i = 0; i < (size_t) OQS_SIG_algs_length; i++) {
		const char *alg = OQS_SIG_alg_identifier(i);
		if (!OQS_SIG_alg_is_enabled(alg)) {
			continue;
		}
		OQS_SIG *sig = OQS_SIG_new(alg);
		if (sig == NULL) {
			fprintf(stderr, "error: liboqs says %s is enabled but OQS_SIG_new failed\n", alg);
			return -1;
		}
		if (registry_len == QB_MAX_SCHEMES) {
			OQS_SIG_free(sig);
			fprintf(stderr, "error: more than %d schemes\n", QB_MAX_SCHEMES);
			return -1;
		}
		qb_scheme *s = &registry[registry_len++];
		memset(s, 0, sizeof *s);
		snprintf(s->id, sizeof s->id, "%s", sig->method_name);
		s->name = sig->method_name;
		s->library = "liboqs";
		bool popcnt;
		int avx2 = oqs_avx2_built(sig->method_name, &popcnt);
		const char *path = "code path unknown";
		if (avx2 == 0) {
			path = "portable";
		} else if (avx2 == 1) {
			bool cpu = OQS_CPU_has_extension(OQS_CPU_EXT_AVX2) &&
			           (!popcnt || OQS_CPU_has_extension(OQS_CPU_EXT_POPCNT));
			path = cpu ? "AVX2" : "portable";
		}
		snprintf(s->implementation, sizeof s->implementation, "liboqs %s %s", OQS_version(), path);
		s->post_quantum = true;
		s->nist_level = sig->claimed_nist_level;
		s->suf_cma = sig->suf_cma;
		s->pk_bytes = sig->length_public_key;
		s->sk_bytes = sig->length_secret_key;
		s->sig_max_bytes = sig->length_signature;
		s->impl = sig;
		s->keypair = oqs_keypair;
		s->sign = oqs_sign;
		s->verify = oqs_verify;
	}
	return 0;
}

/* --- registry ------------------------------------------------------------------ */

int qb_schemes_init(void) {
	OQS_init();
	/* Like speed_sig: OpenSSL's DRBG for keygen and Falcon's signing randomness
	 * (thread-safe, and no system call per request). */
	if (OQS_randombytes_switch_algorithm(OQS_RAND_alg_openssl) != OQS_SUCCESS) {
		fprintf(stderr, "error: liboqs cannot use OpenSSL's random generator\n");
		return -1;
	}
	registry_len = 0;
	if (register_oqs() != 0) {
		return -1;
	}
	int n = qb_classical_register(&registry[registry_len], QB_MAX_SCHEMES - registry_len);
	if (n < 0) {
		return -1;
	}
	registry_len += (size_t) n;
	return 0;
}

void qb_schemes_cleanup(void) {
	for (size_t i = 0; i < registry_len; i++) {
		if (strcmp(registry[i].library, "liboqs") == 0) {
			OQS_SIG_free((OQS_SIG *) registry[i].impl);
		}
	}
	registry_len = 0;
	qb_classical_cleanup();
	OQS_destroy();
}

size_t qb_schemes_count(void) { return registry_len; }

const qb_scheme *qb_scheme_at(size_t i) { return i < registry_len ? &registry[i] : NULL; }

static bool in_group(const qb_scheme *s, const char *item) {
	if (strcasecmp(item, "all") == 0) {
		return true;
	}
	if (strcasecmp(item, "pq") == 0) {
		return s->post_quantum;
	}
	if (strcasecmp(item, "classical") == 0) {
		return !s->post_quantum;
	}
	if (strcasecmp(item, "falcon") == 0) {
		return strncmp(s->name, "Falcon-", 7) == 0;
	}
	return strcasecmp(item, s->id) == 0 || strcasecmp(item, s->name) == 0;
}

int qb_schemes_resolve(const char *list, const qb_scheme **out, size_t max) {
	char buf[1024];
	if (snprintf(buf, sizeof buf, "%s", list) >= (int) sizeof buf) {
		fprintf(stderr, "error: --alg list too long\n");
		return -1;
	}
	size_t n = 0;
	char *save = NULL;
	for (char *item = strtok_r(buf, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save)) {
		bool matched = false;
		for (size_t i = 0; i < registry_len; i++) {
			if (!in_group(&registry[i], item)) {
				continue;
			}
			matched = true;
			bool dup = false;
			for (size_t k = 0; k < n; k++) {
				dup = dup || out[k] == &registry[i];
			}
			if (!dup && n < max) {
				out[n++] = &registry[i];
			}
		}
		if (!matched) {
			fprintf(stderr, "error: unknown or disabled scheme '%s' (try `qmemo-bench list`)\n", item);
			return -1;
		}
	}
	return (int) n;
}

int qb_keypair_alloc(const qb_scheme *s, qb_keypair *kp) {
	kp->pk = malloc(s->pk_bytes);
	kp->sk = malloc(s->sk_bytes);
	kp->native = NULL;
	if (kp->pk == NULL || kp->sk == NULL) {
		qb_keypair_free(s, kp);
		return -1;
	}
	return 0;
}

void qb_keypair_free(const qb_scheme *s, qb_keypair *kp) {
	if (kp->sk != NULL) {
		OQS_MEM_secure_free(kp->sk, s->sk_bytes);
	}
	free(kp->pk);
	if (kp->native != NULL && s->native_free != NULL) {
		s->native_free(kp->native);
	}
	kp->pk = kp->sk = NULL;
	kp->native = NULL;
}
