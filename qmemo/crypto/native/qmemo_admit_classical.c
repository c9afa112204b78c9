/*
 * qmemo_admit_classical.c - the admission kernel's slots for the classical baselines:
 * Ed25519 on libsodium and ECDSA secp256k1 on libsecp256k1, the libraries the registry's
 * Python classes call (PyNaCl, coincurve), so that a chain carrying them is admitted on
 * the same native path as one carrying Falcon or ML-DSA and the scheme comparison
 * measures signatures, not Python.
 *
 * Verdicts are the registry's (qmemo/crypto/schemes.py), checked by
 * tests/unit/test_admit_classical.py on valid, mutated and malformed inputs:
 * - Ed25519: crypto_sign_verify_detached over the message (PyNaCl's VerifyKey.verify).
 * - ECDSA: SHA-256 of the message, a 33-byte compressed key, a 64-byte compact (r || s)
 *   signature whose r and s are below the group order, verified by secp256k1_ecdsa_verify,
 *   which refuses a high-S signature (coincurve's PublicKey.verify does the same).
 * The length rule (key and signature sizes) is the slot's, handed down as data.
 */
#include "qmemo_admit.h"

#include <secp256k1.h>
#include <sodium.h>

static int ed25519_verify(void *ctx, const uint8_t *public_key, size_t public_key_length, const uint8_t *message,
                          size_t message_length, const uint8_t *signature, size_t signature_length) {
	(void) ctx;
	if (public_key_length != crypto_sign_PUBLICKEYBYTES || signature_length != crypto_sign_BYTES) {
		return 0;
	}
	return crypto_sign_verify_detached(signature, message, message_length, public_key) == 0;
}

static int secp256k1_verify(void *ctx, const uint8_t *public_key, size_t public_key_length, const uint8_t *message,
                            size_t message_length, const uint8_t *signature, size_t signature_length) {
	(void) ctx;
	secp256k1_pubkey key;
	secp256k1_ecdsa_signature parsed;
	uint8_t digest[crypto_hash_sha256_BYTES];
	if (public_key_length != 33 || signature_length != 64) {
		return 0;
	}
	const secp256k1_context *context = secp256k1_context_static;
	if (!secp256k1_ec_pubkey_parse(context, &key, public_key, public_key_length) ||
	        !secp256k1_ecdsa_signature_parse_compact(context, &parsed, signature)) {
		return 0;
	}
	crypto_hash_sha256(digest, message, message_length);
	return secp256k1_ecdsa_verify(context, &parsed, digest, &key) == 1;
}

int qmemo_admit_table_set_classical(qmemo_admit_table *table, uint8_t scheme_id, const char *which,
                                    const qmemo_admit_length_rule *rule) {
	if (!table || !which || !rule) {
		return -1;
	}
	if (sodium_init() < 0) {
		return -1;
	}
	qmemo_admit_verify_fn verify = NULL;
	if (which[0] == 'e' && which[1] == 'd' && which[2] == '\0') {
		verify = ed25519_verify;
	} else if (which[0] == 'k' && which[1] == '1' && which[2] == '\0') {
		verify = secp256k1_verify;
	}
	if (!verify) {
		return -1;
	}
	return qmemo_admit_table_set_with_rule(table, scheme_id, verify, NULL, NULL, rule);
}
