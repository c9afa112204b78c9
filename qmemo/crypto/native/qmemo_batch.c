/*
 * qmemo_batch.c - verify many signatures in one native call.
 *
 * Why: a node verifies every transaction it admits. Through ctypes each verify is one
 * foreign call that drops and re-takes Python's GIL; with thousands of calls a second,
 * the verify threads and the event loop spend their time handing the GIL back and
 * forth instead of overlapping (measured: 2 verify threads gave 1.17x one). Here a
 * whole chunk is verified in one call, so the GIL is released once per chunk and the
 * event loop runs freely meanwhile.
 *
 * Input layout (built by qmemo/crypto/batch.py): `blob` holds, for each item, its
 * public key, message and signature back to back; `lengths` holds the three lengths
 * per item, and `blob_len` its size: an item whose lengths would run past the blob is
 * unchecked, as is every later one.
 *
 * The length rule is not decided here: it comes in as data (`rule`, filled by batch.py
 * from the scheme's qmemo.core.scheme_rules.SchemeRules, the one rule the Python code
 * applies too) and this file only applies it, before liboqs is called: liboqs trusts
 * the caller for the public key's length and would read past a short key. A rule that
 * does not fit the OQS_SIG (a key length other than liboqs's, a signature longer than
 * liboqs's maximum, an empty signature allowed) is refused as a whole. Each item gets a
 * verdict, so a caller (and tests/vectors/signature_lengths.json's test) can tell an
 * item refused on length grounds from one liboqs rejected. `elapsed_ns`, when not NULL,
 * receives each verify's duration (CLOCK_MONOTONIC), so the node's latency histogram
 * stays per signature.
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c11 */
#include <stdint.h>
#include <stddef.h>
#include <time.h>
#include <oqs/oqs.h>

/* The length rule of one scheme: a key of exactly public_key_bytes, a signature of
 * min_signature_bytes..max_signature_bytes (min == max for a fixed-length scheme). */
typedef struct {
	uint64_t public_key_bytes;
	uint64_t min_signature_bytes;
	uint64_t max_signature_bytes;
} qmemo_length_rule;

/* Per-item verdicts; batch.py mirrors these values. */
enum {
	QMEMO_UNCHECKED = 0,     /* not reached: its lengths run past the blob */
	QMEMO_VALID = 1,
	QMEMO_BAD_LENGTH = 2,    /* refused by the length rule; liboqs was not called */
	QMEMO_BAD_SIGNATURE = 3, /* lengths fit, liboqs rejected it */
};

/* Returned instead of a count when `rule` does not fit `sig` (no item is checked). */
#define QMEMO_RULE_MISMATCH SIZE_MAX

static uint64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static int rule_fits(const qmemo_length_rule *rule, const OQS_SIG *sig) {
	return rule->public_key_bytes == sig->length_public_key && rule->min_signature_bytes >= 1 &&
	       rule->min_signature_bytes <= rule->max_signature_bytes && rule->max_signature_bytes <= sig->length_signature;
}

/* Returns the number of valid signatures (verdict[i] == QMEMO_VALID), or QMEMO_RULE_MISMATCH. */
size_t qmemo_verify_batch(const OQS_SIG *sig, const qmemo_length_rule *rule, size_t count, const uint8_t *blob,
                          uint64_t blob_len, const uint64_t *lengths, uint8_t *verdict, uint64_t *elapsed_ns) {
	size_t valid = 0;
	uint64_t offset = 0;
	for (size_t i = 0; i < count; i++) {
		verdict[i] = QMEMO_UNCHECKED;
		if (elapsed_ns) {
			elapsed_ns[i] = 0;
		}
	}
	if (sig == NULL || rule == NULL || !rule_fits(rule, sig)) {
		return QMEMO_RULE_MISMATCH;
	}
	for (size_t i = 0; i < count; i++) {
		uint64_t pk_len = lengths[3 * i], msg_len = lengths[3 * i + 1], sig_len = lengths[3 * i + 2];
		/* Never read past the blob, whatever lengths we are handed (overflow-safe). */
		if (pk_len > blob_len - offset || msg_len > blob_len - offset - pk_len ||
		        sig_len > blob_len - offset - pk_len - msg_len) {
			break;
		}
		const uint8_t *pk = blob + offset, *msg = pk + pk_len, *signature = msg + msg_len;
		offset += pk_len + msg_len + sig_len;
		uint64_t started = elapsed_ns ? now_ns() : 0;
		if (pk_len != rule->public_key_bytes || sig_len < rule->min_signature_bytes ||
		        sig_len > rule->max_signature_bytes) {
			verdict[i] = QMEMO_BAD_LENGTH;
		} else if (OQS_SIG_verify(sig, msg, (size_t) msg_len, signature, (size_t) sig_len, pk) == OQS_SUCCESS) {
			verdict[i] = QMEMO_VALID;
			valid++;
		} else {
			verdict[i] = QMEMO_BAD_SIGNATURE;
		}
		if (elapsed_ns) {
			elapsed_ns[i] = now_ns() - started;
		}
	}
	return valid;
}
