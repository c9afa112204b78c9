/* json.c - see json.h. */
#include "json.h"

#include <inttypes.h>
#include <math.h>

void qb_json_init(qb_json *j, FILE *f) {
	j->f = f;
	j->depth = 0;
	j->has_items[0] = false;
	j->is_array[0] = true; /* the top level behaves like an array of one value */
}

static void indent(qb_json *j) {
	fputc('\n', j->f);
	for (int i = 0; i < j->depth; i++) {
		fputs("  ", j->f);
	}
}

static void write_string(FILE *f, const char *s) {
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *) s; *p; p++) {
		switch (*p) {
		case '"':
			fputs("\\\"", f);
			break;
		case '\\':
			fputs("\\\\", f);
			break;
		case '\n':
			fputs("\\n", f);
			break;
		case '\t':
			fputs("\\t", f);
			break;
		case '\r':
			fputs("\\r", f);
			break;
		default:
			if (*p < 0x20) {
				fprintf(f, "\\u%04x", *p);
			} else {
				fputc(*p, f);
			}
		}
	}
	fputc('"', f);
}

/* Comma, newline and key before a value. */
static void prefix(qb_json *j, const char *key) {
	if (j->has_items[j->depth]) {
		fputc(',', j->f);
	}
	j->has_items[j->depth] = true;
	if (j->depth > 0) {
		indent(j);
	}
	if (key != NULL && !j->is_array[j->depth]) {
		write_string(j->f, key);
		fputs(": ", j->f);
	}
}

static void open_container(qb_json *j, const char *key, bool array) {
	if (j->f == NULL) {
		return;
	}
	prefix(j, key);
	fputc(array ? '[' : '{', j->f);
	if (j->depth + 1 < QB_JSON_MAX_DEPTH) {
		j->depth++;
		j->has_items[j->depth] = false;
		j->is_array[j->depth] = array;
	}
}

void qb_json_object(qb_json *j, const char *key) { open_container(j, key, false); }
void qb_json_array(qb_json *j, const char *key) { open_container(j, key, true); }

void qb_json_end(qb_json *j) {
	if (j->f == NULL || j->depth == 0) {
		return;
	}
	bool array = j->is_array[j->depth];
	bool had_items = j->has_items[j->depth];
	j->depth--;
	if (had_items) {
		indent(j);
	}
	fputc(array ? ']' : '}', j->f);
	if (j->depth == 0) {
		fputc('\n', j->f);
	}
}

void qb_json_unwind(qb_json *j, int depth) {
	while (j->f != NULL && j->depth > depth) {
		qb_json_end(j);
	}
}

void qb_json_str(qb_json *j, const char *key, const char *value) {
	if (j->f == NULL) {
		return;
	}
	prefix(j, key);
	if (value == NULL) {
		fputs("null", j->f);
	} else {
		write_string(j->f, value);
	}
}

void qb_json_num(qb_json *j, const char *key, double value) {
	if (j->f == NULL) {
		return;
	}
	prefix(j, key);
	if (!isfinite(value)) {
		fputs("null", j->f);
	} else {
		/* 10 significant digits: more than any timing here can resolve, and sizes and
		 * counts (exact integers below 1e10) print exactly. */
		fprintf(j->f, "%.10g", value);
	}
}

void qb_json_int(qb_json *j, const char *key, long long value) {
	if (j->f == NULL) {
		return;
	}
	prefix(j, key);
	fprintf(j->f, "%lld", value);
}

void qb_json_uint(qb_json *j, const char *key, uint64_t value) {
	if (j->f == NULL) {
		return;
	}
	prefix(j, key);
	fprintf(j->f, "%" PRIu64, value);
}

void qb_json_bool(qb_json *j, const char *key, bool value) {
	if (j->f == NULL) {
		return;
	}
	prefix(j, key);
	fputs(value ? "true" : "false", j->f);
}

void qb_json_null(qb_json *j, const char *key) {
	if (j->f == NULL) {
		return;
	}
	prefix(j, key);
	fputs("null", j->f);
}
