/* bench_invalid.c - `invalid`: what an attacker's flood of bad signatures costs a
 * node. For each scheme (default Falcon-512 and ML-DSA-44), verification throughput on
 *   valid        the workload's valid signatures (the reference)
 *   flipped_bit  each signature with one bit flipped, at a uniformly drawn position
 *   zeroed       all-zero bytes of each signature's length
 *   wrong_key    valid signatures checked against another key pair's public key
 *   garbage      random bytes of each signature's length
 * Every invalid case must be rejected, every valid one accepted; any other verdict
 * aborts the run. Each case is timed like compare's verify (--duration or
 * --iterations), on the same messages. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum { VALID, FLIPPED, ZEROED, WRONG_KEY, GARBAGE, N_CASES };
static const char *const CASE_NAMES[N_CASES] = {"valid", "flipped_bit", "zeroed", "wrong_key", "garbage"};

static int one_scheme(const qb_opts *o, const qb_scheme *s, qb_json *j) {
	int ret = -1;
	qb_workload w;
	qb_keypair other = {0};
	qb_measurement m[N_CASES];
	int measured = 0;
	uint8_t *bad[N_CASES] = {0}; /* per-case signature rings (NULL: the valid ring) */
	if (qb_workload_init(&w, s, o->msg_bytes, o->ring, o->seed) != 0) {
		return -1;
	}
	const size_t ring_bytes = w.ring * s->sig_max_bytes;
	if (qb_workload_sign(&w, QB_SIGN_RING_BUDGET_S) != 0 || qb_keypair_alloc(s, &other) != 0 ||
	    s->keypair(s, &other) != 0) {
		fprintf(stderr, "error: %s set-up failed\n", s->id);
		goto cleanup;
	}
	for (int c = FLIPPED; c <= GARBAGE; c++) {
		if (c == WRONG_KEY) {
			continue;
		}
		bad[c] = calloc(1, ring_bytes);
		if (bad[c] == NULL) {
			goto cleanup;
		}
		for (size_t k = 0; k < w.filled; k++) {
			uint8_t *dst = bad[c] + k * s->sig_max_bytes;
			size_t len = w.sig_lens[k];
			if (c == FLIPPED) {
				uint64_t r = qb_rng_next(&w.rng);
				memcpy(dst, w.sigs + k * s->sig_max_bytes, len);
				dst[(r >> 3) % len] ^= (uint8_t) (1u << (r & 7));
			} else if (c == GARBAGE) {
				qb_rng_fill(&w.rng, dst, len);
			} /* ZEROED: calloc's zeros */
		}
	}
	qb_plan plan = qb_opts_plan(o);
	for (int c = 0; c < N_CASES; c++) {
		qb_verify_set vs = qb_workload_valid_set(&w);
		if (c != VALID) {
			vs.expect = QB_INVALID;
		}
		if (bad[c] != NULL) {
			vs.sigs = bad[c];
		}
		if (c == WRONG_KEY) {
			vs.pk = other.pk;
		}
		if (qb_measure(qb_op_verify, &vs, &plan, &m[c]) != 0) {
			fprintf(stderr, "error: %s case '%s' did not get the expected verdict\n", s->id, CASE_NAMES[c]);
			goto cleanup;
		}
		measured++;
	}
	qb_json_object(j, NULL);
	qb_scheme_json(j, s);
	qb_json_uint(j, "msg_bytes", o->msg_bytes);
	qb_json_uint(j, "distinct_signatures", w.filled);
	qb_json_array(j, "cases");
	for (int c = 0; c < N_CASES; c++) {
		double rel = m[c].us_per_op / m[VALID].us_per_op;
		printf("%-24s %-12s %12.1f %10.3f %12.3f\n", s->id, CASE_NAMES[c], m[c].ops_per_s, m[c].us_per_op, rel);
		qb_json_object(j, NULL);
		qb_json_str(j, "case", CASE_NAMES[c]);
		qb_json_str(j, "expected", c == VALID ? "accepted" : "rejected");
		qb_json_num(j, "ops_per_s", m[c].ops_per_s);
		qb_json_num(j, "us_per_op", m[c].us_per_op);
		qb_json_num(j, "cost_relative_to_valid", rel);
		qb_measurement_json(j, "measurement", &m[c]);
		qb_json_end(j);
	}
	qb_json_end(j);
	qb_json_end(j);
	fflush(stdout);
	ret = 0;
cleanup:
	for (int c = 0; c < measured; c++) {
		qb_measurement_free(&m[c]);
	}
	for (int c = 0; c < N_CASES; c++) {
		free(bad[c]);
	}
	qb_keypair_free(s, &other);
	qb_workload_free(&w);
	return ret;
}

int bench_invalid(const qb_opts *o, qb_json *j) {
	char header[128];
	snprintf(header, sizeof header, "%-24s %-12s %12s %10s %12s\n", "Scheme", "Case", "ops/s", "us/op",
	         "cost vs valid");
	return qb_each_scheme(o, j, header, one_scheme);
}
