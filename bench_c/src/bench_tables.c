/* bench_tables.c - `compare`, `classical` and `all`: the same per-scheme table
 * (rows.c) with different default schemes (main.c) and columns. */
#include "rows.h"

/* Falcon-512 vs ML-DSA-44 by default, with each row's ratio to the first. */
int bench_compare(const qb_opts *o, qb_json *j) {
	qb_rows_options ro = {.ratios = true};
	return qb_rows_bench(o, j, &ro);
}

/* The classical baselines, with verification also timed from a pre-parsed key. */
int bench_classical(const qb_opts *o, qb_json *j) {
	qb_rows_options ro = {.preparsed = true};
	return qb_rows_bench(o, j, &ro);
}

/* Every scheme liboqs was built with, plus the classical ones. */
int bench_all(const qb_opts *o, qb_json *j) {
	qb_rows_options ro = {0};
	return qb_rows_bench(o, j, &ro);
}
