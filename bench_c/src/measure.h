/* measure.h - warm up, then time an operation in batches.
 *
 * The clock is read around batches of operations, never around each call. A plan
 * either fixes the number of timed operations (--iterations; with batch_ops equal to
 * it, one single timed pass) or runs batches until a duration has passed. The batch
 * size, when not given, is chosen from the warm-up so one batch lasts about
 * 1/200 of the duration (at least 1 ms, at least one operation): enough batches for a
 * median and percentiles, long enough that two clock reads per batch are noise.
 */
#ifndef QB_MEASURE_H
#define QB_MEASURE_H

#include <stdint.h>

#include "json.h"
#include "stats.h"

/* One timed operation; returns 0, or nonzero to abort the measurement. */
typedef int (*qb_op_fn)(void *ctx, uint64_t i);

typedef struct {
	double duration_s;  /* duration mode: time batches until this much has passed */
	uint64_t total_ops; /* fixed mode when > 0: exactly this many timed operations */
	uint64_t batch_ops; /* operations per timed batch; 0: sized from the warm-up */
	double warmup_s;    /* untimed warm-up (always at least one operation) */
	uint64_t min_ops;   /* duration mode: at least this many timed operations */
} qb_plan;

typedef struct {
	uint64_t ops, batches, batch_ops;
	double elapsed_s; /* sum of the batches' CLOCK_MONOTONIC time */
	uint64_t ticks;   /* sum of the batches' TSC ticks */
	double ops_per_s, us_per_op, ticks_per_op;
	uint64_t warmup_ops;
	double warmup_s;
	double *batch_us_per_op;    /* one value per batch */
	double *batch_ticks_per_op; /* one value per batch */
	qb_summary batch_us;        /* summary of batch_us_per_op */
} qb_measurement;

/* Time `op`; the operation index passed to it counts on from the warm-up's. Returns
 * 0, or -1 if an operation failed (its message is on stderr) or memory ran out. */
int qb_measure(qb_op_fn op, void *ctx, const qb_plan *plan, qb_measurement *m);
void qb_measurement_free(qb_measurement *m);

/* {"ops", "batches", "batch_ops", "elapsed_s", "ops_per_s", "us_per_op",
 *  "median_us_per_op", "tsc_ticks_per_op", "warmup_ops", "warmup_s",
 *  "batch_us_per_op": summary} */
void qb_measurement_json(qb_json *j, const char *key, const qb_measurement *m);

#endif
