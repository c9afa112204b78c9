/* rows.h - one table row per scheme: key generation, signing and verification
 * throughput plus sizes. Shared by `compare`, `classical` and `all`, which differ only
 * in their default schemes and in the extra columns they ask for. */
#ifndef QB_ROWS_H
#define QB_ROWS_H

#include <stdbool.h>

#include "bench.h"

typedef struct {
	bool ratios;      /* compare: ratio of every row to the first */
	bool preparsed;   /* classical: also verify with a pre-parsed public key */
} qb_rows_options;

/* Measure every scheme of o->alg and write {"rows": [...], "ratios": [...]}. */
int qb_rows_bench(const qb_opts *o, qb_json *j, const qb_rows_options *ro);

#endif
