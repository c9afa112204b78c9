/* json.h - a small streaming JSON writer for result files.
 *
 * Every value is written with its key (NULL inside arrays and at the top level); the
 * writer tracks nesting and commas, escapes strings, and writes non-finite numbers as
 * null (JSON has no NaN). qb_json_unwind() closes whatever is open down to a depth, so
 * a benchmark that fails half-way still leaves a well-formed file that says it failed.
 *
 * It writes to a FILE* it does not own and never allocates. A writer with f == NULL
 * accepts every call and writes nothing, so benchmarks need no "if (json)" branches.
 */
#ifndef QB_JSON_H
#define QB_JSON_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Deepest nesting we write; our documents stay under 8 levels. */
#define QB_JSON_MAX_DEPTH 32

typedef struct {
	FILE *f;
	int depth;
	bool has_items[QB_JSON_MAX_DEPTH];
	bool is_array[QB_JSON_MAX_DEPTH];
} qb_json;

void qb_json_init(qb_json *j, FILE *f);
void qb_json_object(qb_json *j, const char *key);
void qb_json_array(qb_json *j, const char *key);
void qb_json_end(qb_json *j);
/* Close every open container deeper than `depth`. */
void qb_json_unwind(qb_json *j, int depth);

void qb_json_str(qb_json *j, const char *key, const char *value); /* NULL -> null */
void qb_json_num(qb_json *j, const char *key, double value);       /* NaN/inf -> null */
void qb_json_int(qb_json *j, const char *key, long long value);
void qb_json_uint(qb_json *j, const char *key, uint64_t value);
void qb_json_bool(qb_json *j, const char *key, bool value);
void qb_json_null(qb_json *j, const char *key);

#endif
