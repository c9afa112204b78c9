/* bench_statistical.c - `statistical`: T independently timed trials of B
 * verifications each (default 1,000 x 100 Falcon-512), and the full distribution of
 * the per-trial throughput: mean, median, stdev, CV, percentiles, IQR, 3-sigma
 * outliers, skewness, excess kurtosis, Jarque-Bera, and the summary statistic the
 * distribution calls for: mean and stdev only when both the per-trial rate and the
 * per-trial time pass the normality test (they are reciprocals, so one can look
 * normal while the other is skewed), otherwise median and IQR. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

static void print_summary(const char *unit, const qb_summary *s) {
	printf("  %-14s mean %.1f  median %.1f  stdev %.1f  CV %.2f%%\n", unit, s->mean, s->median, s->stdev, s->cv * 100);
	printf("  %-14s min %.1f  P1 %.1f  P5 %.1f  P25 %.1f  P75 %.1f  P95 %.1f  P99 %.1f  max %.1f  IQR %.1f\n", "",
	       s->min, s->p1, s->p5, s->p25, s->p75, s->p95, s->p99, s->max, s->iqr);
}

static int one_scheme(const qb_opts *o, const qb_scheme *s, qb_json *j) {
	qb_plan plan = qb_opts_plan(o);
	plan.total_ops = o->trials * o->batch;
	plan.batch_ops = o->batch;
	qb_measurement m;
	size_t ring = 0;
	if (qb_measure_verify(o, s, &plan, &m, &ring) != 0) {
		return -1;
	}
	int ret = -1;
	double *ops = malloc(m.batches * sizeof *ops);
	qb_summary ops_s, ticks_s;
	if (ops == NULL || qb_summarize(m.batch_ticks_per_op, m.batches, &ticks_s) != 0) {
		goto cleanup;
	}
	for (uint64_t i = 0; i < m.batches; i++) {
		ops[i] = 1e6 / m.batch_us_per_op[i];
	}
	if (qb_summarize(ops, m.batches, &ops_s) != 0) {
		goto cleanup;
	}
	printf("%s: %llu trials x %llu verifications (%zu distinct signatures, %zu-byte messages)\n", s->id,
	       (unsigned long long) m.batches, (unsigned long long) o->batch, ring, o->msg_bytes);
	print_summary("ops/s", &ops_s);
	print_summary("us/op", &m.batch_us);
	printf("  ops/s: outliers >3 sigma %zu/%zu, skewness %.3f, excess kurtosis %.3f, Jarque-Bera %.1f (%s at 5%%)\n",
	       ops_s.outliers_3sigma, ops_s.n, ops_s.skewness, ops_s.excess_kurtosis, ops_s.jarque_bera,
	       ops_s.normal_5pct ? "consistent with normal" : "NOT normal");
	printf("  us/op: outliers >3 sigma %zu/%zu, skewness %.3f, excess kurtosis %.3f, Jarque-Bera %.1f (%s at 5%%)\n",
	       m.batch_us.outliers_3sigma, m.batch_us.n, m.batch_us.skewness, m.batch_us.excess_kurtosis,
	       m.batch_us.jarque_bera, m.batch_us.normal_5pct ? "consistent with normal" : "NOT normal");
	const char *recommendation = ops_s.normal_5pct && m.batch_us.normal_5pct ? "mean_stdev" : "median_iqr";
	printf("  report: %s -> %.1f ops/s (IQR %.1f), %.3f us/op, %.0f TSC ticks/op (medians)\n\n", recommendation,
	       ops_s.median, ops_s.iqr, m.batch_us.median, ticks_s.median);

	qb_json_object(j, NULL);
	qb_scheme_json(j, s);
	qb_json_uint(j, "msg_bytes", o->msg_bytes);
	qb_json_uint(j, "distinct_signatures", ring);
	qb_json_uint(j, "trials", m.batches);
	qb_json_uint(j, "batch", o->batch);
	qb_json_str(j, "recommendation", recommendation);
	qb_json_num(j, "median_ops_per_s", ops_s.median);
	qb_json_num(j, "median_us_per_op", m.batch_us.median);
	qb_json_num(j, "p99_us_per_op", m.batch_us.p99);
	qb_json_num(j, "median_tsc_ticks_per_op", ticks_s.median);
	qb_summary_json(j, "ops_per_s", &ops_s);
	qb_summary_json(j, "us_per_op", &m.batch_us);
	qb_summary_json(j, "tsc_ticks_per_op", &ticks_s);
	qb_json_uint(j, "warmup_ops", m.warmup_ops);
	qb_json_end(j);
	ret = 0;
cleanup:
	free(ops);
	qb_measurement_free(&m);
	return ret;
}

int bench_statistical(const qb_opts *o, qb_json *j) {
	return qb_each_scheme(o, j, NULL, one_scheme);
}
