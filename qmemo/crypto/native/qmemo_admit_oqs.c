/*
 * qmemo_admit_oqs.c - the admission kernel's liboqs verifier adapter.
 *
 * Kept apart from qmemo_admit.c so the parser and hasher build (and fuzz) without
 * liboqs. The length rule is not decided here: it comes in as data (the registry's
 * SchemeRules, as qmemo_batch.c gets it) and the table applies it before every call.
 * Here it is only checked to fit liboqs's sizes, once, when the slot is set: liboqs
 * trusts the caller for the public key's length, so the rule must pin it to liboqs's.
 */
#include <stdlib.h>
#include <oqs/oqs.h>

#include "qmemo_admit.h"

/* ctx is the OQS_SIG itself: constants and function pointers only, safe to share between threads. */
static int oqs_verify(void *ctx, const uint8_t *public_key, size_t public_key_length, const uint8_t *message,
                      size_t message_length, const uint8_t *signature, size_t signature_length) {
	(void) public_key_length; /* the table's rule pinned it to sig->length_public_key */
	return OQS_SIG_verify(ctx, message, message_length, signature, signature_length, public_key) == OQS_SUCCESS;
}

static void free_oqs(void *ctx) { OQS_SIG_free(ctx); }

int qmemo_admit_table_set_oqs(qmemo_admit_table *table, uint8_t scheme_id, const char *method_name,
                              const qmemo_admit_length_rule *rule) {
	if (!table || !method_name || !rule) {
		return -1;
	}
	OQS_SIG *sig = OQS_SIG_new(method_name);
	if (!sig) {
		return -1;
	}
	if (rule->public_key_bytes != sig->length_public_key || rule->min_signature_bytes < 1 ||
	        rule->min_signature_bytes > rule->max_signature_bytes || rule->max_signature_bytes > sig->length_signature) {
		OQS_SIG_free(sig);
		return -2;
	}
	if (qmemo_admit_table_set_with_rule(table, scheme_id, oqs_verify, sig, free_oqs, rule) != 0) {
		OQS_SIG_free(sig);
		return -1;
	}
	return 0;
}
