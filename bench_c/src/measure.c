/* measure.c - see measure.h. */
#include "measure.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "timing.h"

/* Batches per duration-mode run that the automatic batch size aims for, and the
 * shortest batch worth timing (two clock reads cost ~50 ns: 1 ms makes that 5e-5). */
#define TARGET_BATCHES 200.0
#define MIN_BATCH_S 0.001

static int grow(qb_measurement *m, size_t *cap) {
	if (m->batches < *cap) {
		return 0;
	}
	size_t n = *cap ? *cap * 2 : 256;
	double *a = realloc(m->batch_us_per_op, n * sizeof *a);
	if (a == NULL) {
		return -1;
	}
	m->batch_us_per_op = a;
	double *b = realloc(m->batch_ticks_per_op, n * sizeof *b);
	if (b == NULL) {
		return -1;
	}
	m->batch_ticks_per_op = b;
	*cap = n;
	return 0;
}

int qb_measure(qb_op_fn op, void *ctx, const qb_plan *plan, qb_measurement *m) {
	memset(m, 0, sizeof *m);
	uint64_t i = 0;

	/* Warm-up: caches, branch predictors, lazy initialization inside the libraries,
	 * and the CPU's clock ramping up. Also our estimate of one operation's cost. */
	double w0 = qb_now_s(), wnow = w0;
	do {
		if (op(ctx, i++) != 0) {
			return -1;
		}
		wnow = qb_now_s();
	} while (wnow - w0 < plan->warmup_s);
	m->warmup_ops = i;
	m->warmup_s = wnow - w0;
	double est_op_s = m->warmup_s / (double) m->warmup_ops;

	uint64_t batch = plan->batch_ops;
	if (batch == 0) {
		double target = plan->total_ops > 0 ? est_op_s * (double) plan->total_ops / TARGET_BATCHES
		                                    : plan->duration_s / TARGET_BATCHES;
		if (target < MIN_BATCH_S) {
			target = MIN_BATCH_S;
		}
		batch = est_op_s > 0 ? (uint64_t) (target / est_op_s) : 1;
		if (batch == 0) {
			batch = 1;
		}
	}
	if (plan->total_ops > 0 && batch > plan->total_ops) {
		batch = plan->total_ops;
	}
	m->batch_ops = batch;

	size_t cap = 0;
	for (;;) {
		uint64_t n = batch;
		if (plan->total_ops > 0 && plan->total_ops - m->ops < n) {
			n = plan->total_ops - m->ops;
		}
		if (grow(m, &cap) != 0) {
			qb_measurement_free(m);
			return -1;
		}
		double t0 = qb_now_s();
		uint64_t c0 = qb_ticks();
		for (uint64_t k = 0; k < n; k++) {
			if (op(ctx, i++) != 0) {
				qb_measurement_free(m);
				return -1;
			}
		}
		uint64_t c1 = qb_ticks();
		double t1 = qb_now_s();
		m->batch_us_per_op[m->batches] = (t1 - t0) * 1e6 / (double) n;
		m->batch_ticks_per_op[m->batches] = (double) (c1 - c0) / (double) n;
		m->batches++;
		m->ops += n;
		m->elapsed_s += t1 - t0;
		m->ticks += c1 - c0;
		if (plan->total_ops > 0 ? m->ops >= plan->total_ops
		                        : (m->elapsed_s >= plan->duration_s && m->ops >= plan->min_ops)) {
			break;
		}
	}
	m->ops_per_s = (double) m->ops / m->elapsed_s;
	m->us_per_op = m->elapsed_s * 1e6 / (double) m->ops;
	m->ticks_per_op = qb_ticks_available() ? (double) m->ticks / (double) m->ops : NAN;
	if (qb_summarize(m->batch_us_per_op, m->batches, &m->batch_us) != 0) {
		qb_measurement_free(m);
		return -1;
	}
	return 0;
}

void qb_measurement_free(qb_measurement *m) {
	free(m->batch_us_per_op);
	free(m->batch_ticks_per_op);
	m->batch_us_per_op = NULL;
	m->batch_ticks_per_op = NULL;
}

void qb_measurement_json(qb_json *j, const char *key, const qb_measurement *m) {
	qb_json_object(j, key);
	qb_json_uint(j, "ops", m->ops);
	qb_json_uint(j, "batches", m->batches);
	qb_json_uint(j, "batch_ops", m->batch_ops);
	qb_json_num(j, "elapsed_s", m->elapsed_s);
	qb_json_num(j, "ops_per_s", m->ops_per_s);
	qb_json_num(j, "us_per_op", m->us_per_op);
	qb_json_num(j, "median_us_per_op", m->batch_us.median);
	qb_json_num(j, "tsc_ticks_per_op", m->ticks_per_op);
	qb_json_uint(j, "warmup_ops", m->warmup_ops);
	qb_json_num(j, "warmup_s", m->warmup_s);
	qb_summary_json(j, "batch_us_per_op", &m->batch_us);
	qb_json_end(j);
}
