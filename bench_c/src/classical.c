/* classical.c - the pre-quantum baselines behind the qb_scheme interface.
 *
 * ECDSA over secp256k1 through libsecp256k1 (Bitcoin Core's library, what chains
 * that use ECDSA run) and through OpenSSL 3's EVP API (what earlier reports measured);
 * Ed25519 through libsodium and through OpenSSL. Formats: secp256k1 public keys are
 * 33-byte compressed points in both libraries; libsecp256k1 signatures are 64-byte
 * compact (r || s), OpenSSL's are DER (at most 72 bytes); Ed25519 keys and signatures
 * are the RFC 8032 bytes (libsodium's secret key is seed || public key, 64 bytes).
 *
 * Every wrapper is safe to call from several threads at once: the libsecp256k1
 * context is only read after set-up, OpenSSL objects are created per call or only
 * read, and libsodium is stateless after sodium_init().
 */
#include "schemes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/opensslv.h>
#include <openssl/params.h>
#include <openssl/sha.h>
#include <oqs/oqs.h>
#include <secp256k1.h>
#include <sodium.h>

#ifndef QB_SECP256K1_VERSION
#define QB_SECP256K1_VERSION "unknown"
#endif

enum {
	SECP_SK_BYTES = 32,
	SECP_PK_BYTES = 33,     /* compressed point */
	SECP_UNCOMPRESSED_BYTES = 65,
	SECP_COMPACT_SIG = 64,  /* r || s */
	SECP_DER_SIG_MAX = 72,  /* SEQUENCE of two INTEGERs of up to 33 bytes each */
	ED25519_PK_BYTES = 32,
	ED25519_SIG_BYTES = 64,
	ED25519_RAW_SK_BYTES = 32,
};

static secp256k1_context *secp_ctx;
static EVP_MD *sha256_md; /* fetched once: an implicit fetch per call would be measured */

/* --- ECDSA secp256k1, libsecp256k1 -------------------------------------------- */

static int secp_keypair(const qb_scheme *s, qb_keypair *kp) {
	(void) s;
	secp256k1_pubkey pub;
	do {
		OQS_randombytes(kp->sk, SECP_SK_BYTES);
	} while (!secp256k1_ec_seckey_verify(secp_ctx, kp->sk)); /* p(retry) < 2^-127 */
	if (!secp256k1_ec_pubkey_create(secp_ctx, &pub, kp->sk)) {
		return -1;
	}
	size_t len = SECP_PK_BYTES;
	return secp256k1_ec_pubkey_serialize(secp_ctx, kp->pk, &len, &pub, SECP256K1_EC_COMPRESSED) && len == SECP_PK_BYTES
	           ? 0
	           : -1;
}

static int secp_sign(const qb_scheme *s, const qb_keypair *kp, const uint8_t *msg, size_t msg_len, uint8_t *sig,
                     size_t *sig_len) {
	(void) s;
	uint8_t digest[SHA256_DIGEST_LENGTH];
	secp256k1_ecdsa_signature sobj;
	if (*sig_len < SECP_COMPACT_SIG || SHA256(msg, msg_len, digest) == NULL) {
		return -1;
	}
	/* NULL nonce function: RFC 6979 deterministic nonces, the library's default. */
	if (!secp256k1_ecdsa_sign(secp_ctx, &sobj, digest, kp->sk, NULL, NULL) ||
	    !secp256k1_ecdsa_signature_serialize_compact(secp_ctx, sig, &sobj)) {
		return -1;
	}
	*sig_len = SECP_COMPACT_SIG;
	return 0;
}

static qb_verdict secp_verify_parsed(const secp256k1_pubkey *pub, const uint8_t *msg, size_t msg_len,
                                     const uint8_t *sig, size_t sig_len) {
	uint8_t digest[SHA256_DIGEST_LENGTH];
	secp256k1_ecdsa_signature sobj;
	if (sig_len != SECP_COMPACT_SIG || !secp256k1_ecdsa_signature_parse_compact(secp_ctx, &sobj, sig)) {
		return QB_INVALID;
	}
	if (SHA256(msg, msg_len, digest) == NULL) {
		return QB_ERROR;
	}
	return secp256k1_ecdsa_verify(secp_ctx, &sobj, digest, pub) == 1 ? QB_VALID : QB_INVALID;
}

