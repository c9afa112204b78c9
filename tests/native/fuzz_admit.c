/*
 * fuzz_admit.c - libFuzzer target for the admission kernel (qmemo/crypto/native/qmemo_admit.c).
 *
 * Input: byte 0 is max_count (0..255), byte 1 picks the flags (bit 0: verify) and the
 * chain id (bits 1..7), the rest is the POST /txs body, copied into a buffer of exactly
 * its size so AddressSanitizer flags any read past it. The verifier is a stub that reads
 * every byte it is handed (so a wrong offset or length is an ASan report) and answers by
 * parity; it is set for even scheme ids only, so NO_VERIFIER is exercised too.
 *
 * Besides memory safety, each run checks the invariants the Python binding relies on
 * and aborts on a violation: frames contiguous and covering the body, decoded records'
 * lengths adding up, offsets inside their record, verdicts consistent with chain id and
 * table, and every sender equal to a fresh hash of its key (the table, and with it the
 * kernel's address cache, lives across runs, so cached and colliding keys are hit).
 * Then the second phase (qmemo_admit_verify) runs on records whose offsets were
 * overwritten from the input: it must refuse them without reading outside the body.
 *
 * Build and run: tests/native/fuzz_admit.sh [seconds] [workdir].
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "blake3.h"
#include "qmemo_admit.h"

#define CHECK(cond) do { if (!(cond)) abort(); } while (0)

static volatile uint64_t sink; /* keeps the stub's reads from being optimised away */

static int stub_verify(void *ctx, const uint8_t *public_key, size_t public_key_length, const uint8_t *message,
                       size_t message_length, const uint8_t *signature, size_t signature_length) {
	uint64_t sum = (uintptr_t) ctx;
	for (size_t i = 0; i < public_key_length; i++) sum += public_key[i];
	for (size_t i = 0; i < message_length; i++) sum += message[i];
	for (size_t i = 0; i < signature_length; i++) sum += signature[i];
	sink = sum;
	return (int) (sum & 1);
}

static qmemo_admit_table *table(void) {
	static qmemo_admit_table *shared;
	if (!shared) {
		shared = qmemo_admit_table_new();
		CHECK(shared);
		for (unsigned id = 0; id < 256; id += 2) {
			CHECK(qmemo_admit_table_set(shared, (uint8_t) id, stub_verify, NULL, NULL) == 0);
		}
	}
	return shared;
}

/* H(ADDRESS, scheme_id || key)[:32], computed here without the kernel's cache. */
static void fresh_address(uint8_t scheme_id, const uint8_t *key, size_t length, uint8_t out[QMEMO_ADDRESS_BYTES]) {
	blake3_hasher hasher;
	blake3_hasher_init_derive_key(&hasher, "qMEMO v1 account address");
	blake3_hasher_update(&hasher, &scheme_id, 1);
	blake3_hasher_update(&hasher, key, length);
	blake3_hasher_finalize(&hasher, out, QMEMO_ADDRESS_BYTES);
}

