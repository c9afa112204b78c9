/* bench_info.c - `list` (the schemes this build measures) and `stats` (the
 * statistics module applied to numbers read from stdin, so tests can check it against
 * values computed independently in Python). */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "stats.h"

static int list_one(const qb_opts *o, const qb_scheme *s, qb_json *j) {
	(void) o;
	printf("%-30s %-28s %4d %8zu %8zu %8zu\n", s->id, s->implementation, s->nist_level, s->pk_bytes, s->sk_bytes,
	       s->sig_max_bytes);
	qb_json_object(j, NULL);
	qb_scheme_json(j, s);
	qb_json_end(j);
	return 0;
}

int bench_list(const qb_opts *o, qb_json *j) {
	char header[128];
	snprintf(header, sizeof header, "%-30s %-28s %4s %8s %8s %8s\n", "Scheme", "Implementation", "NIST", "PK B", "SK B",
	         "Sig max");
	return qb_each_scheme(o, j, header, list_one);
}

int bench_stats(const qb_opts *o, qb_json *j) {
	(void) o;
	size_t n = 0, cap = 1024;
	double *x = malloc(cap * sizeof *x), v;
	int ret = QB_EXIT_FAIL;
	qb_summary s;
	while (x != NULL && scanf("%lf", &v) == 1) {
		if (n == cap) {
			double *y = realloc(x, 2 * cap * sizeof *x);
			if (y == NULL) {
				goto cleanup;
			}
			x = y;
			cap *= 2;
		}
		x[n++] = v;
	}
	if (x == NULL || !feof(stdin) || n == 0 || qb_summarize(x, n, &s) != 0) {
		fprintf(stderr, "error: stats reads one or more numbers from stdin, separated by white space\n");
		ret = QB_EXIT_USAGE;
		goto cleanup;
	}
	printf("n %zu mean %.10g median %.10g stdev %.10g skewness %.10g excess_kurtosis %.10g jarque_bera %.10g\n", s.n,
	       s.mean, s.median, s.stdev, s.skewness, s.excess_kurtosis, s.jarque_bera);
	qb_json_object(j, "results");
	qb_summary_json(j, "summary", &s);
	qb_json_end(j);
	ret = QB_EXIT_OK;
cleanup:
	free(x);
	return ret;
}
