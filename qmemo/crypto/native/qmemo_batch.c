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
 * invalid, as is every later one. The same length rules as SignatureScheme.verify apply before liboqs is
 * called (liboqs trusts the caller for the public key's length), so a malformed item is
 * simply invalid. `elapsed_ns`, when not NULL, receives each verify's duration
 * (CLOCK_MONOTONIC), so the node's latency histogram stays per signature.
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime under -std=c11 */
#include <stdint.h>
#include <stddef.h>
#include <time.h>
#include <oqs/oqs.h>

static uint64_t now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* Returns the number of valid signatures; ok[i] is 1 for a valid item, 0 otherwise. */
size_t qmemo_verify_batch(const OQS_SIG *sig, size_t count, const uint8_t *blob, uint64_t blob_len,
                          const uint64_t *lengths, int fixed_signature_length, uint8_t *ok, uint64_t *elapsed_ns) {
	size_t valid = 0;
	uint64_t offset = 0;
	for (size_t i = 0; i < count; i++) {
		ok[i] = 0;
		if (elapsed_ns) {
			elapsed_ns[i] = 0;
		}
	}
	if (sig == NULL) {
		return 0;
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
		int good = pk_len == sig->length_public_key && sig_len > 0 && sig_len <= sig->length_signature &&
		           (!fixed_signature_length || sig_len == sig->length_signature) &&
		           OQS_SIG_verify(sig, msg, (size_t) msg_len, signature, (size_t) sig_len, pk) == OQS_SUCCESS;
		if (elapsed_ns) {
			elapsed_ns[i] = now_ns() - started;
		}
		ok[i] = (uint8_t) good;
		valid += (size_t) good;
	}
	return valid;
}
