/* bench.h - what every benchmark main shares: options, exit codes, helpers.
 *
 * A benchmark is one function `int bench_x(const qb_opts *o, qb_json *j)`: it prints
 * a human-readable table to stdout, writes its "results" object through `j`, and
 * returns an exit code. main.c parses the flags, prints the system header, writes
 * the JSON envelope around the results and frees everything on one path.
 */
#ifndef QB_BENCH_H
#define QB_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "measure.h"
#include "schemes.h"
#include "workload.h"

enum {
	QB_EXIT_OK = 0,
	QB_EXIT_FAIL = 1,  /* a library call failed, a verdict was wrong, or inspect found a surprise */
	QB_EXIT_USAGE = 2, /* bad flags or an unknown scheme */
};

/* Most schemes or thread counts one invocation handles. */
#define QB_MAX_LIST 96

typedef struct {
	const char *alg;         /* --alg: comma-separated schemes or groups */
	uint64_t iterations;     /* --iterations */
	uint64_t trials;         /* --trials */
	uint64_t batch;          /* --batch: operations per trial (statistical) */
	const char *threads;     /* --threads: comma-separated counts */
	double duration_s;       /* --duration (seconds) */
	double warmup_s;         /* --warmup (seconds) */
	size_t msg_bytes;        /* --msg-bytes */
	size_t ring;             /* --ring: messages per workload */
	uint64_t seed;           /* --seed */
	const char *op;          /* --op: verify or sign (multicore) */
	const char *json_path;   /* --json */
	bool corrupt_signature;  /* --corrupt-signature: test hook for inspect */
} qb_opts;

/* Resolve o->alg; prints the error and returns -1 when a name is unknown. */
int qb_opts_schemes(const qb_opts *o, const qb_scheme **out, size_t max);

/* Parse "1,2,4" into out[]; returns the count or -1 (message on stderr). */
int qb_parse_counts(const char *list, uint64_t *out, size_t max);

/* A measurement plan from the options: fixed count when --iterations was given
 * (iterations > 0), otherwise timed for --duration. */
qb_plan qb_opts_plan(const qb_opts *o);

/* Generate a key, sign a ring of messages (o->ring, o->msg_bytes, o->seed), then
 * time verifying them with `plan`. 0 on success; *ring_signed: signatures in the ring. */
int qb_measure_verify(const qb_opts *o, const qb_scheme *s, const qb_plan *plan, qb_measurement *m,
                      size_t *ring_signed);

/* Per-scheme benchmark body: write one object into the "schemes" array. 0 on success. */
typedef int (*qb_scheme_fn)(const qb_opts *o, const qb_scheme *s, qb_json *j);

/* Resolve o->alg, print `header` (if not NULL), then run `one` for every scheme
 * inside {"results": {"schemes": [...]}}. Returns the exit code. */
int qb_each_scheme(const qb_opts *o, qb_json *j, const char *header, qb_scheme_fn one);

/* Write the common description of a scheme: id, name, library, implementation,
 * post_quantum, nist_level (null when 0), public/secret key and max signature bytes. */
void qb_scheme_json(qb_json *j, const qb_scheme *s);

/* Benchmarks (bench_*.c). */
int bench_verify(const qb_opts *o, qb_json *j);
int bench_statistical(const qb_opts *o, qb_json *j);
int bench_compare(const qb_opts *o, qb_json *j);
int bench_multicore(const qb_opts *o, qb_json *j);
int bench_pool(const qb_opts *o, qb_json *j);
int bench_sizes(const qb_opts *o, qb_json *j);
int bench_classical(const qb_opts *o, qb_json *j);
int bench_all(const qb_opts *o, qb_json *j);
int bench_inspect(const qb_opts *o, qb_json *j);
int bench_invalid(const qb_opts *o, qb_json *j);
int bench_list(const qb_opts *o, qb_json *j);
int bench_stats(const qb_opts *o, qb_json *j);

#endif