static qb_verdict secp_verify(const qb_scheme *s, const uint8_t *pk, const uint8_t *msg, size_t msg_len,
                              const uint8_t *sig, size_t sig_len) {
	(void) s;
	secp256k1_pubkey pub;
	if (!secp256k1_ec_pubkey_parse(secp_ctx, &pub, pk, SECP_PK_BYTES)) {
		return QB_INVALID;
	}
	return secp_verify_parsed(&pub, msg, msg_len, sig, sig_len);
}

static void *secp_pk_load(const qb_scheme *s, const uint8_t *pk) {
	(void) s;
	secp256k1_pubkey *pub = malloc(sizeof *pub);
	if (pub != NULL && !secp256k1_ec_pubkey_parse(secp_ctx, pub, pk, SECP_PK_BYTES)) {
		free(pub);
		pub = NULL;
	}
	return pub;
}

static qb_verdict secp_verify_loaded(const qb_scheme *s, const void *loaded, const uint8_t *msg, size_t msg_len,
                                     const uint8_t *sig, size_t sig_len) {
	(void) s;
	return secp_verify_parsed(loaded, msg, msg_len, sig, sig_len);
}

/* --- OpenSSL helpers (both schemes) ------------------------------------------- */

static void evp_pkey_free(void *p) { EVP_PKEY_free(p); }

/* EVP sign with a loaded key: a fresh EVP_MD_CTX per signature, as a caller signing
 * independent messages uses it. md is NULL for Ed25519 (it hashes internally). */
static int evp_sign(const EVP_MD *md, EVP_PKEY *pkey, const uint8_t *msg, size_t msg_len, uint8_t *sig,
                    size_t *sig_len) {
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	int ok = ctx != NULL && EVP_DigestSignInit(ctx, NULL, md, NULL, pkey) == 1 &&
	         EVP_DigestSign(ctx, sig, sig_len, msg, msg_len) == 1;
	EVP_MD_CTX_free(ctx);
	return ok ? 0 : -1;
}

/* EVP verify with a loaded public key; any failure on the signature bytes is a
 * rejection (OpenSSL returns 0 or -1 for malformed DER), after which we clear the
 * thread's error queue so a flood of bad signatures costs no more than it should. */
static qb_verdict evp_verify(const EVP_MD *md, EVP_PKEY *pkey, const uint8_t *msg, size_t msg_len, const uint8_t *sig,
                             size_t sig_len) {
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	if (ctx == NULL) {
		return QB_ERROR;
	}
	qb_verdict v = QB_INVALID;
	if (EVP_DigestVerifyInit(ctx, NULL, md, NULL, pkey) == 1 &&
	    EVP_DigestVerify(ctx, sig, sig_len, msg, msg_len) == 1) {
		v = QB_VALID;
	} else {
		ERR_clear_error();
	}
	EVP_MD_CTX_free(ctx);
	return v;
}

/* --- ECDSA secp256k1, OpenSSL ------------------------------------------------- */

/* A public key from its 33 compressed bytes, through OpenSSL 3's provider API. */
static void *ossl_ec_pk_load(const qb_scheme *s, const uint8_t *pk) {
	(void) s;
	EVP_PKEY *pkey = NULL;
	EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
	OSSL_PARAM params[] = {
		OSSL_PARAM_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, (char *) "secp256k1", 0),
		OSSL_PARAM_octet_string(OSSL_PKEY_PARAM_PUB_KEY, (void *) pk, SECP_PK_BYTES),
		OSSL_PARAM_END,
	};
	if (ctx == NULL || EVP_PKEY_fromdata_init(ctx) != 1 || EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) != 1) {
		EVP_PKEY_free(pkey);
		pkey = NULL;
		ERR_clear_error();
	}
	EVP_PKEY_CTX_free(ctx);
	return pkey;
}

