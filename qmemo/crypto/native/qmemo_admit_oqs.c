/*
 * qmemo_admit_oqs.c - the admission kernel's liboqs verifier adapter.
 *
 * Kept apart from qmemo_admit.c so the parser and hasher build (and fuzz) without
 * liboqs. The length rules are the registry's (OqsScheme.verify, qmemo_batch.c): liboqs
 * trusts the caller for the public key's length, so the key must be exactly its length;
 * a signature is 1..max bytes, and exactly max for a fixed-length scheme (padded
 * Falcon's liboqs verify accepts a padded signature with its zero tail cut off: one
 * signature, several encodings, which qMEMO refuses).
 */
#include <stdlib.h>
#include <oqs/oqs.h>

#include "qmemo_admit.h"

typedef struct {
	OQS_SIG *sig; /* constants and function pointers only: safe to share between threads */
	int fixed_signature_length;
} oqs_slot;

static int oqs_verify(void *ctx, const uint8_t *public_key, size_t public_key_length, const uint8_t *message,
                      size_t message_length, const uint8_t *signature, size_t signature_length) {
	const oqs_slot *slot = ctx;
	const OQS_SIG *sig = slot->sig;
	if (public_key_length != sig->length_public_key || signature_length == 0 ||
	        signature_length > sig->length_signature ||
	        (slot->fixed_signature_length && signature_length != sig->length_signature)) {
		return 0;
	}
	return OQS_SIG_verify(sig, message, message_length, signature, signature_length, public_key) == OQS_SUCCESS;
}

static void free_oqs_slot(void *ctx) {
	oqs_slot *slot = ctx;
	OQS_SIG_free(slot->sig);
	free(slot);
}

int qmemo_admit_table_set_oqs(qmemo_admit_table *table, uint8_t scheme_id, const char *method_name,
                              int fixed_signature_length) {
	if (!table || !method_name) {
		return -1;
	}
	oqs_slot *slot = malloc(sizeof *slot);
	if (!slot) {
		return -1;
	}
	slot->sig = OQS_SIG_new(method_name);
	slot->fixed_signature_length = fixed_signature_length != 0;
	if (!slot->sig) {
		free(slot);
		return -1;
	}
	return qmemo_admit_table_set(table, scheme_id, oqs_verify, slot, free_oqs_slot);
}