static void check_records(const uint8_t *body, size_t body_length, uint32_t chain_id, int verify,
                          const qmemo_admit_record *records, size_t count) {
	size_t expected_offset = QMEMO_FRAME_PREFIX_BYTES;
	for (size_t i = 0; i < count; i++) {
		const qmemo_admit_record *r = &records[i];
		CHECK(r->record_offset == expected_offset);
		CHECK(r->record_length <= body_length - r->record_offset);
		expected_offset = r->record_offset + r->record_length + QMEMO_FRAME_PREFIX_BYTES;
		if (r->status != QMEMO_ADMIT_DECODED) {
			CHECK(r->status <= QMEMO_ADMIT_TRAILING_BYTES && r->verdict == QMEMO_ADMIT_NOT_CHECKED);
			continue;
		}
		CHECK(body[r->record_offset] == QMEMO_TX_VERSION && r->payload_length <= QMEMO_TX_MAX_PAYLOAD);
		CHECK((size_t) QMEMO_TX_FIXED_BYTES + r->public_key_length + r->payload_length + 2 + r->signature_length ==
		      r->record_length);
		CHECK(r->public_key_offset == r->record_offset + QMEMO_TX_FIXED_BYTES);
		CHECK(r->signature_offset + r->signature_length == r->record_offset + r->record_length);
		uint8_t address[QMEMO_ADDRESS_BYTES];
		fresh_address(r->scheme_id, body + r->public_key_offset, r->public_key_length, address);
		CHECK(memcmp(address, r->sender, QMEMO_ADDRESS_BYTES) == 0);
		uint8_t want;
		if (r->chain_id != chain_id) {
			want = QMEMO_ADMIT_WRONG_CHAIN_ID;
		} else if (!verify) {
			want = QMEMO_ADMIT_NOT_CHECKED;
		} else if (r->scheme_id % 2) {
			want = QMEMO_ADMIT_NO_VERIFIER;
		} else {
			want = r->verdict == QMEMO_ADMIT_VALID ? QMEMO_ADMIT_VALID : QMEMO_ADMIT_INVALID;
		}
		CHECK(r->verdict == want);
	}
	/* The frames cover the body exactly (the last one ends where it ends). */
	CHECK(count == 0 ? body_length == 0 : expected_offset - QMEMO_FRAME_PREFIX_BYTES == body_length);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
	if (size < 2) {
		return 0;
	}
	size_t max_count = data[0];
	int verify = data[1] & 1;
	uint32_t chain_id = data[1] >> 1;
	size_t body_length = size - 2;
	uint8_t *body = malloc(body_length ? body_length : 1);
	CHECK(body);
	memcpy(body, data + 2, body_length);

	/* Room for exactly as many records as the framing pass counts: ASan sees any write past them. */
	size_t capacity = 0;
	uint64_t count_detail = 0;
	int count_rc = qmemo_admit_count(body, body_length, max_count, &capacity, &count_detail);
	CHECK(capacity <= body_length / QMEMO_FRAME_PREFIX_BYTES);
	qmemo_admit_record *records = malloc((count_rc == QMEMO_ADMIT_OK && capacity ? capacity : 1) * sizeof *records);
	CHECK(records);
	size_t count = 0;
	uint64_t detail = 0;
	int rc = qmemo_admit_batch(table(), body, body_length, chain_id, max_count, verify ? QMEMO_ADMIT_VERIFY : 0,
	                           records, count_rc == QMEMO_ADMIT_OK ? capacity : 0, &count, &detail);
	CHECK(rc == count_rc && count == capacity && detail == count_detail);
	if (rc == QMEMO_ADMIT_OK) {
		CHECK(count <= max_count);
		check_records(body, body_length, chain_id, verify, records, count);
		/* The second phase on records whose offsets come from the input. */
		for (size_t i = 0; i < count; i++) {
			qmemo_admit_record *r = &records[i];
			r->verdict = QMEMO_ADMIT_NOT_CHECKED;
			if (i % 2) {
				r->public_key_offset = (uint32_t) (r->public_key_offset * 7u + data[0]);
				r->signature_offset ^= (uint32_t) data[1] << (i % 24);
				r->signature_length = (uint16_t) (r->signature_length + data[0]);
			}
		}
		CHECK(qmemo_admit_verify(table(), body, body_length, records, count, NULL) <= count);
	} else {
		CHECK(rc == QMEMO_ADMIT_FRAME_TRUNCATED_PREFIX || rc == QMEMO_ADMIT_FRAME_PAST_BODY ||
		      rc == QMEMO_ADMIT_FRAME_TOO_MANY);
		CHECK(count <= max_count);
		CHECK(rc != QMEMO_ADMIT_FRAME_TOO_MANY || count == max_count);
		CHECK(rc != QMEMO_ADMIT_FRAME_PAST_BODY || detail > 0);
	}
	free(records);
	free(body);
	return 0;
}