static int ossl_ec_keypair(const qb_scheme *s, qb_keypair *kp) {
	(void) s;
	BIGNUM *priv = NULL;
	uint8_t point[SECP_UNCOMPRESSED_BYTES];
	size_t len = 0;
	/* OpenSSL 3.0 exports the point uncompressed (04 || x || y) whatever format is
	 * set on the key; we compress it ourselves: (02 | parity of y) || x. */
	EVP_PKEY *pkey = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "secp256k1");
	int ok = pkey != NULL &&
	         EVP_PKEY_get_octet_string_param(pkey, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, point, sizeof point, &len) == 1 &&
	         len == SECP_UNCOMPRESSED_BYTES && point[0] == 0x04 &&
	         EVP_PKEY_get_bn_param(pkey, OSSL_PKEY_PARAM_PRIV_KEY, &priv) == 1 &&
	         BN_bn2binpad(priv, kp->sk, SECP_SK_BYTES) == SECP_SK_BYTES;
	BN_clear_free(priv);
	if (!ok) {
		EVP_PKEY_free(pkey);
		ERR_clear_error();
		return -1;
	}
	kp->pk[0] = (uint8_t) (0x02 | (point[SECP_UNCOMPRESSED_BYTES - 1] & 1));
	memcpy(kp->pk + 1, point + 1, SECP_PK_BYTES - 1);
	EVP_PKEY_free(kp->native);
	kp->native = pkey;
	return 0;
}

/* --- Ed25519, OpenSSL --------------------------------------------------------- */

static int ossl_ed_keypair(const qb_scheme *s, qb_keypair *kp) {
	(void) s;
	size_t pk_len = ED25519_PK_BYTES, sk_len = ED25519_RAW_SK_BYTES;
	EVP_PKEY *pkey = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
	if (pkey == NULL || EVP_PKEY_get_raw_public_key(pkey, kp->pk, &pk_len) != 1 ||
	    EVP_PKEY_get_raw_private_key(pkey, kp->sk, &sk_len) != 1 || pk_len != ED25519_PK_BYTES ||
	    sk_len != ED25519_RAW_SK_BYTES) {
		EVP_PKEY_free(pkey);
		return -1;
	}
	EVP_PKEY_free(kp->native);
	kp->native = pkey;
	return 0;
}

static void *ossl_ed_pk_load(const qb_scheme *s, const uint8_t *pk) {
	(void) s;
	EVP_PKEY *pkey = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pk, ED25519_PK_BYTES);
	if (pkey == NULL) {
		ERR_clear_error();
	}
	return pkey;
}

/* --- both OpenSSL schemes ---------------------------------------------------- */

/* Ed25519 hashes internally (no digest is passed); ECDSA signs SHA-256(message). */
static const EVP_MD *ossl_md(const qb_scheme *s) {
	return strcmp(s->name, "Ed25519") == 0 ? NULL : sha256_md;
}

static int ossl_sign(const qb_scheme *s, const qb_keypair *kp, const uint8_t *msg, size_t msg_len, uint8_t *sig,
                     size_t *sig_len) {
	return evp_sign(ossl_md(s), kp->native, msg, msg_len, sig, sig_len);
}

static qb_verdict ossl_verify_loaded(const qb_scheme *s, const void *loaded, const uint8_t *msg, size_t msg_len,
                                     const uint8_t *sig, size_t sig_len) {
	return evp_verify(ossl_md(s), (EVP_PKEY *) loaded, msg, msg_len, sig, sig_len);
}

/* Bytes in: import the public key (the scheme's pk_load), verify, free. */
static qb_verdict ossl_verify(const qb_scheme *s, const uint8_t *pk, const uint8_t *msg, size_t msg_len,
                              const uint8_t *sig, size_t sig_len) {
	EVP_PKEY *pkey = s->pk_load(s, pk);
	if (pkey == NULL) {
		return QB_INVALID;
	}
	qb_verdict v = ossl_verify_loaded(s, pkey, msg, msg_len, sig, sig_len);
	EVP_PKEY_free(pkey);
	return v;
}

/* --- Ed25519, libsodium ------------------------------------------------------- */

static int sodium_keypair(const qb_scheme *s, qb_keypair *kp) {
	(void) s;
	return crypto_sign_keypair(kp->pk, kp->sk) == 0 ? 0 : -1;
}

static int sodium_sign(const qb_scheme *s, const qb_keypair *kp, const uint8_t *msg, size_t msg_len, uint8_t *sig,
                       size_t *sig_len) {
	(void) s;
	unsigned long long len = 0;
	if (*sig_len < crypto_sign_BYTES || crypto_sign_detached(sig, &len, msg, msg_len, kp->sk) != 0) {
		return -1;
	}
	*sig_len = (size_t) len;
	return 0;
}

static qb_verdict sodium_verify(const qb_scheme *s, const uint8_t *pk, const uint8_t *msg, size_t msg_len,
                                const uint8_t *sig, size_t sig_len) {
	(void) s;
	/* The detached API reads exactly 64 bytes: check the length first. */
	if (sig_len != crypto_sign_BYTES) {
		return QB_INVALID;
	}
	return crypto_sign_verify_detached(sig, msg, msg_len, pk) == 0 ? QB_VALID : QB_INVALID;
}

