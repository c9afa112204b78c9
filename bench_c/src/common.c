/* common.c - helpers every benchmark main uses (see bench.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

int qb_opts_schemes(const qb_opts *o, const qb_scheme **out, size_t max) {
	int n = qb_schemes_resolve(o->alg, out, max);
	if (n == 0) {
		fprintf(stderr, "error: --alg '%s' names no scheme\n", o->alg);
		return -1;
	}
	return n;
}

int qb_parse_counts(const char *list, uint64_t *out, size_t max) {
	size_t n = 0;
	const char *p = list;
	while (*p != '\0') {
		char *end = NULL;
		errno = 0;
		unsigned long long v = strtoull(p, &end, 10);
		if (end == p || errno != 0 || v == 0 || (*end != ',' && *end != '\0') || n == max) {
			fprintf(stderr, "error: '%s' is not a list of positive counts like 1,2,4\n", list);
			return -1;
		}
		out[n++] = v;
		p = *end == ',' ? end + 1 : end;
	}
	if (n == 0) {
		fprintf(stderr, "error: empty list\n");
		return -1;
	}
	return (int) n;
}

qb_plan qb_opts_plan(const qb_opts *o) {
	qb_plan p = {
		.duration_s = o->duration_s,
		.total_ops = o->iterations,
		.batch_ops = 0,
		.warmup_s = o->warmup_s,
		.min_ops = 1,
	};
	return p;
}

void qb_scheme_json(qb_json *j, const qb_scheme *s) {
	qb_json_str(j, "scheme", s->id);
	qb_json_str(j, "name", s->name);
	qb_json_str(j, "library", s->library);
	qb_json_str(j, "implementation", s->implementation);
	qb_json_bool(j, "post_quantum", s->post_quantum);
	if (s->nist_level > 0) {
		qb_json_int(j, "nist_level", s->nist_level);
	} else {
		qb_json_null(j, "nist_level");
	}
	qb_json_uint(j, "public_key_bytes", s->pk_bytes);
	qb_json_uint(j, "secret_key_bytes", s->sk_bytes);
	qb_json_uint(j, "signature_bytes_max", s->sig_max_bytes);
	qb_json_bool(j, "suf_cma", s->suf_cma);
}

int qb_measure_verify(const qb_opts *o, const qb_scheme *s, const qb_plan *plan, qb_measurement *m,
                      size_t *ring_signed) {
	qb_workload w;
	if (qb_workload_init(&w, s, o->msg_bytes, o->ring, o->seed) != 0) {
		return -1;
	}
	int ret = -1;
	if (qb_workload_sign(&w, QB_SIGN_RING_BUDGET_S) == 0) {
		qb_verify_set vs = qb_workload_valid_set(&w);
		*ring_signed = w.filled;
		ret = qb_measure(qb_op_verify, &vs, plan, m);
	}
	qb_workload_free(&w);
	return ret;
}

int qb_each_scheme(const qb_opts *o, qb_json *j, const char *header, qb_scheme_fn one) {
	const qb_scheme *schemes[QB_MAX_LIST];
	int n = qb_opts_schemes(o, schemes, QB_MAX_LIST);
	if (n < 0) {
		return QB_EXIT_USAGE;
	}
	if (header != NULL) {
		fputs(header, stdout);
	}
	qb_json_object(j, "results");
	qb_json_array(j, "schemes");
	for (int i = 0; i < n; i++) {
		if (one(o, schemes[i], j) != 0) {
			return QB_EXIT_FAIL; /* main closes the open JSON objects */
		}
		fflush(stdout);
	}
	qb_json_end(j);
	qb_json_end(j);
	return QB_EXIT_OK;
}
