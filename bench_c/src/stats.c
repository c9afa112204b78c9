/* stats.c - see stats.h. */
#include "stats.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void qb_moments_init(qb_moments *m) {
	memset(m, 0, sizeof *m);
	m->min = INFINITY;
	m->max = -INFINITY;
}

/* One-pass update of the first four central moments (Terriberry's extension of
 * Welford's algorithm); m2..m4 are sums of powers of deviations from the mean. */
void qb_moments_add(qb_moments *m, double x) {
	double n1 = (double) m->n;
	m->n++;
	double n = (double) m->n;
	double delta = x - m->mean;
	double delta_n = delta / n;
	double delta_n2 = delta_n * delta_n;
	double term1 = delta * delta_n * n1;
	m->mean += delta_n;
	m->m4 += term1 * delta_n2 * (n * n - 3 * n + 3) + 6 * delta_n2 * m->m2 - 4 * delta_n * m->m3;
	m->m3 += term1 * delta_n * (n - 2) - 3 * delta_n * m->m2;
	m->m2 += term1;
	if (x < m->min) {
		m->min = x;
	}
	if (x > m->max) {
		m->max = x;
	}
}

double qb_moments_stdev(const qb_moments *m) {
	return m->n < 2 ? 0.0 : sqrt(m->m2 / (double) (m->n - 1));
}

double qb_percentile_sorted(const double *sorted, size_t n, double p) {
	if (n == 0) {
		return NAN;
	}
	double h = (double) (n - 1) * p / 100.0;
	size_t lo = (size_t) floor(h);
	if (lo >= n - 1) {
		return sorted[n - 1];
	}
	return sorted[lo] + (h - (double) lo) * (sorted[lo + 1] - sorted[lo]);
}

static int cmp_double(const void *a, const void *b) {
	double x = *(const double *) a, y = *(const double *) b;
	return (x > y) - (x < y);
}

int qb_summarize(const double *x, size_t n, qb_summary *out) {
	memset(out, 0, sizeof *out);
	if (n == 0) {
		return -1;
	}
	double *sorted = malloc(n * sizeof *sorted);
	if (sorted == NULL) {
		return -1;
	}
	qb_moments m;
	qb_moments_init(&m);
	for (size_t i = 0; i < n; i++) {
		qb_moments_add(&m, x[i]);
		sorted[i] = x[i];
	}
	qsort(sorted, n, sizeof *sorted, cmp_double);

	out->n = n;
	out->mean = m.mean;
	out->stdev = qb_moments_stdev(&m);
	out->cv = m.mean != 0.0 ? out->stdev / m.mean : NAN;
	out->min = sorted[0];
	out->max = sorted[n - 1];
	out->p1 = qb_percentile_sorted(sorted, n, 1);
	out->p5 = qb_percentile_sorted(sorted, n, 5);
	out->p25 = qb_percentile_sorted(sorted, n, 25);
	out->median = qb_percentile_sorted(sorted, n, 50);
	out->p75 = qb_percentile_sorted(sorted, n, 75);
	out->p95 = qb_percentile_sorted(sorted, n, 95);
	out->p99 = qb_percentile_sorted(sorted, n, 99);
	out->iqr = out->p75 - out->p25;
	free(sorted);

	out->outliers_3sigma = 0;
	for (size_t i = 0; i < n; i++) {
		if (fabs(x[i] - m.mean) > 3.0 * out->stdev) {
			out->outliers_3sigma++;
		}
	}
	/* Population moments; with no spread the shape statistics are undefined. */
	double pm2 = m.m2 / (double) n;
	if (n >= 2 && pm2 > 0.0) {
		out->skewness = (m.m3 / (double) n) / pow(pm2, 1.5);
		out->excess_kurtosis = (m.m4 / (double) n) / (pm2 * pm2) - 3.0;
		out->jarque_bera = (double) n / 6.0 *
		                   (out->skewness * out->skewness + out->excess_kurtosis * out->excess_kurtosis / 4.0);
		out->normal_5pct = out->jarque_bera <= QB_JB_CRITICAL_5PCT;
	} else {
		out->skewness = NAN;
		out->excess_kurtosis = NAN;
		out->jarque_bera = NAN;
		out->normal_5pct = false;
	}
	return 0;
}

const char *qb_summary_recommendation(const qb_summary *s) {
	return s->normal_5pct ? "mean_stdev" : "median_iqr";
}

void qb_summary_json(qb_json *j, const char *key, const qb_summary *s) {
	qb_json_object(j, key);
	qb_json_uint(j, "n", s->n);
	qb_json_num(j, "mean", s->mean);
	qb_json_num(j, "median", s->median);
	qb_json_num(j, "stdev", s->stdev);
	qb_json_num(j, "cv", s->cv);
	qb_json_num(j, "min", s->min);
	qb_json_num(j, "p1", s->p1);
	qb_json_num(j, "p5", s->p5);
	qb_json_num(j, "p25", s->p25);
	qb_json_num(j, "p75", s->p75);
	qb_json_num(j, "p95", s->p95);
	qb_json_num(j, "p99", s->p99);
	qb_json_num(j, "max", s->max);
	qb_json_num(j, "iqr", s->iqr);
	qb_json_uint(j, "outliers_3sigma", s->outliers_3sigma);
	qb_json_num(j, "skewness", s->skewness);
	qb_json_num(j, "excess_kurtosis", s->excess_kurtosis);
	qb_json_num(j, "jarque_bera", s->jarque_bera);
	qb_json_bool(j, "normal_5pct", s->normal_5pct);
	qb_json_str(j, "recommendation", qb_summary_recommendation(s));
	qb_json_end(j);
}