/* --- registration ------------------------------------------------------------- */

/* The four wrappers; names, libraries and implementation strings are filled in by
 * qb_classical_register (versions are only known at run time). */
static const qb_scheme CLASSICAL[] = {
	/* Strongly unforgeable here: libsecp256k1 verifies only low-S signatures. */
	{.name = "ECDSA-secp256k1", .library = "libsecp256k1", .suf_cma = true, .pk_bytes = SECP_PK_BYTES,
	 .sk_bytes = SECP_SK_BYTES, .sig_max_bytes = SECP_COMPACT_SIG, .keypair = secp_keypair, .sign = secp_sign,
	 .verify = secp_verify, .pk_load = secp_pk_load, .verify_loaded = secp_verify_loaded, .pk_free = free},
	/* Malleable: OpenSSL accepts both (r, s) and (r, n - s). */
	{.name = "ECDSA-secp256k1", .library = "OpenSSL", .suf_cma = false, .pk_bytes = SECP_PK_BYTES,
	 .sk_bytes = SECP_SK_BYTES, .sig_max_bytes = SECP_DER_SIG_MAX, .keypair = ossl_ec_keypair, .sign = ossl_sign,
	 .verify = ossl_verify, .native_free = evp_pkey_free, .pk_load = ossl_ec_pk_load,
	 .verify_loaded = ossl_verify_loaded, .pk_free = evp_pkey_free},
	/* Both Ed25519 libraries reject a non-canonical S (RFC 8032's strong check). */
	{.name = "Ed25519", .library = "libsodium", .suf_cma = true, .pk_bytes = ED25519_PK_BYTES,
	 .sk_bytes = crypto_sign_SECRETKEYBYTES, .sig_max_bytes = ED25519_SIG_BYTES, .keypair = sodium_keypair,
	 .sign = sodium_sign, .verify = sodium_verify},
	{.name = "Ed25519", .library = "OpenSSL", .suf_cma = true, .pk_bytes = ED25519_PK_BYTES,
	 .sk_bytes = ED25519_RAW_SK_BYTES, .sig_max_bytes = ED25519_SIG_BYTES, .keypair = ossl_ed_keypair,
	 .sign = ossl_sign, .verify = ossl_verify, .native_free = evp_pkey_free, .pk_load = ossl_ed_pk_load,
	 .verify_loaded = ossl_verify_loaded, .pk_free = evp_pkey_free},
};
#define N_CLASSICAL (sizeof CLASSICAL / sizeof CLASSICAL[0])

static const char *library_version(const char *library) {
	if (strcmp(library, "libsecp256k1") == 0) {
		return QB_SECP256K1_VERSION;
	}
	return strcmp(library, "libsodium") == 0 ? sodium_version_string() : OPENSSL_VERSION_STR;
}

int qb_classical_register(qb_scheme *out, size_t max) {
	if (max < N_CLASSICAL) {
		return -1;
	}
	uint8_t seed[32];
	if (sodium_init() < 0) {
		fprintf(stderr, "error: sodium_init failed\n");
		return -1;
	}
	secp_ctx = secp256k1_context_create(SECP256K1_CONTEXT_NONE);
	sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
	OQS_randombytes(seed, sizeof seed);
	/* Randomizing the context blinds signing against side channels (the library's
	 * recommendation); chains do it, so we measure with it. */
	if (secp_ctx == NULL || sha256_md == NULL || !secp256k1_context_randomize(secp_ctx, seed)) {
		fprintf(stderr, "error: cannot set up libsecp256k1 or OpenSSL's SHA-256\n");
		qb_classical_cleanup();
		return -1;
	}
	for (size_t i = 0; i < N_CLASSICAL; i++) {
		out[i] = CLASSICAL[i];
		snprintf(out[i].id, sizeof out[i].id, "%s/%s", out[i].name, out[i].library);
		snprintf(out[i].implementation, sizeof out[i].implementation, "%s %s", out[i].library,
		         library_version(out[i].library));
	}
	return (int) N_CLASSICAL;
}

void qb_classical_cleanup(void) {
	if (secp_ctx != NULL) {
		secp256k1_context_destroy(secp_ctx);
		secp_ctx = NULL;
	}
	EVP_MD_free(sha256_md);
	sha256_md = NULL;
}
