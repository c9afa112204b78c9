/* bench_sizes.c - `sizes`: the distribution of signature lengths over many
 * signatures (default 10,000 each for Falcon-512/1024 and their padded variants),
 * each over a fresh random message: mean, stdev, percentiles, a histogram, and how the
 * lengths sit against the maximum the library declares (length_signature). A
 * signature longer than the declared maximum aborts the run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

static int one_scheme(const qb_opts *o, const qb_scheme *s, qb_json *j) {
	const size_t n = (size_t) o->iterations;
	int ret = -1;
	qb_workload w;
	if (qb_workload_init(&w, s, o->msg_bytes, 1, o->seed) != 0) {
		return -1;
	}
	double *lens = malloc(n * sizeof *lens);
	uint64_t *hist = calloc(s->sig_max_bytes + 1, sizeof *hist);
	qb_summary sum;
	if (lens == NULL || hist == NULL) {
		goto cleanup;
	}
	uint8_t *msg = w.msgs;
	qb_sign_ctx sc = {.w = &w};
	for (size_t i = 0; i < n; i++) {
		qb_rng_fill(&w.rng, msg, w.msg_bytes); /* a fresh message for every signature */
		if (qb_op_sign(&sc, i) != 0) {         /* checks 0 < length <= declared max */
			goto cleanup;
		}
		lens[i] = (double) w.sig_lens[0];
		hist[w.sig_lens[0]]++;
	}
	if (qb_summarize(lens, n, &sum) != 0) {
		goto cleanup;
	}
	printf("%-22s %8zu %8.1f %8.2f %6.0f %6.0f %6.0f %6.0f %9zu %8.1f%%\n", s->id, n, sum.mean, sum.stdev, sum.min,
	       sum.median, sum.p99, sum.max, s->sig_max_bytes, 100.0 * sum.mean / (double) s->sig_max_bytes);
	qb_json_object(j, NULL);
	qb_scheme_json(j, s);
	qb_json_uint(j, "msg_bytes", o->msg_bytes);
	qb_json_uint(j, "signatures", n);
	qb_json_num(j, "mean", sum.mean);
	qb_json_num(j, "stdev", sum.stdev);
	qb_json_num(j, "min", sum.min);
	qb_json_num(j, "max", sum.max);
	qb_json_num(j, "p99", sum.p99);
	qb_json_bool(j, "fixed_length", sum.min == sum.max);
	qb_json_num(j, "mean_fraction_of_max", sum.mean / (double) s->sig_max_bytes);
	qb_json_num(j, "headroom_bytes", (double) s->sig_max_bytes - sum.max);
	qb_summary_json(j, "distribution", &sum);
	qb_json_array(j, "histogram"); /* [length, count] pairs, ascending */
	for (size_t len = 0; len <= s->sig_max_bytes; len++) {
		if (hist[len] != 0) {
			qb_json_array(j, NULL);
			qb_json_uint(j, NULL, len);
			qb_json_uint(j, NULL, hist[len]);
			qb_json_end(j);
		}
	}
	qb_json_end(j);
	qb_json_end(j);
	ret = 0;
cleanup:
	free(lens);
	free(hist);
	qb_workload_free(&w);
	return ret;
}

int bench_sizes(const qb_opts *o, qb_json *j) {
	char header[160];
	snprintf(header, sizeof header, "%-22s %8s %8s %8s %6s %6s %6s %6s %9s %9s\n", "Scheme", "Sigs", "Mean B", "Stdev",
	         "Min", "P50", "P99", "Max", "Declared", "Mean/max");
	return qb_each_scheme(o, j, header, one_scheme);
}
