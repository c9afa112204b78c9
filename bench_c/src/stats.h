/* stats.h - descriptive statistics of a sample of timings (or sizes).
 *
 * Mean, variance, skewness and kurtosis come from one online pass (Welford's update,
 * extended to the third and fourth central moments by Terriberry/Pebay), so they are
 * numerically stable for samples whose spread is tiny next to their mean. Percentiles
 * come from a sorted copy, interpolated linearly between order statistics (the
 * "type 7" rule of R and numpy's default), so Python can check them exactly.
 *
 * Definitions (documented in docs/benchmarks.md):
 *   stdev       sample standard deviation (n - 1 in the denominator)
 *   cv          stdev / mean
 *   skewness    g1 = m3 / m2^1.5           (population central moments m_k)
 *   excess_kurtosis  g2 = m4 / m2^2 - 3
 *   jarque_bera n/6 * (g1^2 + g2^2/4); the sample is "consistent with normal" when it
 *               is at most 5.991, the 95th percentile of chi-squared with 2 degrees of
 *               freedom (the test's asymptotic null distribution)
 *   outliers_3sigma  count of |x - mean| > 3 * stdev
 *
 * This module does no I/O except qb_summary_json() and allocates only the sorted copy.
 */
#ifndef QB_STATS_H
#define QB_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"

/* Critical value of chi-squared(2) at the 5% level (Jarque-Bera's null distribution). */
#define QB_JB_CRITICAL_5PCT 5.991

typedef struct {
	uint64_t n;
	double mean, m2, m3, m4; /* running central-moment sums */
	double min, max;
} qb_moments;

void qb_moments_init(qb_moments *m);
void qb_moments_add(qb_moments *m, double x);
double qb_moments_stdev(const qb_moments *m); /* sample stdev; 0 when n < 2 */

typedef struct {
	size_t n;
	double mean, stdev, cv, min, max;
	double p1, p5, p25, median, p75, p95, p99, iqr;
	size_t outliers_3sigma;
	double skewness, excess_kurtosis, jarque_bera; /* NaN when the sample has no spread */
	bool normal_5pct;                              /* Jarque-Bera <= QB_JB_CRITICAL_5PCT */
} qb_summary;

/* Percentile p (0..100) of an ascending array, type-7 interpolation. */
double qb_percentile_sorted(const double *sorted, size_t n, double p);

/* Summarize n >= 1 values (the input is not modified). Returns 0, or -1 when n == 0
 * or the sorted copy cannot be allocated. */
int qb_summarize(const double *x, size_t n, qb_summary *out);

/* The recommendation the distribution implies: "mean_stdev" or "median_iqr". */
const char *qb_summary_recommendation(const qb_summary *s);

/* Write the summary as a JSON object under `key`. */
void qb_summary_json(qb_json *j, const char *key, const qb_summary *s);

#endif
