/* bench_verify.c - `verify`: one single timed pass of N verifications (default
 * 10,000 Falcon-512): throughput, microseconds and TSC ticks per verification. The
 * clock is read once before and once after the pass. */
#include <stdio.h>

#include "bench.h"

static int one_scheme(const qb_opts *o, const qb_scheme *s, qb_json *j) {
	qb_plan plan = qb_opts_plan(o);
	plan.batch_ops = plan.total_ops; /* one batch: a single timed pass */
	qb_measurement m;
	size_t ring = 0;
	if (qb_measure_verify(o, s, &plan, &m, &ring) != 0) {
		return -1;
	}
	printf("%-28s %10llu %12.4f %12.1f %10.3f %14.0f\n", s->id, (unsigned long long) m.ops, m.elapsed_s, m.ops_per_s,
	       m.us_per_op, m.ticks_per_op);
	qb_json_object(j, NULL);
	qb_scheme_json(j, s);
	qb_json_uint(j, "msg_bytes", o->msg_bytes);
	qb_json_uint(j, "distinct_signatures", ring);
	qb_json_uint(j, "iterations", m.ops);
	qb_json_num(j, "ops_per_s", m.ops_per_s);
	qb_json_num(j, "us_per_op", m.us_per_op);
	qb_json_num(j, "tsc_ticks_per_op", m.ticks_per_op);
	qb_measurement_json(j, "measurement", &m);
	qb_json_end(j);
	qb_measurement_free(&m);
	return 0;
}

int bench_verify(const qb_opts *o, qb_json *j) {
	char header[128];
	snprintf(header, sizeof header, "%-28s %10s %12s %12s %10s %14s\n", "Scheme", "Verifies", "Total s", "ops/s",
	         "us/op", "TSC ticks/op");
	return qb_each_scheme(o, j, header, one_scheme);
}
